package server

// The hostile-input suite: requests generated per route × per field × per
// bad value (wrong types, extreme numbers, NaN literals, invalid UTF-8,
// deep nesting, huge values, pathological grammars and schemas from
// testdata/hostile, bad slot names), plus per-route malformed bodies and
// authentication variants. Every request must be answered within
// hostileDeadline with a 2xx, or a 4xx carrying llama.cpp's error object
// ({"error":{"code","message","type"}} with code equal to the status);
// after each route's batch a good request must still succeed; and the
// resident memory of the process (server and client are in it) must not
// grow by more than hostileRSSBound over the run.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/x/llama/engine"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
)

const (
	// hostileDeadline is the most time one request may take.
	hostileDeadline = 2 * time.Second
	// hostileRSSBound is the most the process's resident memory may grow
	// over the whole suite. Generous: four small models and their contexts
	// are loaded before the first reading, and Go's heap may keep a few
	// tens of MB; a leak of each hostile body (up to 1 MiB, ~2000 cases)
	// or one runaway allocation would exceed it.
	hostileRSSBound = 256 << 20
	// hostileKey is the API key the servers require.
	hostileKey = "hostile-key"
	// hostileMaxBody is the servers' body limit.
	hostileMaxBody = 1 << 20
)

// hostileTarget is one server under test.
type hostileTarget struct {
	url string
}

// hostileRoute is an endpoint, a valid body and the fields to corrupt.
type hostileRoute struct {
	target *hostileTarget
	method string
	path   string
	base   string   // a valid JSON object body ("" for none)
	fields []string // fields to corrupt
	// good is a request that must succeed after the route's batch
	// (default: base).
	good string
	// refuses marks routes that answer every request with a 4xx.
	refuses bool
}

// hostileCase is one request.
type hostileCase struct {
	name   string
	route  *hostileRoute
	body   []byte
	header map[string]string
	noKey  bool
}

// rawValue is a JSON value (or not-quite-JSON text) to put in a field.
type rawValue struct {
	name string
	text string
}

// hostileValues are the bad values every field gets.
func hostileValues() []rawValue {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	longArray := "[" + strings.TrimSuffix(strings.Repeat("7,", 20000), ",") + "]"
	manyKeys := make([]string, 2000)
	for i := range manyKeys {
		manyKeys[i] = fmt.Sprintf(`"k%d":%d`, i, i)
	}
	return []rawValue{
		{"null", `null`}, {"true", `true`}, {"zero", `0`}, {"minus one", `-1`}, {"fraction", `1.5`},
		{"minus zero", `-0`}, {"huge float", `1e308`}, {"huge negative", `-1e308`}, {"overflow float", `1e999`},
		{"int64 overflow", `9223372036854775808`}, {"int32 overflow", `2147483648`}, {"int min", `-9223372036854775809`},
		{"tiny", `5e-324`}, {"NaN literal", `NaN`}, {"Infinity literal", `Infinity`}, {"hex literal", `0x10`},
		{"empty string", `""`}, {"string", `"x"`}, {"NUL string", `"\u0000"`}, {"lone surrogate", `"\ud800"`},
		{"invalid UTF-8", "\"\xff\xfe\xc0\xaf\""}, {"bidi", `"\u202eevil"`}, {"numeric string", `"12"`},
		{"long string", `"` + strings.Repeat("ab", 100_000) + `"`}, {"empty array", `[]`}, {"array", `[1,"a",null,{}]`},
		{"nested arrays", `[[[]]]`}, {"long array", longArray}, {"deep 100", deep(100)}, {"deep 300", deep(300)},
		{"empty object", `{}`}, {"object", `{"a":{"b":[1]}}`}, {"many keys", "{" + strings.Join(manyKeys, ",") + "}"},
		{"truncated", `{"a":`},
	}
}

// hostileBody is base with field set to the raw value text (the rest of
// base kept), written by hand so that invalid JSON stays invalid.
func hostileBody(t testing.TB, base, field, value string) []byte {
	var obj map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(base), &obj))
	var b bytes.Buffer
	b.WriteString("{")
	q, _ := json.Marshal(field)
	b.Write(q)
	b.WriteString(":")
	b.WriteString(value)
	for k, v := range obj {
		if k == field {
			continue
		}
		q, _ := json.Marshal(k)
		b.WriteString(",")
		b.Write(q)
		b.WriteString(":")
		b.Write(v)
	}
	b.WriteString("}")
	return b.Bytes()
}

// readJSONArray reads a testdata JSON array as raw values.
func readJSONArray(t testing.TB, path string) []json.RawMessage {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []json.RawMessage
	require.NoError(t, json.Unmarshal(data, &out))
	return out
}

