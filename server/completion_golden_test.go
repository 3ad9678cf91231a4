package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// -update rewrites the golden files under testdata/completion.
var _ = func() bool {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files")
	}
	return true
}()

func updatingGolden() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// normalizeWire replaces what changes from run to run (ids, creation
// times, timings) with placeholders.
func normalizeWire(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			switch k {
			case "created":
				x[k] = 0
			case "model":
				if s, ok := val.(string); ok {
					x[k] = filepath.Base(s)
				}
			case "tokens_cached", "cached_tokens", "id_slot":
				// Depend on which slot served earlier requests.
				if _, ok := val.(float64); ok {
					x[k] = "<n>"
				}
			case "timings":
				x[k] = "<timings>"
			case "id":
				if s, ok := val.(string); ok && (strings.HasPrefix(s, "chatcmpl-") || strings.HasPrefix(s, "cmpl-") || strings.HasPrefix(s, "call_")) {
					x[k] = s[:strings.IndexAny(s, "-_")+1] + "<id>"
				}
			default:
				x[k] = normalizeWire(val)
			}
		}
	case []any:
		for i := range x {
			x[i] = normalizeWire(x[i])
		}
	case float64:
		// Probabilities to 4 decimals: the last digits vary with the CPU.
		return math.Round(x*1e4) / 1e4
	case string:
		if len(x) > 200 {
			return fmt.Sprintf("<%d bytes>", len(x))
		}
	}
	return v
}

func normalizedJSON(t *testing.T, data []byte, indent bool) string {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(data, &v), "%s", data)
	v = normalizeWire(v)
	var out []byte
	var err error
	if indent {
		out, err = json.MarshalIndent(v, "", "  ")
	} else {
		out, err = json.Marshal(v)
	}
	require.NoError(t, err)
	return string(out)
}

// transcript posts body to path and writes the exchange as text: the
// request, the status, and the body (indented JSON, or one line per
// Server-Sent Event).
func transcript(t *testing.T, base, path string, body map[string]any) string {
	t.Helper()
	req, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(base+path, "application/json", bytes.NewReader(req))
	require.NoError(t, err)
	defer resp.Body.Close()
	var sb strings.Builder
	fmt.Fprintf(&sb, "POST %s\n%s\n\n%d %s\n", path, normalizedJSON(t, req, false), resp.StatusCode, resp.Header.Get("Content-Type"))
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if line == "" {
				continue
			}
			field, payload, _ := strings.Cut(line, ": ")
			if payload != "[DONE]" && strings.HasPrefix(payload, "{") {
				payload = normalizedJSON(t, []byte(payload), false)
			}
			fmt.Fprintf(&sb, "%s: %s\n", field, payload)
		}
		require.NoError(t, sc.Err())
	} else {
		data, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		sb.WriteString(normalizedJSON(t, data, true) + "\n")
	}
	return sb.String()
}

