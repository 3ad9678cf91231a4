//go:build realmodel

package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/engine"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/sampling"
)

// The differential suite runs llama.cpp's llama-server (built from the
// pinned source against the installed libraries, see llama-install
// -server) and this package's server side by side on Gemma 3 270M with the
// same settings, sends both the same requests and requires the same
// answers. A difference that is deliberate or not ours to fix is listed,
// with its reason, in testdata/realmodel-deviations.txt; a listed case
// that no longer differs fails as stale.

// realDiffCtx and the other settings both servers run with: one slot, one
// thread each (so that both fit on two cores), a fixed seed.
const (
	realDiffCtx  = 2048
	realDiffSeed = 42
)

// diffPair is the two servers' URLs.
type diffPair struct{ ref, ours string }

// startRealDiffPair starts both servers; llama-server also gets the flags
// the deviations file lists as "settings/<flag>" (settings of ours it has
// no default for).
func startRealDiffPair(t *testing.T, allowed deviations) diffPair {
	return startRealDiffPairWith(t, allowed, nil, nil)
}

// startRealDiffPairWith starts both servers with the suite's settings,
// then refArgs added to llama-server's flags and tweak applied to our
// Options (the same settings in each one's terms).
func startRealDiffPairWith(t *testing.T, allowed deviations, refArgs []string, tweak func(*Options)) diffPair {
	t.Helper()
	model := testenv.RealModel(t, "gemma3-270m")
	bin := testenv.LlamaServer(t)
	args := []string{"-m", model, "-c", strconv.Itoa(realDiffCtx), "-np", "1", "-t", "1", "-tb", "1",
		"--seed", strconv.Itoa(realDiffSeed)}
	for id := range allowed {
		if flag, ok := strings.CutPrefix(id, "settings/"); ok {
			args = append(args, strings.Fields(flag)...)
		}
	}
	ref := testenv.RunHTTPServer(t, bin, "", append(args, refArgs...)...)
	sp := sampling.Defaults()
	sp.Seed = realDiffSeed
	o := Options{Model: model, Jinja: true, Sampling: &sp,
		Engine: engine.Options{Parallel: 1, Context: llama.ContextOptions{ContextSize: realDiffCtx, Threads: 1, ThreadsBatch: 1}}}
	if tweak != nil {
		tweak(&o)
	}
	_, ts := newTestServer(t, o)
	return diffPair{ref: ref, ours: ts.URL}
}

// both posts body to path on both servers at once and returns the two
// status codes and decoded answers.
func (p diffPair) both(t *testing.T, path string, body any) (refCode int, ref any, oursCode int, ours any) {
	t.Helper()
	data, err := json.Marshal(body)
	require.NoError(t, err)
	var wg sync.WaitGroup
	post := func(url string, code *int, out *any, e *error) {
		defer wg.Done()
		resp, err := http.Post(url+path, "application/json", bytes.NewReader(data))
		if err != nil {
			*e = err
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			*e = err
			return
		}
		*code = resp.StatusCode
		if err := json.Unmarshal(b, out); err != nil {
			*e = fmt.Errorf("%w: %s", err, b)
		}
	}
	var errRef, errOurs error
	wg.Add(2)
	go post(p.ref, &refCode, &ref, &errRef)
	go post(p.ours, &oursCode, &ours, &errOurs)
	wg.Wait()
	require.NoError(t, errRef, "llama-server")
	require.NoError(t, errOurs, "ours")
	return
}

// realDeviations reads testdata/realmodel-deviations.txt: lines
// "id: reason", # comments. An id "settings/<flags>" is not a case but
// flags llama-server runs with, to match a setting of ours.
func realDeviations(t *testing.T) deviations {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "realmodel-deviations.txt"))
	require.NoError(t, err)
	defer f.Close()
	out := deviations{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		id, reason, ok := strings.Cut(l, ": ")
		require.True(t, ok, "deviation line %q is not \"id: reason\"", l)
		require.NotEmpty(t, strings.TrimSpace(reason), "deviation %s gives no reason", id)
		id, mayMatch := strings.CutPrefix(id, "~")
		out[id] = deviation{reason: reason, mayMatch: mayMatch}
	}
	require.NoError(t, sc.Err())
	require.LessOrEqual(t, len(out), 5, "at most 5 deviations are allowed")
	return out
}

// deviations are the allowed differences of realmodel-deviations.txt, by
// case id.
type deviations map[string]deviation