// hostileServers starts the four servers of the suite: text generation
// (stories260K, slots, props), infill (a model with FIM tokens),
// embeddings and reranking; all require hostileKey.
func hostileServers(t *testing.T) (gen, fim, emb, rr *hostileTarget) {
	base := Options{APIKeys: []string{hostileKey}, MaxBodyBytes: hostileMaxBody, NPredict: 8}
	o := base
	o.SlotSavePath = t.TempDir()
	o.PropsEndpoint = true
	_, g := newTestServer(t, o)
	o = base
	o.Model = writeTinyCoder(t)
	o.Engine = engine.Options{Parallel: 2, Context: llama.ContextOptions{ContextSize: 1024, BatchSize: 256}}
	_, f := newTestServer(t, o)
	o = base
	o.Model = testenv.Model(t, "stories260K.gguf")
	o.Engine = engine.Options{Embedding: true, Context: llama.ContextOptions{Pooling: llama.PoolingMean, ContextSize: 1024}, Parallel: 2}
	_, e := newTestServer(t, o)
	o = base
	o.Model = writeTinyBert(t, 1, 0)
	o.Engine = engine.Options{Embedding: true, Reranking: true, Context: llama.ContextOptions{Pooling: llama.PoolingRank, ContextSize: 1024, BatchSize: 512, UBatchSize: 512}, Parallel: 2}
	_, r := newTestServer(t, o)
	return &hostileTarget{g.URL}, &hostileTarget{f.URL}, &hostileTarget{e.URL}, &hostileTarget{r.URL}
}