// Wire transcripts of the generation endpoints, compared with golden files
// (go test ./server -run TestCompletionGolden -update rewrites them).
func TestCompletionGolden(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	// stories260K's template has no tool-call format, so tools get free
	// text there, as in llama-server; the tool-call cases use a template
	// that knows of tools, to keep the wire format of calls covered.
	_, toolsTS := newTestServer(t, Options{ChatTemplate: genericToolsTemplate})
	user := []any{map[string]any{"role": "user", "content": "Tell me a story."}}
	tool := []any{map[string]any{"type": "function", "function": map[string]any{
		"name": "get_weather", "description": "Weather forecast",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{
			"city": map[string]any{"type": "string", "enum": []string{"Paris", "London"}}}, "required": []string{"city"}, "additionalProperties": false},
	}}}
	cases := map[string]struct {
		path  string
		body  map[string]any
		tools bool // served with genericToolsTemplate
	}{
		"completion":             {"/completion", map[string]any{"prompt": "Once upon a time", "temperature": 0, "n_predict": 8}, false},
		"completion_stream":      {"/completion", map[string]any{"prompt": "Once upon a time", "temperature": 0, "n_predict": 8, "stream": true}, false},
		"completion_probs":       {"/completion", map[string]any{"prompt": "Once upon a time", "temperature": 0, "n_predict": 2, "n_probs": 2}, false},
		"completion_multi":       {"/completion", map[string]any{"prompt": []any{"Once upon a time", "The dog"}, "temperature": 0, "n_predict": 4}, false},
		"oai_completion":         {"/v1/completions", map[string]any{"prompt": "Once upon a time", "temperature": 0, "max_tokens": 8}, false},
		"oai_completion_stream":  {"/v1/completions", map[string]any{"prompt": "Once upon a time", "temperature": 0, "max_tokens": 4, "stream": true}, false},
		"chat":                   {"/v1/chat/completions", map[string]any{"model": "stories", "messages": user, "temperature": 0, "max_tokens": 8}, false},
		"chat_stream":            {"/v1/chat/completions", map[string]any{"messages": user, "temperature": 0, "max_tokens": 4, "stream": true, "stream_options": map[string]any{"include_usage": true}}, false},
		"chat_logprobs":          {"/v1/chat/completions", map[string]any{"messages": user, "temperature": 0, "max_tokens": 2, "logprobs": true, "top_logprobs": 2}, false},
		"chat_tool_call":         {"/v1/chat/completions", map[string]any{"messages": user, "temperature": 0, "max_tokens": 200, "tools": tool, "tool_choice": "required"}, true},
		"chat_tool_call_stream":  {"/v1/chat/completions", map[string]any{"messages": user, "temperature": 0, "max_tokens": 200, "tools": tool, "tool_choice": "required", "stream": true}, true},
		"chat_json_object":       {"/v1/chat/completions", map[string]any{"messages": user, "temperature": 0, "max_tokens": 32, "response_format": map[string]any{"type": "json_object", "schema": map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}, "required": []string{"ok"}, "additionalProperties": false}}}, false},
		"error_exceed_context":   {"/completion", map[string]any{"prompt": strings.Repeat("hello ", 600)}, false},
		"error_unknown_role":     {"/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "wizard", "content": "hi"}}}, false},
		"error_invalid_grammar":  {"/completion", map[string]any{"prompt": "x", "grammar": "root ::= undefined-rule"}, false},
		"error_n_predict_string": {"/completion", map[string]any{"prompt": "x", "n_predict": "8"}, false},
	}
	names := make([]string, 0, len(cases))
	for n := range cases {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		c := cases[name]
		t.Run(name, func(t *testing.T) {
			base := ts.URL
			if c.tools {
				base = toolsTS.URL
			}
			got := transcript(t, base, c.path, c.body)
			file := filepath.Join("testdata", "completion", name+".golden")
			if updatingGolden() {
				require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
				require.NoError(t, os.WriteFile(file, []byte(got), 0o644))
				return
			}
			want, err := os.ReadFile(file)
			require.NoError(t, err, "run with -update to create it")
			requireGoldenClose(t, string(want), got)
		})
	}
}

// goldenFloat matches a JSON number with a fraction.
var goldenFloat = regexp.MustCompile(`-?[0-9]+\.[0-9]+(?:[eE][-+]?[0-9]+)?`)

// requireGoldenClose requires got to be want but for numbers with a
// fraction, which may differ by 0.002: log-probabilities differ in their
// last digits between the CPU variants of ggml the library picks.
func requireGoldenClose(t *testing.T, want, got string) {
	t.Helper()
	shape := func(s string) (string, []float64) {
		var nums []float64
		text := goldenFloat.ReplaceAllStringFunc(s, func(m string) string {
			f, err := strconv.ParseFloat(m, 64)
			require.NoError(t, err)
			nums = append(nums, f)
			return "<f>"
		})
		return text, nums
	}
	wantText, wantNums := shape(want)
	gotText, gotNums := shape(got)
	if wantText != gotText || len(wantNums) != len(gotNums) {
		require.Equal(t, want, got)
	}
	for i := range wantNums {
		if math.Abs(wantNums[i]-gotNums[i]) > 0.002 {
			require.Equal(t, want, got, "number %d: %v against %v", i, gotNums[i], wantNums[i])
		}
	}
}