// deviation is an allowed difference. One that mayMatch (its id written
// "~id") is a difference of the CPU's kernels, present on some CPUs and
// not others, so a case that matches is not stale.
type deviation struct {
	reason   string
	mayMatch bool
}

// diffLog collects the differences of a run against the allowed ones.
type diffLog struct {
	allowed deviations
	seen    map[string]bool
	bad     []string
}

func (d *diffLog) check(id string, ref, ours any) {
	if d.seen == nil {
		d.seen = map[string]bool{}
	}
	same := jsonEqual(ref, ours)
	if group := d.group(id); group != "" {
		// A listed group ("kind/*") of cases: stale when none differs.
		if !same {
			d.seen[group] = true
		}
		return
	}
	if dev, ok := d.allowed[id]; ok {
		d.seen[id] = true
		if same && !dev.mayMatch {
			d.bad = append(d.bad, fmt.Sprintf("%s: listed as a deviation but now identical (remove it)", id))
		}
		return
	}
	if !same {
		rb, _ := json.Marshal(ref)
		ob, _ := json.Marshal(ours)
		d.bad = append(d.bad, fmt.Sprintf("%s:\n  llama-server: %s\n  ours:         %s", id, tailText(string(rb), 600), tailText(string(ob), 600)))
	}
}

// group is the listed "kind/*" deviation that covers id, if any.
func (d *diffLog) group(id string) string {
	for g := range d.allowed {
		if prefix, ok := strings.CutSuffix(g, "/*"); ok && strings.HasPrefix(id, prefix+"/") {
			return g
		}
	}
	return ""
}

// report fails the test with the differences, and with the deviations
// listed for these kinds of case (id prefixes) that no case matched.
func (d *diffLog) report(t *testing.T, kinds ...string) {
	t.Helper()
	for id := range d.allowed {
		for _, k := range kinds {
			if strings.HasPrefix(id, k+"/") && !d.seen[id] {
				if strings.HasSuffix(id, "/*") {
					d.bad = append(d.bad, fmt.Sprintf("%s: listed as a deviation but every such case is identical (remove it)", id))
					continue
				}
				d.bad = append(d.bad, fmt.Sprintf("%s: listed as a deviation but no such case", id))
			}
		}
	}
	if len(d.bad) > 0 {
		n := len(d.bad)
		if len(d.bad) > 20 {
			d.bad = d.bad[:20]
		}
		t.Fatalf("%d differences from llama-server (first %d):\n%s", n, len(d.bad), strings.Join(d.bad, "\n"))
	}
}

func jsonEqual(a, b any) bool {
	ab, _ := json.Marshal(a)
	bb, _ := json.Marshal(b)
	return bytes.Equal(ab, bb)
}

