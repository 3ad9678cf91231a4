// Command record-agents records the requests an agent client sends, for
// server/testdata/agents: it listens on ADDR (127.0.0.1 only, so that the
// client reaches nothing else), saves each request's body as
// DIR/NNN_path.json with its method, path and headers beside it, and
// answers in the request's dialect with a fixed streamed "Hi" (Messages,
// Responses, chat completions), or, to the first request whose prompt says
// TOOLTEST and that offers a known shell tool, with a call of that tool, so
// that the client goes on to send the tool's result.
//
//	go run ./internal/cmd/record-agents 127.0.0.1:18231 DIR
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

func main() {
	if len(os.Args) != 3 {
		log.Fatal("usage: record-agents ADDR DIR")
	}
	addr, dir := os.Args[1], os.Args[2]
	if host, _, err := net.SplitHostPort(addr); err != nil || !net.ParseIP(host).IsLoopback() {
		log.Fatalf("record-agents: %q is not a loopback address", addr)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	var n atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<20))
		i := n.Add(1)
		hdr := map[string]string{}
		for k, v := range r.Header {
			hdr[k] = strings.Join(v, ", ")
		}
		meta, _ := json.MarshalIndent(map[string]any{"method": r.Method, "path": r.URL.String(), "header": hdr}, "", " ")
		name := fmt.Sprintf("%03d%s", i, strings.ReplaceAll(r.URL.Path, "/", "_"))
		if err := os.WriteFile(filepath.Join(dir, name+".meta.json"), meta, 0o644); err != nil {
			log.Print(err)
		}
		if len(body) > 0 {
			if err := os.WriteFile(filepath.Join(dir, name+".json"), body, 0o644); err != nil {
				log.Print(err)
			}
		}
		log.Printf("%s %s %d bytes", r.Method, r.URL, len(body))
		var req struct {
			Stream bool   `json:"stream"`
			Model  string `json:"model"`
		}
		_ = json.Unmarshal(body, &req) // a body that is not JSON gets the plain answers
		p := r.URL.Path
		tool, args := pickTool(body)
		fl := func() { w.(http.Flusher).Flush() }
		sse := func(ev string, v any) {
			b, _ := json.Marshal(v)
			if ev != "" {
				fmt.Fprintf(w, "event: %s\n", ev)
			}
			fmt.Fprintf(w, "data: %s\n\n", b)
			fl()
		}
		switch {
		case strings.HasSuffix(p, "/messages/count_tokens"):
			json.NewEncoder(w).Encode(map[string]int{"input_tokens": 10})
		case strings.HasSuffix(p, "/messages"):
			msg := map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": req.Model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": map[string]int{"input_tokens": 10, "output_tokens": 1}}
			if !req.Stream {
				msg["content"] = []any{map[string]any{"type": "text", "text": "Hi"}}
				msg["stop_reason"] = "end_turn"
				w.Header().Set("Content-Type", "application/json")
				json.NewEncoder(w).Encode(msg)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			sse("message_start", map[string]any{"type": "message_start", "message": msg})
			if tool != "" {
				sse("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "tool_use", "id": "toolu_1", "name": tool, "input": map[string]any{}}})
				sse("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": args}})
				sse("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
				sse("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "tool_use", "stop_sequence": nil}, "usage": map[string]int{"output_tokens": 1}})
				sse("message_stop", map[string]any{"type": "message_stop"})
				return
			}
			sse("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
			sse("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "Hi"}})
			sse("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
			sse("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil}, "usage": map[string]int{"output_tokens": 1}})
			sse("message_stop", map[string]any{"type": "message_stop"})
		case strings.HasSuffix(p, "/responses"):
			now := time.Now().Unix()
			resp := map[string]any{"id": "resp_1", "object": "response", "created_at": now, "status": "in_progress", "model": req.Model, "output": []any{}}
			item := map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "status": "completed", "content": []any{map[string]any{"type": "output_text", "text": "Hi", "annotations": []any{}}}}
			w.Header().Set("Content-Type", "text/event-stream")
			sse("response.created", map[string]any{"type": "response.created", "response": resp})
			if tool != "" {
				fc := map[string]any{"id": "fc_1", "type": "function_call", "status": "in_progress", "call_id": "call_1", "name": tool, "arguments": ""}
				sse("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0, "item": fc})
				sse("response.function_call_arguments.delta", map[string]any{"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": args})
				sse("response.function_call_arguments.done", map[string]any{"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 0, "arguments": args})
				fc = map[string]any{"id": "fc_1", "type": "function_call", "status": "completed", "call_id": "call_1", "name": tool, "arguments": args}
				sse("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": fc})
				resp["status"] = "completed"
				resp["output"] = []any{fc}
				resp["usage"] = map[string]any{"input_tokens": 10, "output_tokens": 1, "total_tokens": 11, "input_tokens_details": map[string]int{"cached_tokens": 0}, "output_tokens_details": map[string]int{"reasoning_tokens": 0}}
				sse("response.completed", map[string]any{"type": "response.completed", "response": resp})
				return
			}
			sse("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0, "item": map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "status": "in_progress", "content": []any{}}})
			sse("response.output_text.delta", map[string]any{"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": "Hi"})
			sse("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
			resp["status"] = "completed"
			resp["output"] = []any{item}
			resp["usage"] = map[string]any{"input_tokens": 10, "output_tokens": 1, "total_tokens": 11, "input_tokens_details": map[string]int{"cached_tokens": 0}, "output_tokens_details": map[string]int{"reasoning_tokens": 0}}
			sse("response.completed", map[string]any{"type": "response.completed", "response": resp})
		case strings.HasSuffix(p, "/chat/completions"):
			usage := map[string]int{"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}
			if !req.Stream {
				w.Header().Set("Content-Type", "application/json")
				json.NewEncoder(w).Encode(map[string]any{"id": "c1", "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
					"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}}, "usage": usage})
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			chunk := func(delta map[string]any, fin any) map[string]any {
				return map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": req.Model,
					"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": fin}}}
			}
			sse("", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
			if tool != "" {
				sse("", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "call_1", "type": "function", "function": map[string]any{"name": tool, "arguments": args}}}}, nil))
				sse("", chunk(map[string]any{}, "tool_calls"))
				sse("", map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": req.Model, "choices": []any{}, "usage": usage})
				fmt.Fprint(w, "data: [DONE]\n\n")
				return
			}
			sse("", chunk(map[string]any{"content": "Hi"}, nil))
			sse("", chunk(map[string]any{}, "stop"))
			sse("", map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": req.Model, "choices": []any{}, "usage": usage})
			fmt.Fprint(w, "data: [DONE]\n\n")
		case strings.HasSuffix(p, "/models"):
			json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": []any{map[string]any{"id": "gemma", "object": "model", "owned_by": "llamacpp"}}})
		default:
			http.NotFound(w, r)
		}
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

// pickTool answers a request that asks for TOOLTEST, offers a known tool and
// holds no tool result yet with a call of that tool.
func pickTool(body []byte) (string, string) {
	s := string(body)
	if !strings.Contains(s, "TOOLTEST") || strings.Contains(s, "tool_result") || strings.Contains(s, "function_call_output") || strings.Contains(s, `"role":"tool"`) {
		return "", ""
	}
	for _, c := range []struct{ name, args string }{
		{"Bash", `{"command":"echo hi","description":"Print hi"}`},
		{"exec_command", `{"cmd":"echo hi"}`},
		{"bash", `{"command":"echo hi","description":"Print hi"}`},
		{"run_shell_command", `{"command":"echo hi","description":"Print hi"}`},
		{"glob", `{"pattern":"*.txt"}`},
	} {
		if strings.Contains(s, `"name":"`+c.name+`"`) {
			return c.name, c.args
		}
	}
	return "", ""
}
