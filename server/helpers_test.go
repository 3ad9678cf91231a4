package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/x/llama"
	"github.com/x/llama/engine"

	"github.com/stretchr/testify/require"

	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/server/internal/router"
)

// newTestServer starts a Server behind an httptest server. When neither
// o.Model nor o.ModelsDir/ModelsPreset is set it serves stories260K with
// the "chatml" template, one thread, two slots, a 1024-token context and
// /slots and /metrics on. Everything is closed by t.Cleanup.
func newTestServer(t testing.TB, o Options) (*Server, *httptest.Server) {
	t.Helper()
	if o.Model == "" && o.ModelsDir == "" && o.ModelsPreset == "" {
		o.Model = testenv.Model(t, "stories260K.gguf")
		if o.ChatTemplate == "" && o.ChatTemplateFile == "" {
			o.ChatTemplate = "chatml"
		}
		if o.Engine.Parallel == 0 {
			o.Engine.Parallel = 2
		}
		if o.Engine.Context.ContextSize == 0 {
			o.Engine.Context.ContextSize = 1024
		}
		o.Slots = true
		o.Metrics = true
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Engine.Context.Threads == 0 {
		o.Engine.Context.Threads = 1
	}
	if o.Engine.Context.ThreadsBatch == 0 {
		o.Engine.Context.ThreadsBatch = 1
	}
	s, err := New(context.Background(), o)
	if err != nil {
		t.Fatalf("newTestServer: %v", err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ts.Close()
		_ = s.Close()
	})
	return s, ts
}

// defaultInstance returns the instance that serves s's default model,
// held until the end of the test.
func defaultInstance(t testing.TB, s *Server) *instance {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/", nil)
	inst, release, err := s.instanceFor(req, "")
	if err != nil {
		t.Fatalf("defaultInstance: %v", err)
	}
	t.Cleanup(release)
	return inst
}

// newScriptServer starts a test server with Qwen 3's chat template
// (Hermes 2 Pro style <tool_call> blocks and <think>) and one slot. It
// returns the default instance, whose Engine a test may replace, for
// example with a scriptEngine, and the real engine, which is put back at
// the end of the test.
func newScriptServer(t *testing.T) (ts *httptest.Server, inst *instance, real engineAPI) {
	t.Helper()
	tmpl := filepath.Join(testenv.LlamaSrc(t), "models", "templates", "Qwen-Qwen3-0.6B.jinja")
	s, ts := newTestServer(t, Options{ChatTemplateFile: tmpl, Engine: engine.Options{Parallel: 1, Context: llama.ContextOptions{ContextSize: 1024}}})
	inst = defaultInstance(t, s)
	real = inst.Engine
	t.Cleanup(func() { inst.Engine = real })
	return ts, inst, real
}

// decodeAnswer checks that a request was made, decodes the JSON answer
// into out (when not nil) and returns the status.
func decodeAnswer(t *testing.T, resp *http.Response, err error, out any) int {
	t.Helper()
	require.NoError(t, err)
	defer resp.Body.Close()
	if out != nil {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
	}
	return resp.StatusCode
}

// sseLines posts body as JSON, requires a 200 event stream in answer and
// calls line with each of its lines.
func sseLines(t *testing.T, url string, body any, line func(string)) {
	t.Helper()
	data, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(url, "application/json", bytes.NewReader(data))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/event-stream")
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line(sc.Text())
	}
	require.NoError(t, sc.Err())
}

// waitModelState returns once the model named name ("" for the default) is
// in state, waiting on the server's model events (those of /models/sse)
// rather than polling on a timer.
func waitModelState(t testing.TB, s *Server, name string, state router.State) {
	t.Helper()
	events, cancel := s.models.Subscribe()
	defer cancel()
	e, _ := s.models.Lookup(name)
	require.NotNil(t, e, "no model %q", name)
	v := s.models.View(e)
	st := v.State
	for st != state {
		if ev := <-events; ev.Model == v.Name {
			st = router.State(ev.Data.(map[string]any)["status"].(string))
		}
	}
}

// genericToolsTemplate is ChatML with the Hermes tool-call format
// (<tool_call>{"name": ..., "arguments": ...}</tool_call>), which it
// renders an assistant's calls in: llama-server v0.4.0 finds the format in
// it and constrains calls with a grammar (lazily under tool choice auto).
// It renders one call per message, so one call is made by default. Without
// tools it renders as chatml.
const genericToolsTemplate = `{%- if tools %}<|im_start|>system
You may call tools.<|im_end|>
{% endif %}{%- for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' }}{% if message.tool_calls %}{% set tc = message.tool_calls[0] %}<tool_call>
{{ {"name": tc.function.name, "arguments": tc.function.arguments} | tojson }}
</tool_call>{% else %}{{ message['content'] }}{% endif %}{{ '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}`