// TestRealModelDiff is the differential suite on Gemma 3 270M: /tokenize
// and /detokenize over a corpus of over 500 lines with parse_special and
// with_pieces on and off, greedy /completion for 30 prompts (one over
// 1,000 tokens), /apply-template and greedy /v1/chat/completions for a few
// conversations. Each answer must be the same as llama-server's.
func TestRealModelDiff(t *testing.T) {
	allowed := realDeviations(t)
	p := startRealDiffPair(t, allowed)

	t.Run("tokenize", func(t *testing.T) {
		d := &diffLog{allowed: allowed}
		corpus := tokenizerCorpus()
		require.GreaterOrEqual(t, len(corpus), 500)
		for i, line := range corpus {
			for _, special := range []bool{false, true} {
				for _, pieces := range []bool{false, true} {
					id := fmt.Sprintf("tokenize/%d/special=%v/pieces=%v", i, special, pieces)
					rc, ref, oc, ours := p.both(t, "/tokenize", map[string]any{
						"content": line, "parse_special": special, "with_pieces": pieces})
					require.Equal(t, 200, rc, "%s: %v", id, ref)
					require.Equal(t, 200, oc, "%s: %v", id, ours)
					d.check(id, ref, ours)
					if pieces || rc != 200 {
						continue
					}
					// The reference's tokens, back to text, on both.
					toks := ref.(map[string]any)["tokens"]
					id = fmt.Sprintf("detokenize/%d/special=%v", i, special)
					rc, ref, oc, ours = p.both(t, "/detokenize", map[string]any{"tokens": toks})
					require.Equal(t, 200, rc, "%s: %v", id, ref)
					require.Equal(t, 200, oc, "%s: %v", id, ours)
					d.check(id, ref, ours)
				}
			}
		}
		d.report(t, "tokenize", "detokenize")
	})

	t.Run("completion", func(t *testing.T) {
		d := &diffLog{allowed: allowed}
		prompts := completionPrompts()
		require.Len(t, prompts, 30)
		for i, prompt := range prompts {
			id := fmt.Sprintf("completion/%d", i)
			rc, ref, oc, ours := p.both(t, "/completion", map[string]any{
				"prompt": prompt, "n_predict": 32, "temperature": 0, "cache_prompt": false})
			require.Equal(t, 200, rc, "%s: %v", id, ref)
			require.Equal(t, 200, oc, "%s: %v", id, ours)
			pick := func(v any) any {
				m := v.(map[string]any)
				return map[string]any{"content": m["content"], "tokens_predicted": m["tokens_predicted"],
					"tokens_evaluated": m["tokens_evaluated"], "stop_type": m["stop_type"]}
			}
			d.check(id, pick(ref), pick(ours))
		}
		d.report(t, "completion")
	})

	// Token probabilities under grammars: the end-of-text token a complete
	// grammar leaves (Gemma has several: the likeliest ends the text) and
	// characters split over byte tokens (one entry, the whole character).
	t.Run("probabilities", func(t *testing.T) {
		d := &diffLog{allowed: allowed}
		for i, c := range []struct{ prompt, grammar string }{
			{"The capital of France is", `root ::= " Paris."`},
			{"Once upon a time", `root ::= " 日本 café 👍"`},
		} {
			for _, stream := range []bool{false, true} {
				id := fmt.Sprintf("probabilities/%d/stream=%v", i, stream)
				body := map[string]any{"prompt": c.prompt, "grammar": c.grammar, "temperature": 0, "n_predict": 32, "n_probs": 3, "cache_prompt": false, "stream": stream}
				var ref, ours any
				if stream {
					ref, ours = p.streamBoth(t, "/completion", body)
				} else {
					var rc, oc int
					rc, ref, oc, ours = p.both(t, "/completion", body)
					require.Equal(t, 200, rc, "%s: %v", id, ref)
					require.Equal(t, 200, oc, "%s: %v", id, ours)
				}
				d.check(id, probEntries(ref), probEntries(ours))
			}
		}
		d.report(t, "probabilities")
	})

	t.Run("apply-template", func(t *testing.T) {
		d := &diffLog{allowed: allowed}
		for i, msgs := range diffConversations() {
			id := fmt.Sprintf("apply-template/%d", i)
			rc, ref, oc, ours := p.both(t, "/apply-template", map[string]any{"messages": msgs})
			require.Equal(t, 200, rc, "%s: %v", id, ref)
			require.Equal(t, 200, oc, "%s: %v", id, ours)
			d.check(id, ref, ours)
		}
		d.report(t, "apply-template")
	})

	t.Run("chat", func(t *testing.T) {
		d := &diffLog{allowed: allowed}
		for i, msgs := range diffConversations()[:4] {
			id := fmt.Sprintf("chat/%d", i)
			rc, ref, oc, ours := p.both(t, "/v1/chat/completions", map[string]any{
				"messages": msgs, "max_tokens": 32, "temperature": 0, "cache_prompt": false})
			require.Equal(t, 200, rc, "%s: %v", id, ref)
			require.Equal(t, 200, oc, "%s: %v", id, ours)
			pick := func(v any) any {
				m := v.(map[string]any)
				c := m["choices"].([]any)[0].(map[string]any)
				return map[string]any{"content": c["message"].(map[string]any)["content"],
					"finish_reason": c["finish_reason"], "usage": m["usage"]}
			}
			d.check(id, pick(ref), pick(ours))
		}
		d.report(t, "chat")
	})
}

// streamBoth posts body to path on both servers, one after the other, and
// returns the JSON events of their streams.
func (p diffPair) streamBoth(t *testing.T, path string, body any) (ref, ours []any) {
	t.Helper()
	events := func(url string) []any {
		var out []any
		for _, d := range sseEvents(t, url+path, body) {
			var v any
			require.NoError(t, json.Unmarshal([]byte(d), &v), "%s", d)
			out = append(out, v)
		}
		return out
	}
	return events(p.ref), events(p.ours)
}

