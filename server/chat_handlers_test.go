package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/x/llama/engine"
	"github.com/x/llama/sampling"
	"github.com/x/llama/server/internal/wire"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/chat"
	"github.com/x/llama/internal/testenv"
)

// streamedChat posts a streaming chat request and joins its deltas.
func streamedChat(t *testing.T, url string, body map[string]any) (content, reasoning string, finish string, chunks []map[string]any) {
	t.Helper()
	body["stream"] = true
	for _, e := range sseEvents(t, url, body) {
		if e == "[DONE]" {
			continue
		}
		var c map[string]any
		require.NoError(t, json.Unmarshal([]byte(e), &c), e)
		chunks = append(chunks, c)
		for _, ch := range c["choices"].([]any) {
			choice := ch.(map[string]any)
			d := choice["delta"].(map[string]any)
			if s, ok := d["content"].(string); ok {
				content += s
			}
			if s, ok := d["reasoning_content"].(string); ok {
				reasoning += s
			}
			if fr, ok := choice["finish_reason"].(string); ok {
				finish = fr
			}
		}
	}
	return content, reasoning, finish, chunks
}

// The model's output is read with the chat parser: a grammar makes the
// tiny model write a thinking block, which goes to reasoning_content
// unless reasoning_format is none.
func TestChatReasoning(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	url := ts.URL + "/v1/chat/completions"
	req := func(extra map[string]any) map[string]any {
		m := map[string]any{
			"messages":    []any{map[string]any{"role": "user", "content": "Hi"}},
			"grammar":     `root ::= "<think>I should greet.</think>Hello there."`,
			"temperature": 0, "max_tokens": 64,
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		format             string
		content, reasoning string
	}{
		{"", "Hello there.", "I should greet."},
		{"deepseek", "Hello there.", "I should greet."},
		{"none", "<think>I should greet.</think>Hello there.", ""},
	} {
		t.Run("format "+tc.format, func(t *testing.T) {
			extra := map[string]any{}
			if tc.format != "" {
				extra["reasoning_format"] = tc.format
			}
			code, out := postJSON(t, url, req(extra))
			require.Equal(t, http.StatusOK, code, "%v", out)
			choice := out["choices"].([]any)[0].(map[string]any)
			msg := choice["message"].(map[string]any)
			assert.Equal(t, tc.content, msg["content"])
			if tc.reasoning == "" {
				assert.NotContains(t, msg, "reasoning_content")
			} else {
				assert.Equal(t, tc.reasoning, msg["reasoning_content"])
			}
			assert.Equal(t, "stop", choice["finish_reason"])

			content, reasoning, finish, chunks := streamedChat(t, url, req(extra))
			assert.Equal(t, tc.content, content)
			assert.Equal(t, tc.reasoning, reasoning)
			assert.Equal(t, "stop", finish)
			first := chunks[0]["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)
			assert.Equal(t, "assistant", first["role"])
		})
	}
}

func TestChatFeatures(t *testing.T) {
	_, ts := newTestServer(t, Options{ChatTemplate: genericToolsTemplate})
	url := ts.URL + "/v1/chat/completions"
	t.Run("content parts and roles", func(t *testing.T) {
		code, out := postJSON(t, url, map[string]any{
			"messages": []any{
				map[string]any{"role": "developer", "content": "Be brief."},
				map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "What is the weather?"}}},
				map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "weather", "arguments": `{"city":"Paris"}`}}}},
				map[string]any{"role": "tool", "tool_call_id": "c1", "content": "sunny"},
			},
			"temperature": 0, "max_tokens": 4,
		})
		require.Equal(t, http.StatusOK, code, "%v", out)
		assert.Equal(t, float64(4), out["usage"].(map[string]any)["completion_tokens"])
	})
	t.Run("model echoed", func(t *testing.T) {
		code, out := postJSON(t, url, map[string]any{"model": "my-model", "messages": []any{map[string]any{"role": "user", "content": "x"}}, "max_tokens": 1})
		require.Equal(t, http.StatusOK, code, "%v", out)
		assert.Equal(t, "my-model", out["model"])
		assert.Contains(t, out, "timings")
	})
	t.Run("json_object", func(t *testing.T) {
		code, out := postJSON(t, url, map[string]any{
			"messages":        []any{map[string]any{"role": "user", "content": "x"}},
			"response_format": map[string]any{"type": "json_object"},
			"temperature":     0, "max_tokens": 40,
		})
		require.Equal(t, http.StatusOK, code, "%v", out)
		choice := out["choices"].([]any)[0].(map[string]any)
		content := choice["message"].(map[string]any)["content"].(string)
		if choice["finish_reason"] == "stop" {
			assert.True(t, json.Valid([]byte(content)), content)
		}
		assert.NotEmpty(t, content)
	})
	t.Run("tools and a response format", func(t *testing.T) {
		// OpenAI's agents with an output type send both: the answer is a
		// call or the schema's JSON (llama-server's grammar allows the
		// JSON alone).
		finishes := map[string]int{}
		for seed := range 4 {
			// Odd seeds are pushed towards a call's first character
			// (stories260K's token 504, "<").
			bias := []any{}
			if seed%2 == 1 {
				bias = []any{[]any{504, 50}}
			}
			code, out := postJSON(t, url, map[string]any{"logit_bias": bias,
				"messages": []any{map[string]any{"role": "user", "content": "x"}},
				"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "f",
					"parameters": map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}, "required": []string{"n"}}}}},
				"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "out", "schema": map[string]any{
					"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "boolean"}}, "required": []string{"answer"}, "additionalProperties": false}}},
				"temperature": 1.5, "seed": seed, "max_tokens": 200,
			})
			require.Equal(t, http.StatusOK, code, "%v", out)
			choice := out["choices"].([]any)[0].(map[string]any)
			msg := choice["message"].(map[string]any)
			switch choice["finish_reason"] {
			case "tool_calls":
				call := msg["tool_calls"].([]any)[0].(map[string]any)["function"].(map[string]any)
				assert.Equal(t, "f", call["name"])
				var args struct{ N *int }
				require.NoError(t, json.Unmarshal([]byte(call["arguments"].(string)), &args))
				assert.NotNil(t, args.N)
			case "stop":
				var answer map[string]any
				require.NoError(t, json.Unmarshal([]byte(msg["content"].(string)), &answer), "%v", msg)
				assert.IsType(t, true, answer["answer"])
				assert.Len(t, answer, 1)
			default:
				t.Errorf("seed %d: cut at the limit: %v", seed, msg)
			}
			finishes[choice["finish_reason"].(string)]++
		}
		assert.Equal(t, map[string]int{"stop": 2, "tool_calls": 2}, finishes)
	})
	t.Run("tool_choice none ignores tools", func(t *testing.T) {
		code, out := postJSON(t, url, map[string]any{
			"messages":    []any{map[string]any{"role": "user", "content": "x"}},
			"tools":       []any{map[string]any{"type": "function", "function": map[string]any{"name": "f", "parameters": map[string]any{"type": "object"}}}},
			"tool_choice": "none", "temperature": 0, "max_tokens": 8,
		})
		require.Equal(t, http.StatusOK, code, "%v", out)
		choice := out["choices"].([]any)[0].(map[string]any)
		assert.Equal(t, "length", choice["finish_reason"])
		assert.NotContains(t, choice["message"], "tool_calls")
	})
	t.Run("named tool choice streamed", func(t *testing.T) {
		body := map[string]any{
			"messages": []any{map[string]any{"role": "user", "content": "x"}},
			"tools": []any{
				map[string]any{"type": "function", "function": map[string]any{"name": "a", "parameters": map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}, "required": []string{"ok"}, "additionalProperties": false}}},
				map[string]any{"type": "function", "function": map[string]any{"name": "b", "parameters": map[string]any{"type": "object"}}},
			},
			"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "a"}},
			"temperature": 0, "max_tokens": 200,
		}
		_, _, finish, chunks := streamedChat(t, url, body)
		assert.Equal(t, "tool_calls", finish)
		var name, args, id string
		for _, c := range chunks {
			for _, ch := range c["choices"].([]any) {
				d := ch.(map[string]any)["delta"].(map[string]any)
				calls, _ := d["tool_calls"].([]any)
				for _, call := range calls {
					cm := call.(map[string]any)
					assert.Equal(t, float64(0), cm["index"])
					if s, ok := cm["id"].(string); ok {
						assert.Empty(t, id, "id sent once")
						id = s
					}
					fn := cm["function"].(map[string]any)
					if s, ok := fn["name"].(string); ok {
						name += s
					}
					args += fn["arguments"].(string)
				}
			}
		}
		assert.Equal(t, "a", name)
		assert.NotEmpty(t, id)
		var v struct{ Ok *bool }
		require.NoError(t, json.Unmarshal([]byte(args), &v), args)
		assert.NotNil(t, v.Ok)
	})
	t.Run("n choices with a seed differ, and repeat", func(t *testing.T) {
		texts := func(n int) []string {
			code, out := postJSON(t, url, map[string]any{"messages": []any{map[string]any{"role": "user", "content": "x"}},
				"n": n, "seed": 7, "temperature": 1, "max_tokens": 16})
			require.Equal(t, http.StatusOK, code, "%v", out)
			var got []string
			for _, c := range asSlice(out["choices"]) {
				got = append(got, c.(map[string]any)["message"].(map[string]any)["content"].(string))
			}
			return got
		}
		two := texts(2)
		require.Len(t, two, 2)
		assert.NotEqual(t, two[0], two[1])
		assert.Equal(t, texts(1)[0], two[0], "choice 0 draws with the seed given")
		assert.Equal(t, two, texts(2))
		assert.Equal(t, uint32(8), choiceSeed(7, 1))
		assert.Equal(t, uint32(0), choiceSeed(llama.DefaultSeed-1, 1), "the default seed, which means random, is passed over")
		assert.Equal(t, llama.DefaultSeed, choiceSeed(llama.DefaultSeed, 3), "no seed: each choice random")
	})
	t.Run("allowed tools", func(t *testing.T) {
		obj := map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}, "required": []string{"ok"}, "additionalProperties": false}
		var tools []any
		for _, n := range []string{"a", "b", "c"} {
			tools = append(tools, map[string]any{"type": "function", "function": map[string]any{"name": n, "parameters": obj}})
		}
		allowed := map[string]any{"type": "allowed_tools", "allowed_tools": map[string]any{"mode": "required",
			"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "c"}}}}}
		msgs := []any{map[string]any{"role": "user", "content": "x"}}
		// The template sees every tool: the prompt is the one of "required".
		var n1, n2 struct {
			InputTokens int `json:"input_tokens"`
		}
		require.Equal(t, http.StatusOK, xPost(t, url+"/input_tokens", map[string]any{"messages": msgs, "tools": tools, "tool_choice": allowed}, &n1))
		require.Equal(t, http.StatusOK, xPost(t, url+"/input_tokens", map[string]any{"messages": msgs, "tools": tools, "tool_choice": "required"}, &n2))
		assert.Equal(t, n2.InputTokens, n1.InputTokens)
		// Only the allowed one is called, whatever the seed (without the
		// limit, most of these seeds call "a").
		for seed := range 6 {
			code, out := postJSON(t, url, map[string]any{"messages": msgs, "tools": tools, "tool_choice": allowed,
				"parallel_tool_calls": false, "temperature": 1, "seed": seed, "max_tokens": 200})
			require.Equal(t, http.StatusOK, code, "%v", out)
			choice := out["choices"].([]any)[0].(map[string]any)
			require.Equal(t, "tool_calls", choice["finish_reason"], "%v", choice)
			calls := choice["message"].(map[string]any)["tool_calls"].([]any)
			require.Len(t, calls, 1)
			assert.Equal(t, "c", calls[0].(map[string]any)["function"].(map[string]any)["name"], "seed %d", seed)
		}
		code, out := postJSON(t, url, map[string]any{"messages": msgs, "tools": tools, "max_tokens": 4,
			"tool_choice": map[string]any{"type": "allowed_tools", "allowed_tools": map[string]any{"mode": "auto", "tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "d"}}}}}})
		assert.Equal(t, http.StatusBadRequest, code)
		assert.Equal(t, `tools: chat: allowed tool "d" is not among the tools`, out["error"].(map[string]any)["message"])
	})
	t.Run("logprobs streamed", func(t *testing.T) {
		_, _, _, chunks := streamedChat(t, url, map[string]any{
			"messages": []any{map[string]any{"role": "user", "content": "x"}},
			"logprobs": true, "top_logprobs": 3, "temperature": 0, "max_tokens": 5,
		})
		n := 0
		for _, c := range chunks {
			for _, ch := range c["choices"].([]any) {
				if lp, ok := ch.(map[string]any)["logprobs"].(map[string]any); ok {
					for _, e := range lp["content"].([]any) {
						n++
						assert.Len(t, e.(map[string]any)["top_logprobs"], 3)
					}
				}
			}
		}
		assert.Equal(t, 5, n)
	})
}

// metric reads one llamacpp: gauge from /metrics.
func metric(t *testing.T, base, name string) string {
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "llamacpp:"+name+" "); ok {
			return v
		}
	}
	return ""
}

// watchEngine is an Engine that hands the test each submitted task's
// context once Submit has returned, so that a test can wait on a task being
// queued or cancelled instead of polling /metrics.
type watchEngine struct {
	engineAPI
	submitted chan context.Context
}

func (e watchEngine) Submit(ctx context.Context, t ...*engine.Request) (eventStream, error) {
	st, err := e.engineAPI.Submit(ctx, t...)
	e.submitted <- ctx
	return st, err
}

// watchSubmits puts a watchEngine in front of s's default engine for the
// rest of the test and returns its channel of task contexts.
func watchSubmits(t *testing.T, s *Server) <-chan context.Context {
	inst := defaultInstance(t, s)
	real := inst.Engine
	w := watchEngine{engineAPI: real, submitted: make(chan context.Context, 16)}
	inst.Engine = w
	t.Cleanup(func() { inst.Engine = real })
	return w.submitted
}

// A client that goes away cancels its task and frees the slot.
func TestCompletionClientDisconnect(t *testing.T) {
	// With context shift, generation goes on until the client leaves.
	s, ts := newTestServer(t, Options{Engine: engine.Options{ContextShift: true}})
	tasks := watchSubmits(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	body, _ := json.Marshal(map[string]any{"prompt": "Once upon a time", "n_predict": 100000, "ignore_eos": true, "stream": true})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/completion", bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	task := <-tasks
	// Read until the slot's 512-token context has been filled and shifted.
	sc := bufio.NewScanner(resp.Body)
	for n := 0; n < 600; {
		require.True(t, sc.Scan(), "the stream ended early: %v", sc.Err())
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var chunk struct {
			TokensPredicted int `json:"tokens_predicted"`
		}
		require.NoError(t, json.Unmarshal([]byte(data), &chunk), data)
		n = chunk.TokensPredicted
	}
	assert.Equal(t, "1", metric(t, ts.URL, "requests_processing"))
	cancel()
	resp.Body.Close()
	// The server cancels the task when it sees the client gone; the engine
	// frees a cancelled task's slot before it starts the next task, and a
	// task's slot before its answer: after one more request, none is busy.
	<-task.Done()
	code, out := postJSON(t, ts.URL+"/completion", map[string]any{"prompt": "x", "n_predict": 1})
	require.Equal(t, http.StatusOK, code, "%v", out)
	assert.Equal(t, "0", metric(t, ts.URL, "requests_processing"))
}

// busyEngine is an Engine whose queue is always full.
type busyEngine struct{ engineAPI }

func (busyEngine) Submit(context.Context, ...*engine.Request) (eventStream, error) {
	return nil, engine.ErrQueueFull
}
func (busyEngine) SlotsInfo() []engine.SlotInfo { return []engine.SlotInfo{{NCtx: 512}} }

// A full queue (engine.ErrQueueFull) answers 503 unavailable_error.
func TestCompletionBusy(t *testing.T) {
	s, _ := newTestServer(t, Options{})
	inst := defaultInstance(t, s)
	busy := &instance{Name: inst.Name, Model: inst.Model, Engine: busyEngine{inst.Engine}, Template: inst.Template, Server: s, Opts: inst.Opts}
	_, err := s.runTask(context.Background(), busy, nil, &engine.Request{Kind: engine.KindCompletion, Prompt: []llama.Token{1, 2}})
	require.ErrorIs(t, err, engine.ErrQueueFull)
	rec := httptest.NewRecorder()
	llamaErrors.write(rec, err)
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	var out map[string]map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
	assert.Equal(t, "unavailable_error", out["error"]["type"])
	assert.Equal(t, float64(503), out["error"]["code"])
}

// A template with its own tool-call format (Qwen 3: Hermes 2 Pro style
// <tool_call> blocks and <think>): the grammar makes the tiny model write a
// call in that format and the parser reads it back, whole and streamed.
func TestChatToolCallHermes(t *testing.T) {
	tmpl := filepath.Join(testenv.LlamaSrc(t), "models", "templates", "Qwen-Qwen3-0.6B.jinja")
	_, ts := newTestServer(t, Options{ChatTemplateFile: tmpl, Engine: engine.Options{Context: llama.ContextOptions{ContextSize: 4096}}})
	url := ts.URL + "/v1/chat/completions"
	body := func() map[string]any {
		return map[string]any{
			"messages": []any{map[string]any{"role": "user", "content": "Weather in Paris?"}},
			"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "get_weather",
				"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string", "enum": []string{"Paris", "Rome"}}}, "required": []string{"city"}, "additionalProperties": false}}}},
			"tool_choice":          "required",
			"parallel_tool_calls":  false,
			"chat_template_kwargs": map[string]any{"enable_thinking": false},
			"temperature":          0, "max_tokens": 300,
		}
	}
	code, out := postJSON(t, url, body())
	require.Equal(t, http.StatusOK, code, "%v", out)
	choice := out["choices"].([]any)[0].(map[string]any)
	require.Equal(t, "tool_calls", choice["finish_reason"], "%v", choice)
	msg := choice["message"].(map[string]any)
	calls := msg["tool_calls"].([]any)
	require.Len(t, calls, 1)
	fn := calls[0].(map[string]any)["function"].(map[string]any)
	assert.Equal(t, "get_weather", fn["name"])
	var args struct{ City string }
	require.NoError(t, json.Unmarshal([]byte(fn["arguments"].(string)), &args))
	assert.Contains(t, []string{"Paris", "Rome"}, args.City)
	assert.Nil(t, msg["content"], "no text besides the call")

	content, _, finish, chunks := streamedChat(t, url, body())
	assert.Equal(t, "tool_calls", finish)
	assert.Empty(t, content)
	var streamedArgs string
	for _, c := range chunks {
		for _, ch := range c["choices"].([]any) {
			d := ch.(map[string]any)["delta"].(map[string]any)
			for _, call := range asSlice(d["tool_calls"]) {
				streamedArgs += call.(map[string]any)["function"].(map[string]any)["arguments"].(string)
			}
		}
	}
	assert.JSONEq(t, fn["arguments"].(string), streamedArgs)
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