// hostileRoutes lists every route with a valid body and its fields.
func hostileRoutes(gen, fim, emb, rr *hostileTarget) []*hostileRoute {
	msgs := `[{"role":"user","content":"hi"}]`
	return []*hostileRoute{
		{target: gen, method: "POST", path: "/completion", base: `{"prompt":"Once","n_predict":2}`, fields: []string{
			"prompt", "n_predict", "temperature", "top_k", "top_p", "min_p", "typical_p", "repeat_last_n", "repeat_penalty",
			"presence_penalty", "dry_multiplier", "dry_base", "dry_allowed_length", "dry_penalty_last_n", "dry_sequence_breakers",
			"xtc_probability", "top_n_sigma", "mirostat", "mirostat_tau", "stop", "seed", "logit_bias", "n_probs", "samplers",
			"grammar", "json_schema", "stream", "id_slot", "lora", "response_fields", "n_keep", "t_max_predict_ms",
			"n_cache_reuse", "cache_prompt", "ignore_eos", "return_tokens", "post_sampling_probs", "model"}},
		{target: gen, method: "POST", path: "/completions", base: `{"prompt":"Once","n_predict":2}`, fields: []string{"prompt", "stream"}},
		{target: gen, method: "POST", path: "/v1/completions", base: `{"prompt":"Once","max_tokens":2}`, fields: []string{
			"prompt", "max_tokens", "n", "logprobs", "echo", "best_of", "suffix", "stop", "stream", "stream_options", "logit_bias", "seed", "user"}},
		{target: gen, method: "POST", path: "/v1/chat/completions", base: `{"messages":` + msgs + `,"max_tokens":2}`, fields: []string{
			"messages", "max_tokens", "max_completion_tokens", "tools", "tool_choice", "parallel_tool_calls", "response_format",
			"logprobs", "top_logprobs", "stream", "stream_options", "n", "stop", "reasoning_format", "chat_template_kwargs",
			"grammar", "json_schema", "temperature", "model"}},
		{target: gen, method: "POST", path: "/chat/completions", base: `{"messages":` + msgs + `,"max_tokens":2}`, fields: []string{"messages", "tools"}},
		{target: gen, method: "POST", path: "/v1/chat/completions/input_tokens", base: `{"messages":` + msgs + `}`, fields: []string{"messages", "tools", "tool_choice"}},
		{target: gen, method: "POST", path: "/v1/responses", base: `{"input":"hi","max_output_tokens":2}`, fields: []string{
			"input", "instructions", "max_output_tokens", "tools", "tool_choice", "text", "stream", "temperature", "reasoning", "previous_response_id", "store"}},
		{target: gen, method: "POST", path: "/v1/responses/input_tokens", base: `{"input":"hi"}`, fields: []string{"input", "instructions", "tools"}},
		{target: gen, method: "POST", path: "/v1/messages", base: `{"model":"m","max_tokens":2,"messages":` + msgs + `}`, fields: []string{
			"messages", "max_tokens", "system", "stop_sequences", "tools", "tool_choice", "stream", "temperature", "top_k", "top_p", "thinking", "metadata"}},
		{target: gen, method: "POST", path: "/v1/messages/count_tokens", base: `{"model":"m","messages":` + msgs + `}`, fields: []string{"messages", "system", "tools"}},
		{target: gen, method: "POST", path: "/tokenize", base: `{"content":"hello"}`, fields: []string{"content", "add_special", "parse_special", "with_pieces"}},
		{target: gen, method: "POST", path: "/detokenize", base: `{"tokens":[1,2,3]}`, fields: []string{"tokens"}},
		{target: gen, method: "POST", path: "/apply-template", base: `{"messages":` + msgs + `}`, fields: []string{"messages", "tools", "chat_template_kwargs"}},
		{target: gen, method: "POST", path: "/props", base: `{}`, fields: []string{"n_predict", "default_generation_settings"}},
		{target: gen, method: "POST", path: "/lora-adapters", base: ``, good: `[]`},
		{target: gen, method: "POST", path: "/slots/0?action=save", base: `{"filename":"h.bin"}`, fields: []string{"filename"}},
		{target: gen, method: "POST", path: "/slots/0?action=restore", base: `{"filename":"h.bin"}`, fields: []string{"filename"}},
		{target: gen, method: "POST", path: "/slots/1?action=erase", base: `{}`, fields: []string{"filename"}},
		{target: gen, method: "POST", path: "/slots/99?action=save", base: ``, good: `{"filename":"x.bin"}`, refuses: true},
		{target: gen, method: "POST", path: "/slots/-1?action=erase", base: ``, good: `{}`, refuses: true},
		{target: gen, method: "POST", path: "/slots/0?action=%ff", base: ``, good: `{}`, refuses: true},
		{target: gen, method: "POST", path: "/models/load", base: `{"model":"m"}`, refuses: true, fields: []string{"model"}},
		{target: gen, method: "POST", path: "/models/unload", base: `{"model":"m"}`, refuses: true, fields: []string{"model"}},
		{target: gen, method: "GET", path: "/health"},
		{target: gen, method: "GET", path: "/props"},
		{target: gen, method: "GET", path: "/props?model=%00"},
		{target: gen, method: "GET", path: "/models"},
		{target: gen, method: "GET", path: "/v1/models?x=%ff"},
		{target: gen, method: "GET", path: "/metrics"},
		{target: gen, method: "GET", path: "/slots"},
		{target: gen, method: "GET", path: "/slots?fail_on_no_slot=1"},
		{target: gen, method: "GET", path: "/lora-adapters"},
		{target: gen, method: "GET", path: "/no/such/route", refuses: true},
		{target: fim, method: "POST", path: "/infill", base: `{"input_prefix":"def f(","input_suffix":"):\n","n_predict":2}`, fields: []string{
			"input_prefix", "input_suffix", "input_extra", "prompt", "n_predict", "stream", "temperature"}},
		{target: emb, method: "POST", path: "/embedding", base: `{"content":"hello"}`, fields: []string{"content", "embd_normalize"}},
		{target: emb, method: "POST", path: "/embeddings", base: `{"input":"hello"}`, fields: []string{"input"}},
		{target: emb, method: "POST", path: "/v1/embeddings", base: `{"input":"hello"}`, fields: []string{"input", "encoding_format", "model", "embd_normalize"}},
		{target: rr, method: "POST", path: "/rerank", base: `{"query":"a","documents":["b","c"]}`, fields: []string{"query", "documents", "top_n", "return_text"}},
		{target: rr, method: "POST", path: "/v1/rerank", base: `{"query":"a","documents":["b","c"]}`, fields: []string{"query", "documents", "texts", "top_n", "return_documents"}},
	}
}