// probEntries is the id, text and bytes of each completion_probabilities
// entry of an answer, or of the events of a stream (a []any of them).
func probEntries(v any) []any {
	var out []any
	add := func(m map[string]any) {
		ps, _ := m["completion_probabilities"].([]any)
		for _, p := range ps {
			e := p.(map[string]any)
			out = append(out, []any{e["id"], e["token"], e["bytes"]})
		}
	}
	switch v := v.(type) {
	case map[string]any:
		add(v)
	case []any:
		for _, ev := range v {
			add(ev.(map[string]any))
		}
	}
	return out
}

// diffConversations are the chat conversations of the suite.
func diffConversations() [][]map[string]any {
	msg := func(role, content string) map[string]any { return map[string]any{"role": role, "content": content} }
	return [][]map[string]any{
		{msg("user", "What is the capital of France?")},
		{msg("system", "You answer in one word."), msg("user", "Name a colour.")},
		{msg("user", "Hi!"), msg("assistant", "Hello! How can I help?"), msg("user", "Tell me a joke about cats.")},
		{msg("user", "Écris une phrase en français avec des accents: é, è, à, ç.")},
		{msg("user", "日本の首都はどこですか？")},
		{msg("user", "Write a Go function that adds two ints.\n```go\n")},
		{msg("system", ""), msg("user", "  leading and trailing spaces  ")},
		{msg("user", "emoji test 👍🏽 🇫🇷 👨‍👩‍👧")},
	}
}

// completionPrompts are 30 prompts: English, code, several languages,
// emoji, and one of over 1,000 tokens.
func completionPrompts() []string {
	long := strings.Repeat("The quick brown fox jumps over the lazy dog while the farmer counts his sheep one by one. ", 60) +
		"In summary, the story is about"
	return []string{
		"The capital of France is",
		"Once upon a time, in a small village,",
		"The three primary colours are",
		"Water boils at a temperature of",
		"def fibonacci(n):\n",
		"package main\n\nimport \"fmt\"\n\nfunc main() {\n",
		"SELECT name, age FROM users WHERE",
		"<html>\n<head>\n<title>",
		"function add(a, b) {",
		`{"name": "Alice", "age":`,
		"La capitale de l'Allemagne est",
		"Der schnellste Weg nach Berlin ist",
		"El perro de mi vecino",
		"Il gatto è sul",
		"Москва — это",
		"東京は日本の",
		"北京是中国的",
		"서울은 한국의",
		"مرحبا، كيف",
		"नमस्ते, मेरा नाम",
		"I love pizza 🍕 and",
		"🚀 Launch day! We",
		"1, 2, 3, 4, 5,",
		"Q: What is 2 + 2?\nA:",
		"   Leading spaces and\ttabs\tin the prompt",
		"Line one\nLine two\nLine three\n",
		"<start_of_turn>user\nWhat is the sun?<end_of_turn>\n<start_of_turn>model\n",
		"The word 'naïve' contains a diaeresis, and 'café'",
		"Translate to French: Good morning =>",
		long,
	}
}

