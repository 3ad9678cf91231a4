package server

// Fuzz targets for the request decoding of every dialect. Each feeds
// arbitrary bodies to a route's real handler (in process, through
// Server.Handler, generation capped at two tokens) and requires what the
// hostile suite requires: a 2xx, or a 4xx with an error object; never a
// 5xx (a recovered panic is a 500) and never a crash. Seeds are the
// route's valid body and the files of testdata/fuzz/<target>.
//
// Run one for a while with, e.g.:
//
//	go test -run XXX -fuzz FuzzChatRequest -fuzztime 30s ./server/

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/x/llama/engine"

	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
)

// fuzzRoute fuzzes the bodies of path on a server started with o.
func fuzzRoute(f *testing.F, o Options, path string, seeds ...string) {
	for _, s := range seeds {
		f.Add(s)
	}
	o.NPredict = 2
	o.MaxBodyBytes = 1 << 20
	s, _ := newTestServer(f, o)
	h := s.Handler()
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		code := rec.Code
		switch {
		case code >= 200 && code < 300:
		case code >= 400 && code < 500 && strings.HasPrefix(path, "/api/"):
			// Ollama's shape: {"error": "message"}.
			var e struct {
				Error *string `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == nil || *e.Error == "" {
				t.Fatalf("status %d without an error: %.300s", code, rec.Body.Bytes())
			}
		case code >= 400 && code < 500:
			var e struct {
				Error *struct {
					Message *string `json:"message"`
					Type    *string `json:"type"`
				} `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == nil || e.Error.Message == nil || e.Error.Type == nil {
				t.Fatalf("status %d without an error object: %.300s", code, rec.Body.Bytes())
			}
		default:
			t.Fatalf("status %d for %.300q: %.300s", code, body, rec.Body.Bytes())
		}
		if bytes.Contains(rec.Body.Bytes(), []byte("internal error")) {
			t.Fatalf("a recovered panic: %.300s", rec.Body.Bytes())
		}
	})
}

func FuzzCompletionRequest(f *testing.F) {
	fuzzRoute(f, Options{}, "/completion",
		`{"prompt":"Once","n_predict":2}`,
		`{"prompt":["a",[1,2,"b"]],"n_probs":3,"stream":true,"repeat_last_n":2147483647,"repeat_penalty":1.1}`,
		`{"prompt":"x","grammar":"root ::= [a-z]+","logit_bias":[["a",false]],"samplers":"kpt","stop":["."]}`,
		`{"prompt":"x","json_schema":{"type":"object","properties":{"a":{"type":"integer"}}},"dry_multiplier":0.8}`)
}

func FuzzOpenAICompletionRequest(f *testing.F) {
	fuzzRoute(f, Options{}, "/v1/completions",
		`{"prompt":"Once","max_tokens":2}`,
		`{"prompt":"Once upon","max_tokens":2,"echo":true,"logprobs":3,"stream":true}`,
		`{"prompt":["a","b"],"max_tokens":1,"echo":true,"logprobs":0,"n":2,"seed":4294967295}`,
		`{"prompt":"def f(","suffix":"return x","max_tokens":2,"logprobs":1}`)
}

func FuzzChatRequest(f *testing.F) {
	fuzzRoute(f, Options{}, "/v1/chat/completions",
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`,
		`{"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"}]}],"stream":true,"stream_options":{"include_usage":true},"logprobs":true,"top_logprobs":2}`,
		`{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"string"}}}}}],"tool_choice":"required"}`,
		`{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"array","items":{"type":"boolean"}}}}}`,
		`{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"g"}}],"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"required","tools":[{"type":"function","function":{"name":"g"}}]}},"n":2,"seed":1}`,
		`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{}"}},{"role":"function","name":"f","content":"ok"}],"response_format":{"type":"json_object"},"logprobs":true,"top_logprobs":0}`)
}

func FuzzResponsesRequest(f *testing.F) {
	fuzzRoute(f, Options{}, "/v1/responses",
		`{"input":"hi","max_output_tokens":2}`,
		`{"input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}],"instructions":"be brief","stream":true}`,
		`{"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"ok"}],"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]}`,
		`{"input":"hi","text":{"format":{"type":"json_schema","name":"x","schema":{"type":"integer"}}}}`)
}

func FuzzAnthropicRequest(f *testing.F) {
	fuzzRoute(f, Options{}, "/v1/messages",
		`{"model":"m","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","max_tokens":2,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"stream":true,"stop_sequences":["."]}`,
		`{"model":"m","max_tokens":2,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}]}`,
		`{"model":"m","max_tokens":2,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled","budget_tokens":1024}}`)
}

func FuzzOllamaChatRequest(f *testing.F) {
	fuzzRoute(f, Options{}, "/api/chat",
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"options":{"num_predict":2}}`,
		`{"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}],"stream":false,"format":"json","think":"high","options":{"temperature":0,"stop":["."],"seed":3,"num_ctx":8}}`,
		`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]},{"role":"tool","content":"ok","tool_name":"f"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`,
		`{"messages":[{"role":"user","content":"hi"}],"format":{"type":"array","items":{"type":"integer"}},"keep_alive":"5m"}`)
}

func FuzzOllamaGenerateRequest(f *testing.F) {
	fuzzRoute(f, Options{}, "/api/generate",
		`{"model":"m","prompt":"hi","options":{"num_predict":2}}`,
		`{"prompt":"Once","raw":true,"stream":false,"context":[1,2,3],"options":{"top_k":2,"num_predict":-2}}`,
		`{"prompt":"x","system":"s","format":{"type":"object"},"think":false}`,
		`{"prompt":"def f(","suffix":"return 1","raw":true}`)
}

func FuzzTokenizeRequest(f *testing.F) {
	fuzzRoute(f, Options{}, "/tokenize",
		`{"content":"hello"}`,
		`{"content":["a",1,"b"],"add_special":true,"parse_special":false,"with_pieces":true}`,
		`{"content":"<|im_start|>x\u00e9\ud83d\ude00"}`)
}

func FuzzEmbeddingsRequest(f *testing.F) {
	fuzzRoute(f, Options{Model: testenv.Model(f, "stories260K.gguf"), Engine: engine.Options{
		Embedding: true, Context: llama.ContextOptions{Pooling: llama.PoolingMean, ContextSize: 1024}, Parallel: 2}}, "/v1/embeddings",
		`{"input":"hello"}`,
		`{"input":["a","b",[1,2,"c"]],"encoding_format":"base64"}`,
		`{"content":[1,2,3],"embd_normalize":-1}`)
}

func FuzzRerankRequest(f *testing.F) {
	fuzzRoute(f, Options{Model: writeTinyBert(f, 1, 0), Engine: engine.Options{
		Embedding: true, Reranking: true, Context: llama.ContextOptions{Pooling: llama.PoolingRank, ContextSize: 1024, BatchSize: 512, UBatchSize: 512}, Parallel: 2}}, "/v1/rerank",
		`{"query":"a","documents":["b","c"]}`,
		`{"query":"a","texts":["b"],"top_n":1,"return_text":true}`,
		`{"query":"a","documents":["b","c"],"return_documents":true,"top_n":-3}`)
}