// hostileCases generates the cases of one route.
func hostileCases(t *testing.T, rt *hostileRoute, values []rawValue, grammars, schemas []json.RawMessage) []hostileCase {
	var out []hostileCase
	add := func(name string, body []byte) {
		out = append(out, hostileCase{name: rt.method + " " + rt.path + " " + name, route: rt, body: body})
	}
	if rt.method == "GET" {
		add("plain", nil)
		add("with a body", []byte(`{"a":1}`))
	} else {
		// Malformed bodies.
		for _, b := range []rawValue{
			{"no body", ""}, {"null body", "null"}, {"array body", "[]"}, {"string body", `"x"`}, {"number body", "12"},
			{"truncated body", `{"prompt":`}, {"NaN body", `{"a":NaN}`}, {"trailing garbage", `{} {}`},
			{"BOM", "\ufeff{}"}, {"invalid UTF-8 body", "{\"a\":\"\xff\"}"}, {"deep body", strings.Repeat(`{"a":`, 5000) + "1" + strings.Repeat("}", 5000)},
			{"huge body", `{"a":"` + strings.Repeat("x", hostileMaxBody+10) + `"}`}, {"duplicate keys", `{"a":1,"a":2}`},
		} {
			add(b.name, []byte(b.text))
		}
		for _, f := range rt.fields {
			for _, v := range values {
				add(f+"="+v.name, hostileBody(t, rt.base, f, v.text))
			}
			switch f {
			case "grammar":
				for i, g := range grammars {
					add(fmt.Sprintf("grammar #%d", i), hostileBody(t, rt.base, f, string(g)))
				}
			case "json_schema":
				for i, s := range schemas {
					add(fmt.Sprintf("json_schema #%d", i), hostileBody(t, rt.base, f, string(s)))
				}
			case "response_format", "text":
				for i, s := range schemas {
					v := `{"type":"json_schema","json_schema":{"name":"x","schema":` + string(s) + `}}`
					if f == "text" {
						v = `{"format":{"type":"json_schema","name":"x","schema":` + string(s) + `}}`
					}
					add(fmt.Sprintf("%s schema #%d", f, i), hostileBody(t, rt.base, f, v))
				}
			case "tools":
				for i, s := range schemas {
					v := `[{"type":"function","function":{"name":"f","parameters":` + string(s) + `}}]`
					if strings.HasPrefix(rt.path, "/v1/messages") {
						v = `[{"name":"f","input_schema":` + string(s) + `}]`
					}
					add(fmt.Sprintf("tool schema #%d", i), hostileBody(t, rt.base, f, v))
				}
			case "filename":
				for _, n := range []string{"   ", ".", "..", "../x", "/etc/passwd", "a/b", `a\b`, "\u202etxt.bin", "a\u200bb", "a\nb",
					"\x7f", strings.Repeat("x", 300), "con", "h.bin\u0000.txt", "\ufeffa", " a", "a "} {
					q, _ := json.Marshal(n)
					add(fmt.Sprintf("filename %q", n), hostileBody(t, rt.base, f, string(q)))
				}
			}
		}
	}
	// Authentication variants.
	for _, h := range []struct {
		name string
		hdr  map[string]string
	}{
		{"no key", map[string]string{}},
		{"wrong key", map[string]string{"Authorization": "Bearer nope"}},
		{"bearer only", map[string]string{"Authorization": "Bearer"}},
		{"basic scheme", map[string]string{"Authorization": "Basic " + hostileKey}},
		{"lowercase bearer", map[string]string{"Authorization": "bearer " + hostileKey}},
		{"x-api-key", map[string]string{"X-Api-Key": hostileKey}},
		{"long key", map[string]string{"Authorization": "Bearer " + strings.Repeat("k", 8000)}},
		{"non-ASCII key", map[string]string{"Authorization": "Bearer clé-\u00e9"}},
		{"key prefix", map[string]string{"Authorization": "Bearer " + hostileKey[:5]}},
	} {
		body := []byte(rt.base)
		if rt.good != "" {
			body = []byte(rt.good)
		}
		out = append(out, hostileCase{name: rt.method + " " + rt.path + " auth " + h.name, route: rt, body: body, header: h.hdr, noKey: true})
	}
	return out
}

// hostileDo sends one case and checks its answer. It returns a failure
// description, or "" when the answer is acceptable.
func hostileDo(c hostileCase) string {
	_, msg := hostileSend(c)
	return msg
}