// tokenizerCorpus builds the tokenizer corpus: hand-picked lines for
// whitespace runs, Unicode normalisation forms, CJK, emoji, code, special
// tokens and other scripts, then deterministic mixtures of them.
func tokenizerCorpus() []string {
	var c []string
	// Whitespace runs, alone and around words.
	for _, ws := range []string{" ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2009"} {
		for _, n := range []int{1, 2, 3, 7, 16} {
			r := strings.Repeat(ws, n)
			c = append(c, r, "a"+r+"b", r+"word"+r)
		}
	}
	c = append(c, "", " ", "\n\n\n", "  \n  \t  \n", "end with newline\n", "\ttab start", "trailing   ")
	// Unicode normalisation: the same text composed and decomposed,
	// compatibility forms, combining marks.
	c = append(c,
		"café", "cafe\u0301", "Å", "A\u030a", "Ω", "\u2126", "ﬁnance", "ﬀ ﬂ ﬃ", "ＡＢＣ１２３", "ｶﾀｶﾅ",
		"한국어", "\u1112\u1161\u11ab\u1100\u116e\u11a8\u110b\u1165", "ñandú", "n\u0303andu\u0301",
		"Tiếng Việt", "Ti\u00ea\u0301ng Vi\u00ea\u0323t", "x\u0336\u0336\u0336", "e\u0301\u0301\u0301",
		"①②③", "ℌℍℎ", "½ ¼ ¾", "µ μ", "K \u212a", "Ǆ ǅ ǆ", "İstanbul ı", "straße STRASSE", "ΣΑΣ σας",
		"\u200b\u200c\u200d", "a\u200bb", "\ufeffBOM", "\u202eRTL override", "soft\u00adhyphen")
	// CJK.
	c = append(c,
		"你好，世界！", "我爱北京天安门。", "今日は良い天気ですね。", "カタカナとひらがな", "漢字かな交じり文",
		"안녕하세요 세계", "대한민국의 수도는 서울입니다.", "中文、日本語、한국어", "「引用」『二重』", "１２３４５６",
		"繁體中文測試", "简体中文测试", "𠀀𠀁𠀂 (CJK extension B)", "〇一二三四五六七八九十", "ㄅㄆㄇㄈ")
	// Emoji.
	c = append(c,
		"😀", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷🇩🇪🇯🇵", "1️⃣ #️⃣", "❤️ ♥", "🏳️‍🌈", "🧑🏿‍💻", "😀😃😄😁😆", "emoji at end 🎉",
		"🎉 at start", "mixed 😀text😀", "☃ ☂ ☀", "🫠🫡🫢", "👩🏻‍❤️‍💋‍👨🏼")
	// Code.
	c = append(c,
		"func main() { fmt.Println(\"hi\") }", "if (x != null && y >= 3) { return x->y; }",
		"def f(x):\n    return x ** 2", "for i in range(10):\n\tprint(i)", "#include <stdio.h>",
		"SELECT * FROM t WHERE id = 42;", `{"key": [1, 2.5, true, null], "nested": {"a": "b"}}`,
		"<div class=\"x\">&amp;&lt;&gt;</div>", "x := map[string][]int{}", "a<<=2; b>>>=1; c ?? d",
		"// comment\n/* block */", "#!/bin/bash\necho $HOME", "λx.x", "0x1F 0b1010 1e-9 3.14159",
		"https://example.com/path?q=1&r=2#frag", "user@example.com", "C:\\Windows\\System32",
		"    indented four", "\t\tindented tabs", "camelCaseIdentifier snake_case_identifier kebab-case")
	// Gemma's special tokens and things that look like them.
	c = append(c,
		"<start_of_turn>", "<end_of_turn>", "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n",
		"<bos>", "<eos>", "<pad>", "<unk>", "<mask>", "[multimodal]", "<unused0>", "<unused99>",
		"<start_of_image>", "<end_of_image>", "<start_of_tur", "<<start_of_turn>>", "<start_of_turn><start_of_turn>",
		"text<end_of_turn>text", "<bos>Hello<eos>", " <start_of_turn> ", "<START_OF_TURN>", "< start_of_turn >",
		"</start_of_turn>", "<b>bold</b>", "<escape>", "<image_soft_token>")
	// Other scripts and numbers.
	c = append(c,
		"Привет, мир!", "Γειά σου Κόσμε", "שלום עולם", "مرحبا بالعالم", "नमस्ते दुनिया", "สวัสดีชาวโลก",
		"Բարեւ աշխարհ", "გამარჯობა", "ሰላም ልዑል", "Xin chào", "Merhaba dünya", "Witaj świecie", "Ahoj světe",
		"123", "1234567890", "3.14159265358979", "1,000,000", "2024-01-31T12:00:00Z", "+1 (555) 123-4567",
		"$100.00 €50 £20 ¥1000", "100%", "a1b2c3", "I'm you're they've", "don't won't can't",
		"HELLO hello Hello hElLo", "...", "!!!???", "---===+++", "~`@#$%^&*()_+", "\"quoted\" 'single'")
	// Deterministic mixtures of the pieces above.
	base := append([]string(nil), c...)
	r := rand.New(rand.NewPCG(7, 11))
	seps := []string{"", " ", "  ", "\n", "\t", " \n ", "\u3000"}
	for len(c) < 560 {
		n := 2 + r.IntN(4)
		var b strings.Builder
		for j := range n {
			if j > 0 {
				b.WriteString(seps[r.IntN(len(seps))])
			}
			b.WriteString(base[r.IntN(len(base))])
		}
		c = append(c, b.String())
	}
	return c
}