func TestPrepareChat(t *testing.T) {
	inst := testInstance(t)
	user := chat.Message{Role: chat.RoleUser, Content: "Tell me a story."}
	t.Run("generation prompt", func(t *testing.T) {
		task := &engine.Request{Params: sampling.Defaults()}
		plan, err := inst.prepareChat(&wire.Chat{Messages: []chat.Message{user}, AddGenerationPrompt: true}, task)
		require.NoError(t, err)
		assert.True(t, strings.HasSuffix(plan.Prompt, "<|im_start|>assistant\n"), plan.Prompt)
		assert.Equal(t, chat.FormatContentOnly, plan.Parse.Format)
		assert.False(t, plan.Parse.ParseToolCalls)
		assert.NotEmpty(t, task.Prompt)
	})
	t.Run("assistant prefill", func(t *testing.T) {
		task := &engine.Request{Params: sampling.Defaults()}
		msgs := []chat.Message{user, {Role: chat.RoleAssistant, Content: "Once upon a time"}}
		plan, err := inst.prepareChat(&wire.Chat{Messages: msgs, AddGenerationPrompt: true}, task)
		require.NoError(t, err)
		assert.True(t, strings.HasSuffix(plan.Prompt, "<|im_start|>assistant\nOnce upon a time"), plan.Prompt)
		_, err = inst.prepareChat(&wire.Chat{Messages: append(msgs, msgs[1]), AddGenerationPrompt: true}, &engine.Request{Params: sampling.Defaults()})
		require.Error(t, err)
	})
	tools := []chat.Tool{{Name: "f", Parameters: json.RawMessage(`{"type":"object"}`)}}
	// chatml has no tool-call format: under auto the answer is free text,
	// as llama-server v0.4.0 gives it; a demanded call (required, a named
	// function) is made in llama.cpp's generic JSON format, which
	// llama-server leaves unmade.
	for _, tc := range []struct {
		choice  chat.ToolChoice
		generic bool
	}{
		{chat.ToolChoice{Mode: "auto"}, false},
		{chat.ToolChoice{Mode: "required"}, true},
		{chat.ToolChoice{Mode: "function", Function: "f"}, true},
		{chat.ToolChoice{Mode: "required", Allowed: []string{"f"}}, true},
	} {
		t.Run("tools without a tool-call format, "+tc.choice.Mode, func(t *testing.T) {
			task := &engine.Request{Params: sampling.Defaults()}
			plan, err := inst.prepareChat(&wire.Chat{Messages: []chat.Message{user}, Tools: tools, ToolChoice: tc.choice, AddGenerationPrompt: true}, task)
			require.NoError(t, err)
			if !tc.generic {
				assert.Equal(t, chat.FormatContentOnly, plan.Parse.Format)
				assert.False(t, plan.Parse.ParseToolCalls)
				assert.NotContains(t, plan.Prompt, "Respond in JSON format")
				assert.Empty(t, task.Params.Grammar)
				return
			}
			assert.Equal(t, chat.FormatGeneric, plan.Parse.Format)
			assert.True(t, plan.Parse.ParseToolCalls)
			assert.Contains(t, plan.Prompt, `"name": "f"`, "the tools in the system message")
			assert.Contains(t, task.Params.Grammar, `"\"tool_call\""`, "a call is imposed")
			assert.False(t, task.Params.GrammarLazy)
		})
	}
	t.Run("a template with a tool-call format", func(t *testing.T) {
		s, _ := newTestServer(t, Options{ChatTemplate: genericToolsTemplate})
		gi := defaultInstance(t, s)
		task := &engine.Request{Params: sampling.Defaults()}
		plan, err := gi.prepareChat(&wire.Chat{Messages: []chat.Message{user}, Tools: tools, ToolChoice: chat.ToolChoice{Mode: "auto"}, AddGenerationPrompt: true}, task)
		require.NoError(t, err)
		assert.Equal(t, chat.FormatHermes2Pro, plan.Parse.Format)
		assert.True(t, plan.Parse.ParseToolCalls)
		assert.NotContains(t, plan.Prompt, "Respond in JSON format")
		assert.NotEmpty(t, task.Params.Grammar)
		assert.True(t, task.Params.GrammarLazy, "under auto the grammar waits for <tool_call>")
	})
}