// hostileSend is hostileDo that also returns the status.
func hostileSend(c hostileCase) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), hostileDeadline)
	defer cancel()
	var body io.Reader
	if c.body != nil {
		body = bytes.NewReader(c.body)
	}
	req, err := http.NewRequestWithContext(ctx, c.route.method, c.route.target.url+c.route.path, body)
	if err != nil {
		return 0, "build request: " + err.Error()
	}
	if c.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if !c.noKey {
		req.Header.Set("Authorization", "Bearer "+hostileKey)
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return 0, "no answer within " + hostileDeadline.String()
		}
		return 0, "request failed: " + err.Error()
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return resp.StatusCode, fmt.Sprintf("status %d, body not finished within %s", resp.StatusCode, hostileDeadline)
		}
		return resp.StatusCode, fmt.Sprintf("status %d, reading the body: %v", resp.StatusCode, err)
	}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return resp.StatusCode, ""
	case resp.StatusCode >= 400 && resp.StatusCode < 500 && strings.HasPrefix(c.route.path, "/v1/messages") &&
		bytes.HasPrefix(data, []byte(`{"type":"error"`)):
		// Anthropic's shape: {"type":"error","error":{"type","message"}};
		// the middleware (API key, body limit) answers in llama.cpp's.
		var e struct {
			Type  string `json:"type"`
			Error *struct {
				Message *string `json:"message"`
				Type    *string `json:"type"`
			} `json:"error"`
		}
		if err := json.Unmarshal(data, &e); err != nil || e.Type != "error" || e.Error == nil || e.Error.Message == nil || e.Error.Type == nil {
			return resp.StatusCode, fmt.Sprintf("status %d without Anthropic's error object: %.200s", resp.StatusCode, data)
		}
		return resp.StatusCode, ""
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		var e struct {
			Error *struct {
				Code    *int    `json:"code"`
				Message *string `json:"message"`
				Type    *string `json:"type"`
			} `json:"error"`
		}
		if err := json.Unmarshal(data, &e); err != nil || e.Error == nil || e.Error.Code == nil || e.Error.Message == nil || e.Error.Type == nil {
			return resp.StatusCode, fmt.Sprintf("status %d without the error object: %.200s", resp.StatusCode, data)
		}
		if *e.Error.Code != resp.StatusCode {
			return resp.StatusCode, fmt.Sprintf("status %d with error code %d", resp.StatusCode, *e.Error.Code)
		}
		return resp.StatusCode, ""
	}
	return resp.StatusCode, fmt.Sprintf("status %d: %.300s", resp.StatusCode, data)
}

// vmRSS reads the process's resident set size from /proc/self/status.
func vmRSS(t testing.TB) int64 {
	data, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

func TestHostileInputs(t *testing.T) {
	gen, fim, emb, rr := hostileServers(t)
	routes := hostileRoutes(gen, fim, emb, rr)
	values := hostileValues()
	grammars := readJSONArray(t, "testdata/hostile/grammars.json")
	schemas := readJSONArray(t, "testdata/hostile/schemas.json")

	// One good request per server first, so that lazily built state is
	// counted in the starting RSS.
	for _, rt := range routes {
		if rt.method == "POST" && rt.base != "" {
			require.Empty(t, hostileDo(hostileCase{name: "warm-up", route: rt, body: []byte(rt.base)}), rt.path)
		}
	}
	rssStart := vmRSS(t)
	total := 0
	for _, rt := range routes {
		cases := hostileCases(t, rt, values, grammars, schemas)
		total += len(cases)
		failures := hostileRun(cases)
		for _, f := range failures {
			t.Error(f)
		}
		// A good request still succeeds after the batch.
		good := rt.good
		if good == "" {
			good = rt.base
		}
		var body []byte
		if good != "" {
			body = []byte(good)
		}
		if msg := hostileGood(hostileCase{name: "good", route: rt, body: body}); msg != "" {
			t.Errorf("%s %s: a good request after the batch: %s", rt.method, rt.path, msg)
		}
	}
	rssEnd := vmRSS(t)
	t.Logf("%d hostile requests; RSS %d MB before, %d MB after", total, rssStart>>20, rssEnd>>20)
	assert.GreaterOrEqual(t, total, 300)
	assert.Less(t, rssEnd-rssStart, int64(hostileRSSBound), "resident memory grew by %d MB", (rssEnd-rssStart)>>20)
	// Every slot is idle again once the suite is done.
	code, out := hostileGet(t, gen.url+"/slots")
	require.Equal(t, http.StatusOK, code)
	for _, s := range out {
		assert.Equal(t, false, s["is_processing"], "slot %v", s["id"])
	}
}

// hostileRun sends cases on two connections at a time and returns the
// failures.
func hostileRun(cases []hostileCase) []string {
	var mu sync.Mutex
	var failures []string
	work := make(chan hostileCase)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				if msg := hostileDo(c); msg != "" {
					mu.Lock()
					failures = append(failures, c.name+": "+msg)
					mu.Unlock()
				}
			}
		}()
	}
	for _, c := range cases {
		work <- c
	}
	close(work)
	wg.Wait()
	return failures
}

// hostileGet gets a JSON array with the API key.
func hostileGet(t *testing.T, url string) (int, []map[string]any) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+hostileKey)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out []map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}

// hostileGood sends a good request and requires a 2xx, or for routes
// that always refuse (bad slot ids, router-only routes), an acceptable 4xx.
func hostileGood(c hostileCase) string {
	code, msg := hostileSend(c)
	if msg != "" || c.route.refuses || code < 300 {
		return msg
	}
	return fmt.Sprintf("status %d", code)
}