// TestRealModelEmbeddingsDiff embeds 50 sentences with all-MiniLM-L6-v2
// (converted by internal/realmodel) on llama-server and on ours, both with
// mean pooling and one thread: each pair of vectors must have a cosine
// similarity of at least 0.9999, and the same token counts.
func TestRealModelEmbeddingsDiff(t *testing.T) {
	model := testenv.RealModel(t, "all-minilm-l6-v2")
	ref := testenv.RunHTTPServer(t, testenv.LlamaServer(t), "", "-m", model, "--embeddings", "--pooling", "mean",
		"-c", "512", "-np", "1", "-t", "1", "-tb", "1")
	_, ts := newTestServer(t, Options{Model: model, Engine: engine.Options{
		Embedding: true, Context: llama.ContextOptions{Pooling: llama.PoolingMean, ContextSize: 512, Threads: 1, ThreadsBatch: 1}, Parallel: 1}})
	p := diffPair{ref: ref, ours: ts.URL}
	sentences := embeddingSentences()
	require.Len(t, sentences, 50)
	vecs := func(v any) [][]float64 {
		var out [][]float64
		for _, d := range v.(map[string]any)["data"].([]any) {
			var e []float64
			for _, x := range d.(map[string]any)["embedding"].([]any) {
				e = append(e, x.(float64))
			}
			out = append(out, e)
		}
		return out
	}
	// Ten inputs a request: this server bounds the inputs of one request
	// by its context (llama-server takes any number).
	var a, b [][]float64
	for i := 0; i < len(sentences); i += 10 {
		rc, refOut, oc, oursOut := p.both(t, "/v1/embeddings", map[string]any{"input": sentences[i : i+10]})
		require.Equal(t, 200, rc, "%v", refOut)
		require.Equal(t, 200, oc, "%v", oursOut)
		require.Equal(t, refOut.(map[string]any)["usage"], oursOut.(map[string]any)["usage"], "token counts")
		a, b = append(a, vecs(refOut)...), append(b, vecs(oursOut)...)
	}
	require.Len(t, a, 50)
	require.Len(t, b, 50)
	worst := 1.0
	for i := range a {
		require.Len(t, b[i], len(a[i]), "sentence %d", i)
		var dot, na, nb float64
		for j := range a[i] {
			dot += a[i][j] * b[i][j]
			na += a[i][j] * a[i][j]
			nb += b[i][j] * b[i][j]
		}
		cos := dot / math.Sqrt(na*nb)
		worst = min(worst, cos)
		require.GreaterOrEqual(t, cos, 0.9999, "sentence %d %q", i, sentences[i])
	}
	t.Logf("lowest cosine over 50 sentences: %.7f", worst)
}

// embeddingSentences are 50 sentences of several lengths and languages.
func embeddingSentences() []string {
	s := []string{
		"A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby.",
		"A man is riding a horse.", "A woman is playing violin.", "Two men pushed carts through the woods.",
		"A man is riding a white horse on an enclosed ground.", "A monkey is playing drums.",
		"Someone in a gorilla costume is playing a set of drums.", "The cat sits outside.",
		"The new movie is awesome.", "The new movie is so great.", "I love pasta.", "Do you like pizza?",
		"The quick brown fox jumps over the lazy dog.", "Machine learning is a field of artificial intelligence.",
		"Paris is the capital of France.", "Berlin is the capital of Germany.", "What time is it?",
		"It is raining cats and dogs.", "She sells seashells by the seashore.", "How are you doing today?",
		"The stock market crashed in 1929.", "Water boils at 100 degrees Celsius.", "Python is a programming language.",
		"Go has goroutines and channels.", "func main() { fmt.Println(\"hello\") }", "SELECT * FROM users;",
		"Le chat est sur la table.", "Der Hund spielt im Garten.", "El niño come una manzana.",
		"Привет, как дела?", "日本語の文です。", "这是一个中文句子。", "Emoji are fun 😀🎉",
		"UPPER CASE SENTENCE", "lower case sentence", "MiXeD CaSe SeNtEnCe", "numbers 1 2 3 4 5 6 7 8 9 10",
		"a", "", "   spaces   around   ", "tabs\tand\nnewlines", "café naïve résumé",
		"unaffable unbelievable antidisestablishmentarianism",
		"The meeting has been postponed until next week because the manager is travelling abroad.",
		"Photosynthesis converts light energy into chemical energy stored in glucose.",
		"He said: \"Don't count your chickens before they hatch.\"",
		"[CLS] and [SEP] are special tokens in BERT.",
		strings.Repeat("This sentence is repeated to make a longer input. ", 12),
	}
	return s
}