// End to end: one slot busy, one request waiting, the next is refused.
func TestCompletionQueueFull(t *testing.T) {
	s, ts := newTestServer(t, Options{Engine: engine.Options{Parallel: 1, Context: llama.ContextOptions{ContextSize: 512}, QueueSize: 1, ContextShift: true}})
	tasks := watchSubmits(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	long, _ := json.Marshal(map[string]any{"prompt": "Once upon a time", "n_predict": 100000, "ignore_eos": true, "stream": true})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/completion", bytes.NewReader(long))
	first, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer first.Body.Close()
	<-tasks // the first holds the slot
	done := make(chan int, 1)
	go func() { // waits in the queue: headers come with the first token
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/completion", strings.NewReader(`{"prompt":"x","n_predict":2}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	<-tasks // the second is queued
	assert.Equal(t, "1", metric(t, ts.URL, "requests_deferred"))
	code, out := postJSON(t, ts.URL+"/completion", map[string]any{"prompt": "x", "n_predict": 1})
	assert.Equal(t, http.StatusServiceUnavailable, code, "%v", out)
	// Freeing the slot lets the waiting request run.
	first.Body.Close()
	assert.Equal(t, http.StatusOK, <-done)
}

// Whole (not streamed) answers to malformed model output: when chat.Parse
// fails, the chat, Anthropic and Responses endpoints answer the raw output
// as content, without the reasoning or tool calls the parser read before
// failing; the finish reason still tells a limit from a stop. An output
// cut at the token limit is the exception: it reads as its stream reports
// it, the call cut off kept as far as it went (chat.Plan.ParseLimited).
func TestChatMalformedOutputWhole(t *testing.T) {
	ts, inst, real := newScriptServer(t)
	params := map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}
	kwargs := map[string]any{"enable_thinking": false}

	// answer is what an endpoint returned: content, reasoning, tool call
	// names and arguments (joined), and its finish reason.
	type answer struct{ content, reasoning, names, args, finish string }
	endpoints := []struct {
		name string
		ask  func(t *testing.T) answer
	}{
		{"chat", func(t *testing.T) answer {
			code, out := postJSON(t, ts.URL+"/v1/chat/completions", map[string]any{
				"messages":             []any{map[string]any{"role": "user", "content": "Weather?"}},
				"tools":                []any{map[string]any{"type": "function", "function": map[string]any{"name": "get_weather", "parameters": params}}},
				"chat_template_kwargs": kwargs, "max_tokens": 50,
			})
			require.Equal(t, http.StatusOK, code, "%v", out)
			choice := out["choices"].([]any)[0].(map[string]any)
			msg := choice["message"].(map[string]any)
			var a answer
			a.content, _ = msg["content"].(string)
			a.reasoning, _ = msg["reasoning_content"].(string)
			for _, c := range asSlice(msg["tool_calls"]) {
				fn := c.(map[string]any)["function"].(map[string]any)
				a.names += fn["name"].(string)
				a.args += fn["arguments"].(string)
			}
			a.finish, _ = choice["finish_reason"].(string)
			return a
		}},
		{"anthropic", func(t *testing.T) answer {
			code, out := postJSON(t, ts.URL+"/v1/messages", map[string]any{
				"model": "x", "max_tokens": 50,
				"messages":             []any{map[string]any{"role": "user", "content": "Weather?"}},
				"tools":                []any{map[string]any{"name": "get_weather", "input_schema": params}},
				"chat_template_kwargs": kwargs,
			})
			require.Equal(t, http.StatusOK, code, "%v", out)
			var a answer
			for _, b := range out["content"].([]any) {
				b := b.(map[string]any)
				switch b["type"] {
				case "text":
					a.content += b["text"].(string)
				case "thinking":
					a.reasoning += b["thinking"].(string)
				case "tool_use":
					a.names += b["name"].(string)
					in, err := json.Marshal(b["input"])
					require.NoError(t, err)
					a.args += string(in)
				}
			}
			a.finish, _ = out["stop_reason"].(string)
			return a
		}},
		{"responses", func(t *testing.T) answer {
			code, out := postJSON(t, ts.URL+"/v1/responses", map[string]any{
				"input":                "Weather?",
				"tools":                []any{map[string]any{"type": "function", "name": "get_weather", "parameters": params}},
				"chat_template_kwargs": kwargs, "max_output_tokens": 50,
			})
			require.Equal(t, http.StatusOK, code, "%v", out)
			var a answer
			for _, it := range out["output"].([]any) {
				it := it.(map[string]any)
				switch it["type"] {
				case "message":
					for _, p := range it["content"].([]any) {
						a.content += p.(map[string]any)["text"].(string)
					}
				case "reasoning":
					for _, p := range it["content"].([]any) {
						a.reasoning += p.(map[string]any)["text"].(string)
					}
				case "function_call":
					a.names += it["name"].(string)
					a.args += it["arguments"].(string)
				}
			}
			a.finish, _ = out["status"].(string)
			return a
		}},
	}
	call := "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>"
	badArgs := "Let me check. <tool_call>\n{\"name\": \"get_weather\", \"arguments\": oops}\n</tool_call>"
	badSecond := call + "\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": [}\n</tool_call>"
	cutOff := "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Ro"
	unfinished := "Hi <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {"
	for _, tc := range []struct {
		name   string
		pieces []string
		stop   engine.StopType
		want   map[string]answer // by endpoint
	}{
		{"well formed call (control)", []string{"<think>Rain?</think>", call}, engine.StopTypeEOS, map[string]answer{
			"chat":      {"", "Rain?", "get_weather", `{"city": "Rome"}`, "tool_calls"},
			"anthropic": {"", "Rain?", "get_weather", `{"city":"Rome"}`, "tool_use"},
			"responses": {"", "Rain?", "get_weather", `{"city": "Rome"}`, "completed"},
		}},
		{"malformed arguments after reasoning", []string{"<think>Rain?</think>", badArgs}, engine.StopTypeEOS, map[string]answer{
			"chat":      {"<think>Rain?</think>" + badArgs, "", "", "", "stop"},
			"anthropic": {"<think>Rain?</think>" + badArgs, "", "", "", "end_turn"},
			"responses": {"<think>Rain?</think>" + badArgs, "", "", "", "completed"},
		}},
		{"malformed second call: the first is not kept", []string{call, badSecond[len(call):]}, engine.StopTypeEOS, map[string]answer{
			"chat":      {badSecond, "", "", "", "stop"},
			"anthropic": {badSecond, "", "", "", "end_turn"},
			"responses": {badSecond, "", "", "", "completed"},
		}},
		{"call cut off by max_tokens", []string{cutOff[:20], cutOff[20:]}, engine.StopTypeLimit, map[string]answer{
			"chat":      {"", "", "get_weather", `{"city": "Ro`, "length"},
			"anthropic": {"", "", "get_weather", `{}`, "max_tokens"},
			"responses": {"", "", "get_weather", `{"city": "Ro`, "incomplete"},
		}},
		{"call unfinished at end of generation", []string{unfinished}, engine.StopTypeEOS, map[string]answer{
			"chat":      {unfinished, "", "", "", "stop"},
			"anthropic": {unfinished, "", "", "", "end_turn"},
			"responses": {unfinished, "", "", "", "completed"},
		}},
	} {
		for _, ep := range endpoints {
			t.Run(tc.name+"/"+ep.name, func(t *testing.T) {
				inst.Engine = scriptEngine{engineAPI: real, pieces: tc.pieces, stop: tc.stop}
				assert.Equal(t, tc.want[ep.name], ep.ask(t))
			})
		}
	}
}

// TestChatJSONMode: response_format json_object without a schema is a
// JSON object, as OpenAI's JSON mode promises, with and without --jinja
// (llama-server's --jinja constrains nothing there), whole and streamed.
func TestChatJSONMode(t *testing.T) {
	for _, jinja := range []bool{false, true} {
		t.Run(fmt.Sprintf("jinja=%v", jinja), func(t *testing.T) {
			_, ts := newTestServer(t, Options{Jinja: jinja, ChatTemplate: "chatml"})
			url := ts.URL + "/v1/chat/completions"
			for _, format := range []map[string]any{{"type": "json_object"}, {"type": "json_object", "schema": map[string]any{}}} {
				for seed := range 3 {
					req := map[string]any{"messages": []any{map[string]any{"role": "user", "content": "Write an example"}},
						"response_format": format, "seed": seed, "temperature": 1, "max_tokens": 60}
					code, out := postJSON(t, url, req)
					require.Equal(t, http.StatusOK, code, "%v", out)
					choice := out["choices"].([]any)[0].(map[string]any)
					content := choice["message"].(map[string]any)["content"].(string)
					assert.True(t, strings.HasPrefix(content, "{"), "seed %d: %q", seed, content)
					if choice["finish_reason"] == "stop" {
						var v map[string]any
						assert.NoError(t, json.Unmarshal([]byte(content), &v), "seed %d: %q", seed, content)
					}
					streamed, _, _, _ := streamedChat(t, url, req)
					assert.Equal(t, content, streamed, "seed %d streamed", seed)
				}
			}
		})
	}
}

// TestDemandedToolCallGeneric: on a template with no tool-call format
// (chatml), a call the client demands (OpenAI's required or a named
// function, Anthropic's any or tool, Responses' required) is made in
// llama.cpp's generic JSON format, whole and streamed alike; under auto
// the answer stays free text, as llama-server's.
func TestDemandedToolCallGeneric(t *testing.T) {
	_, ts := newTestServer(t, Options{Jinja: true, ChatTemplate: "chatml", Engine: engine.Options{Context: llama.ContextOptions{ContextSize: 2048}}})
	city := map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string", "maxLength": 8}},
		"required": []string{"city"}, "additionalProperties": false}
	oaiTools := []any{
		map[string]any{"type": "function", "function": map[string]any{"name": "get_weather", "parameters": city}},
		map[string]any{"type": "function", "function": map[string]any{"name": "get_time", "parameters": map[string]any{"type": "object",
			"properties": map[string]any{"zone": map[string]any{"type": "string", "maxLength": 8}}, "required": []string{"zone"}, "additionalProperties": false}}},
	}
	user := []any{map[string]any{"role": "user", "content": "Weather in Paris?"}}
	checkArgs := func(t *testing.T, name, args string) {
		t.Helper()
		var v map[string]any
		require.NoError(t, json.Unmarshal([]byte(args), &v), args)
		if name == "get_weather" {
			assert.IsType(t, "", v["city"], args)
		}
	}
	for _, tc := range []struct {
		name   string
		choice any
		want   string // the function called ("*": either)
	}{
		{"required", "required", "*"},
		{"named", map[string]any{"type": "function", "function": map[string]any{"name": "get_time"}}, "get_time"},
		{"allowed, required", map[string]any{"type": "allowed_tools", "allowed_tools": map[string]any{"mode": "required",
			"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}}}}, "get_weather"},
	} {
		t.Run("chat/"+tc.name, func(t *testing.T) {
			body := map[string]any{"messages": user, "tools": oaiTools, "tool_choice": tc.choice, "max_tokens": 200, "temperature": 0, "parallel_tool_calls": false}
			code, out := postJSON(t, ts.URL+"/v1/chat/completions", body)
			require.Equal(t, http.StatusOK, code, "%v", out)
			choice := out["choices"].([]any)[0].(map[string]any)
			require.Equal(t, "tool_calls", choice["finish_reason"], "%v", choice)
			calls := choice["message"].(map[string]any)["tool_calls"].([]any)
			require.Len(t, calls, 1)
			fn := calls[0].(map[string]any)["function"].(map[string]any)
			if tc.want != "*" {
				assert.Equal(t, tc.want, fn["name"])
			}
			checkArgs(t, fn["name"].(string), fn["arguments"].(string))
			_, _, finish, chunks := streamedChat(t, ts.URL+"/v1/chat/completions", body)
			names, args := streamedCalls(chunks)
			assert.Equal(t, "tool_calls", finish)
			assert.Equal(t, fn["name"], names, "streamed")
			assert.JSONEq(t, fn["arguments"].(string), args, "streamed")
		})
	}
	t.Run("chat/auto stays free text", func(t *testing.T) {
		code, out := postJSON(t, ts.URL+"/v1/chat/completions", map[string]any{"messages": user, "tools": oaiTools, "max_tokens": 8, "temperature": 0})
		require.Equal(t, http.StatusOK, code, "%v", out)
		choice := out["choices"].([]any)[0].(map[string]any)
		assert.Equal(t, "length", choice["finish_reason"])
		assert.NotContains(t, choice["message"], "tool_calls")
	})
	t.Run("anthropic/any and tool", func(t *testing.T) {
		for _, choice := range []map[string]any{{"type": "any"}, {"type": "tool", "name": "get_weather"}} {
			code, out := postJSON(t, ts.URL+"/v1/messages", map[string]any{"model": "m", "max_tokens": 200, "temperature": 0, "messages": user,
				"tools":       []any{map[string]any{"name": "get_weather", "input_schema": city}},
				"tool_choice": choice})
			require.Equal(t, http.StatusOK, code, "%v", out)
			assert.Equal(t, "tool_use", out["stop_reason"], "%v", out)
			content := out["content"].([]any)
			last := content[len(content)-1].(map[string]any)
			assert.Equal(t, "get_weather", last["name"])
			assert.IsType(t, "", last["input"].(map[string]any)["city"])
		}
	})
	t.Run("responses/required", func(t *testing.T) {
		code, out := postJSON(t, ts.URL+"/v1/responses", map[string]any{"input": "Weather in Paris?", "max_output_tokens": 200, "temperature": 0,
			"tools":       []any{map[string]any{"type": "function", "name": "get_weather", "parameters": city}},
			"tool_choice": "required"})
		require.Equal(t, http.StatusOK, code, "%v", out)
		assert.Equal(t, "completed", out["status"])
		items := out["output"].([]any)
		last := items[len(items)-1].(map[string]any)
		assert.Equal(t, "function_call", last["type"])
		checkArgs(t, "get_weather", last["arguments"].(string))
	})
}

// TestChatBodySchema: a chat body's own "json_schema" (llama-server's
// extension beside response_format) constrains the answer under --jinja
// as without it, and its mistakes are 400s naming it.
func TestChatBodySchema(t *testing.T) {
	schema := map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer", "minimum": 0, "maximum": 9}},
		"required": []string{"n"}, "additionalProperties": false}
	user := []any{map[string]any{"role": "user", "content": "A number?"}}
	for _, jinja := range []bool{false, true} {
		_, ts := newTestServer(t, Options{Jinja: jinja, ChatTemplate: "chatml"})
		t.Run(fmt.Sprintf("jinja=%v", jinja), func(t *testing.T) {
			code, out := postJSON(t, ts.URL+"/v1/chat/completions", map[string]any{"messages": user, "json_schema": schema, "max_tokens": 40, "temperature": 0})
			require.Equal(t, http.StatusOK, code, "%v", out)
			content := out["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
			var v struct{ N *int }
			require.NoError(t, json.Unmarshal([]byte(content), &v), content)
			require.NotNil(t, v.N, content)
			assert.True(t, *v.N >= 0 && *v.N <= 9, content)
			for _, bad := range []struct {
				name string
				body map[string]any
			}{
				{"not a schema", map[string]any{"json_schema": "object"}},
				{"with a grammar", map[string]any{"json_schema": schema, "grammar": `root ::= "a"`}},
				{"unresolved ref", map[string]any{"json_schema": map[string]any{"$ref": "#/definitions/missing"}}},
			} {
				bad.body["messages"] = user
				code, out := postJSON(t, ts.URL+"/v1/chat/completions", bad.body)
				assert.Equal(t, http.StatusBadRequest, code, "%s: %v", bad.name, out)
				e, _ := out["error"].(map[string]any)
				assert.Contains(t, e["message"], "json_schema", bad.name)
			}
		})
	}
}
