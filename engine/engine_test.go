package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/gguf/gguftest"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/internal/testenv/modeltest"
	"github.com/x/llama/sampling"
)

const storiesGreedy = ", there was a little girl named Lily. She loved to play outside in the park"

// engModelPath returns the shared stories260K test model.
func engModelPath(t testing.TB) string {
	t.Helper()
	return testenv.Model(t, "stories260K.gguf")
}

func engStoriesModel(t testing.TB) *llama.Model {
	t.Helper()
	return modeltest.Shared(t, "stories260K.gguf", true)
}

func newEngTestEngine(t testing.TB, o Options) (*llama.Model, *Engine) {
	m := engStoriesModel(t)
	if o.Context.Threads == 0 {
		o.Context.Threads = 1
	}
	e, err := New(m, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return m, e
}

func engTokenize(t testing.TB, m *llama.Model, s string, special bool) []llama.Token {
	toks, err := m.Tokenize(s, llama.TokenizeOptions{AddSpecial: special})
	if err != nil {
		t.Fatal(err)
	}
	return toks
}

func engGreedyTask(prompt []llama.Token, n int) *Request {
	p := sampling.Defaults()
	p.Temperature = 0
	return &Request{Kind: KindCompletion, Prompt: prompt, Params: p, NPredict: n, NKeep: 0, SlotID: -1, Normalize: 2}
}

type engResult struct {
	text   string
	tokens []llama.Token
	events []Event
	done   Event
}

func engCollect(t testing.TB, st *Stream) engResult {
	var r engResult
	defer st.Close()
	for st.Next() {
		ev := st.Event()
		if ev.Done {
			r.done = ev
			continue
		}
		r.events = append(r.events, ev)
		r.text += ev.Text
		r.tokens = append(r.tokens, ev.Token)
	}
	if !r.done.Done {
		t.Fatalf("stream ended without Done event: %v", st.Err())
	}
	return r
}

func engRun(t testing.TB, e *Engine, task *Request) engResult {
	ch, err := e.Submit(context.Background(), task)
	if err != nil {
		t.Fatal(err)
	}
	r := engCollect(t, ch)
	if r.done.Err != nil {
		t.Fatalf("task failed: %v", r.done.Err)
	}
	return r
}

func TestEngineGreedy(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 512}})
	r := engRun(t, e, engGreedyTask(engTokenize(t, m, "Once upon a time", true), 32))
	if !strings.HasPrefix(r.text, storiesGreedy) {
		t.Fatalf("got %q, want prefix %q", r.text, storiesGreedy)
	}
	if r.done.Stop != StopTypeLimit || r.done.Generated != 32 || len(r.events) != 32 {
		t.Fatalf("done %+v, %d events", r.done, len(r.events))
	}
	if r.done.Timings.PredictedN != 32 || r.done.Timings.PromptN != r.done.PromptTokens {
		t.Fatalf("timings %+v", r.done.Timings)
	}
	mt := e.Metrics()
	if mt.TokensPredictedTotal != 32 || mt.DecodeTotal < 32 || mt.RequestsProcessing != 0 {
		t.Fatalf("metrics %+v", mt)
	}
}

func TestEngineParallelGreedy(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 1024}, Parallel: 4, ContextShift: true})
	prompt := engTokenize(t, m, "Once upon a time", true)
	// A task that runs until cancelled holds one slot, so the greedy tasks
	// below certainly share decodes with it, whatever the timing.
	ctx, cancel := context.WithCancel(context.Background())
	holder := engGreedyTask(prompt, -1)
	holder.Params.IgnoreEOS = true
	hch, err := e.Submit(ctx, holder)
	if err != nil {
		t.Fatal(err)
	}
	hch.Next()
	first := hch.Event()
	var wg sync.WaitGroup
	res := make([]engResult, 3)
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = engRun(t, e, engGreedyTask(prompt, 48))
		}()
	}
	wg.Wait()
	slots := map[int]bool{first.SlotID: true}
	for i, r := range res {
		if !strings.HasPrefix(r.text, storiesGreedy) || r.text != res[0].text {
			t.Fatalf("task %d: %q", i, r.text)
		}
		slots[r.done.SlotID] = true
	}
	cancel()
	for hch.Next() {
	}
	if len(slots) < 2 {
		t.Errorf("tasks did not run in parallel: slots %v", slots)
	}
	if m := e.Metrics(); m.BusySlotsPerDecode <= 1 {
		t.Errorf("busy slots per decode %v", m.BusySlotsPerDecode)
	}
}

func TestEnginePromptCache(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 512}})
	prompt := engTokenize(t, m, "Once upon a time", true)
	tk := engGreedyTask(prompt, 24)
	tk.CachePrompt = true
	r1 := engRun(t, e, tk)
	if r1.done.CachedTokens != 0 {
		t.Fatalf("first task cached %d", r1.done.CachedTokens)
	}
	r2 := engRun(t, e, tk)
	if r2.done.CachedTokens != len(prompt)-1 || r2.text != r1.text {
		t.Fatalf("second: cached %d text %q vs %q", r2.done.CachedTokens, r2.text, r1.text)
	}
	// A longer prompt extending the first: the prompt is reused.
	long := append(append([]llama.Token(nil), prompt...), r1.tokens[:8]...)
	tk3 := engGreedyTask(long, 8)
	tk3.CachePrompt = true
	r3 := engRun(t, e, tk3)
	if r3.done.CachedTokens != len(long)-1 || r3.done.Timings.PromptN != 1 {
		t.Fatalf("third: cached %d timings %+v", r3.done.CachedTokens, r3.done.Timings)
	}
	want := r1.tokens[8:16]
	for i := range want {
		if r3.tokens[i] != want[i] {
			t.Fatalf("continuation %v, want %v", r3.tokens, want)
		}
	}
}

func TestEngineCancel(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 512}, Parallel: 1})
	prompt := engTokenize(t, m, "Once upon a time", true)
	ctx, cancel := context.WithCancel(context.Background())
	tk := engGreedyTask(prompt, -1)
	tk.Params.IgnoreEOS = true
	tk.NKeep = -1
	ch, err := e.Submit(ctx, tk)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		ch.Next()
	}
	cancel()
	for ch.Next() { // closed soon
	}
	r := engRun(t, e, engGreedyTask(prompt, 8))
	if !strings.HasPrefix(storiesGreedy, r.text) || r.done.Generated != 8 {
		t.Fatalf("after cancel: %q", r.text)
	}
}

func TestEngineQueueBusy(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 512}, Parallel: 1, QueueSize: 1})
	prompt := engTokenize(t, m, "Once upon a time", true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	long := engGreedyTask(prompt, -1)
	long.Params.IgnoreEOS = true
	ch1, err := e.Submit(ctx, long)
	if err != nil {
		t.Fatal(err)
	}
	ch1.Next() // running
	ch2, err := e.Submit(ctx, engGreedyTask(prompt, 4))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Submit(ctx, engGreedyTask(prompt, 4)); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("third submit: %v, want ErrQueueFull", err)
	}
	if d := e.Metrics().RequestsDeferred; d != 1 {
		t.Errorf("deferred %d", d)
	}
	cancel()
	for ch1.Next() {
	}
	for ch2.Next() {
	}
	engRun(t, e, engGreedyTask(prompt, 4))
}

func TestEngineStopString(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 512}})
	tk := engGreedyTask(engTokenize(t, m, "Once upon a time", true), 64)
	tk.Stop = []string{"named Lily", "zzz"}
	r := engRun(t, e, tk)
	if r.text != ", there was a little girl " || r.done.Stop != StopTypeWord || r.done.StoppingWord != "named Lily" {
		t.Fatalf("text %q done %+v", r.text, r.done)
	}
	for _, ev := range r.events {
		if strings.Contains(ev.Text, "named") {
			t.Fatalf("stop text leaked in %q", ev.Text)
		}
	}
}

func TestEngineNProbs(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 512}})
	tk := engGreedyTask(engTokenize(t, m, "Once upon a time", true), 4)
	tk.Params.NProbs = 5
	r := engRun(t, e, tk)
	for _, ev := range r.events {
		if len(ev.Probs) != 5 || ev.Sampled == nil {
			t.Fatalf("event %+v", ev)
		}
		if ev.Probs[0].Token != ev.Token || ev.Sampled.Token != ev.Token {
			t.Fatalf("greedy token %d not the most likely %+v", ev.Token, ev.Probs)
		}
		for i := 1; i < 5; i++ {
			if ev.Probs[i].Prob > ev.Probs[i-1].Prob {
				t.Fatalf("not sorted: %+v", ev.Probs)
			}
		}
		if p := ev.Probs[0]; p.Prob <= 0 || p.Prob > 1 || math.Abs(math.Log(float64(p.Prob))-float64(p.Logprob)) > 1e-4 {
			t.Fatalf("prob %+v", p)
		}
	}
	// SampledProbs alone: each token's own entry, the same, no alternatives.
	own := engGreedyTask(tk.Prompt, 4)
	own.SampledProbs = true
	o := engRun(t, e, own)
	require.Len(t, o.events, len(r.events))
	for i, ev := range o.events {
		assert.Empty(t, ev.Probs)
		require.NotNil(t, ev.Sampled)
		assert.Equal(t, r.events[i].Sampled.Token, ev.Sampled.Token)
		assert.InDelta(t, r.events[i].Sampled.Logprob, ev.Sampled.Logprob, 1e-6)
	}
}

func TestEngineContextFull(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 256}})
	nCtx := e.SlotsInfo()[0].NCtx
	prompt := engTokenize(t, m, "Once upon a time", true)
	tk := engGreedyTask(prompt, -1)
	tk.Params.IgnoreEOS = true
	r := engRun(t, e, tk)
	if r.done.Stop != StopTypeLimit || !r.done.Truncated || len(prompt)+r.done.Generated > nCtx || r.done.Generated < nCtx-len(prompt)-2 {
		t.Fatalf("no shift (n_ctx %d): %+v", nCtx, r.done)
	}
	// Too long a prompt.
	long := make([]llama.Token, 0, nCtx+20)
	for len(long) < nCtx+10 {
		long = append(long, prompt...)
	}
	ch, err := e.Submit(context.Background(), engGreedyTask(long, 4))
	if err != nil {
		t.Fatal(err)
	}
	r = engCollect(t, ch)
	var cse *ContextSizeError
	if !errors.As(r.done.Err, &cse) || !errors.Is(r.done.Err, llama.ErrNoKVSlot) {
		t.Fatalf("long prompt: %v", r.done.Err)
	}

	_, es := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 256}, ContextShift: true})
	tk = engGreedyTask(prompt, nCtx+60)
	tk.Params.IgnoreEOS = true
	r = engRun(t, es, tk)
	if r.done.Stop != StopTypeLimit || r.done.Generated != nCtx+60 || !r.done.Truncated {
		t.Fatalf("shift: %+v", r.done)
	}
	if !strings.HasPrefix(r.text, storiesGreedy) {
		t.Fatalf("shift text %q", r.text)
	}
	// Too long a prompt is truncated with context shift.
	r = engRun(t, es, engGreedyTask(long, 4))
	if !r.done.Truncated || r.done.Generated != 4 {
		t.Fatalf("long prompt with shift: %+v", r.done)
	}
}

func TestEngineEmbeddings(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 512, Pooling: llama.PoolingMean}, Parallel: 4, Embedding: true})
	texts := []string{"Once upon a time", "The cat sat on the mat", "Lily loved to play", "Once upon a time"}
	chans := make([]*Stream, len(texts))
	for i, s := range texts {
		ch, err := e.Submit(context.Background(), &Request{Kind: KindEmbedding, Prompt: engTokenize(t, m, s, true), SlotID: -1, Normalize: 2})
		if err != nil {
			t.Fatal(err)
		}
		chans[i] = ch
	}
	vecs := make([][]float32, len(texts))
	for i, ch := range chans {
		r := engCollect(t, ch)
		if r.done.Err != nil || len(r.done.Embedding) != 1 {
			t.Fatalf("%d: %+v", i, r.done)
		}
		v := r.done.Embedding[0]
		var n float64
		for _, x := range v {
			n += float64(x) * float64(x)
		}
		if math.Abs(math.Sqrt(n)-1) > 1e-4 || len(v) != m.EmbeddingSize() {
			t.Fatalf("%d: norm %v len %d", i, math.Sqrt(n), len(v))
		}
		vecs[i] = v
	}
	same := func(a, b []float32) bool {
		for i := range a {
			if math.Abs(float64(a[i]-b[i])) > 1e-4 {
				return false
			}
		}
		return true
	}
	if !same(vecs[0], vecs[3]) || same(vecs[0], vecs[1]) {
		t.Fatal("embeddings of equal texts differ or of different texts agree")
	}
	if e.Metrics().DecodeTotal >= int64(len(texts)) {
		t.Logf("decodes %d for %d inputs", e.Metrics().DecodeTotal, len(texts))
	}
	if _, err := e.Submit(context.Background(), engGreedyTask(engTokenize(t, m, "x", true), 1)); err == nil {
		t.Fatal("completion on an embedding engine")
	}

	_, en := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 512, Pooling: llama.PoolingNone}, Embedding: true})
	p := engTokenize(t, m, "Once upon a time", true)
	r := engRun(t, en, &Request{Kind: KindEmbedding, Prompt: p, PerToken: true, SlotID: -1, Normalize: 2})
	if len(r.done.Embedding) != len(p) {
		t.Fatalf("per token: %d vectors for %d tokens", len(r.done.Embedding), len(p))
	}
}

func TestEngineSlotFiles(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 512}, Parallel: 2})
	prompt := engTokenize(t, m, "Once upon a time", true)
	full := engRun(t, e, engGreedyTask(prompt, 32))

	tk := engGreedyTask(prompt, 16)
	tk.CachePrompt, tk.SlotID = true, 1
	first := engRun(t, e, tk)
	path := filepath.Join(t.TempDir(), "slot1.bin")
	n, nb, err := e.SaveSlot(1, path)
	if err != nil || n != len(prompt)+15 || nb == 0 {
		t.Fatalf("save: %d %d %v", n, nb, err)
	}
	if n, err := e.EraseSlot(1); err != nil || n != len(prompt)+15 {
		t.Fatalf("erase: %d %v", n, err)
	}
	if n, _, err := e.RestoreSlot(1, path); err != nil || n != len(prompt)+15 {
		t.Fatalf("restore: %d %v", n, err)
	}
	if _, _, err := e.SaveSlot(5, path); err == nil {
		t.Fatal("bad slot id accepted")
	}
	cont := append(append([]llama.Token(nil), prompt...), first.tokens...)
	tk2 := engGreedyTask(cont, 16)
	tk2.CachePrompt, tk2.SlotID = true, 1
	second := engRun(t, e, tk2)
	if second.done.CachedTokens != len(cont)-1 {
		t.Fatalf("cached %d of %d", second.done.CachedTokens, len(cont))
	}
	got := append(append([]llama.Token(nil), first.tokens...), second.tokens...)
	for i := range got {
		if got[i] != full.tokens[i] {
			t.Fatalf("token %d: %v vs %v", i, got, full.tokens)
		}
	}
}

func TestEngineGrammar(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 512}})
	tk := engGreedyTask(engTokenize(t, m, "Once upon a time", true), 16)
	tk.Params.Grammar = `root ::= "yes" | "no"`
	r := engRun(t, e, tk)
	if r.text != "yes" && r.text != "no" {
		t.Fatalf("grammar output %q (%+v)", r.text, r.done)
	}
	tk.Params.Temperature = 0.8
	tk.Params.Seed = 42
	r = engRun(t, e, tk)
	if r.text != "yes" && r.text != "no" {
		t.Fatalf("grammar output %q", r.text)
	}
	tk.Params.Grammar = `root ::= undefined-rule`
	ch, err := e.Submit(context.Background(), tk)
	if err != nil {
		t.Fatal(err)
	}
	if r := engCollect(t, ch); r.done.Err == nil {
		t.Fatal("bad grammar accepted")
	}
}

func TestEngineClose(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 512}, Parallel: 1})
	tk := engGreedyTask(engTokenize(t, m, "Once upon a time", true), -1)
	tk.Params.IgnoreEOS = true
	ch, err := e.Submit(context.Background(), tk)
	if err != nil {
		t.Fatal(err)
	}
	ch2, err := e.Submit(context.Background(), tk)
	if err != nil {
		t.Fatal(err)
	}
	ch.Next()
	e.Close()
	r := engCollect(t, ch)
	if !errors.Is(r.done.Err, ErrClosed) {
		t.Fatalf("running task: %v", r.done.Err)
	}
	if r := engCollect(t, ch2); !errors.Is(r.done.Err, ErrClosed) {
		t.Fatalf("queued task: %v", r.done.Err)
	}
	if _, err := e.Submit(context.Background(), tk); err == nil {
		t.Fatal("submit after close")
	}
}

func TestEngineLoRABatching(t *testing.T) {
	lora := gguftest.StoriesLoRA(t)
	m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 512}, Parallel: 2, ContextShift: true, Adapters: []AdapterSpec{{Path: lora, Scale: 0}}})
	if a := e.Adapters(); len(a) != 1 || a[0].Path != lora || a[0].Scale != 0 {
		t.Fatalf("adapters %+v", a)
	}
	prompt := engTokenize(t, m, "Once upon a time", true)
	base := engRun(t, e, engGreedyTask(prompt, 16))
	withTask := engGreedyTask(prompt, 16)
	withTask.LoRA = []LoRAScale{{ID: 0, Scale: 4}}
	alone := engRun(t, e, withTask)
	if alone.text == base.text {
		t.Fatal("the adapter at scale 4 changed nothing")
	}

	// A running base task; a LoRA task waits for it, then runs alone.
	long := engGreedyTask(prompt, 2000)
	long.Params.IgnoreEOS = true
	long.NKeep = -1
	ch1, err := e.Submit(context.Background(), long)
	if err != nil {
		t.Fatal(err)
	}
	ch1.Next()
	ch2, err := e.Submit(context.Background(), withTask)
	if err != nil {
		t.Fatal(err)
	}
	// Once the running task has made two more tokens than the slot snapshot
	// (published after each step) shows now, the loop has been through its
	// assignment with the LoRA task queued.
	k := 0
	for _, s := range e.SlotsInfo() {
		if s.IsProcessing {
			k = s.NDecoded
		}
	}
	for read := 1; read < k+2; read++ {
		ch1.Next()
	}
	if mt := e.Metrics(); mt.RequestsDeferred != 1 || mt.RequestsProcessing != 1 {
		t.Errorf("the LoRA task did not wait: %+v", mt)
	}
	r1 := engCollect(t, ch1)
	r2 := engCollect(t, ch2)
	if r1.done.Generated != 2000 || r2.text != alone.text {
		t.Fatalf("lora task %q, want %q", r2.text, alone.text)
	}
	if err := e.SetAdapterScales([]LoRAScale{{ID: 0, Scale: 4}}); err != nil {
		t.Fatal(err)
	}
	if r := engRun(t, e, engGreedyTask(prompt, 16)); r.text != alone.text {
		t.Fatalf("server-wide scale: %q", r.text)
	}
	if err := e.SetAdapterScales([]LoRAScale{{ID: 3, Scale: 1}}); err == nil {
		t.Fatal("bad adapter id accepted")
	}
	bad := engGreedyTask(prompt, 4)
	bad.LoRA = []LoRAScale{{ID: 1, Scale: 1}}
	if _, err := e.Submit(context.Background(), bad); err == nil {
		t.Fatal("bad task adapter id accepted")
	}
}

func TestEngineLazyGrammar(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 512}})
	prompt := engTokenize(t, m, "Once upon a time", true)
	tk := engGreedyTask(prompt, 24)
	// As llama.cpp, the grammar constrains the text from the trigger on
	// (the trigger included).
	tk.Params.Grammar = `root ::= "named Lily said."`
	tk.Params.GrammarLazy = true
	tk.Params.GrammarTriggers = []sampling.GrammarTrigger{{Word: "named", Token: llama.NoToken}}
	r := engRun(t, e, tk)
	want := ", there was a little girl named Lily said."
	if r.text != want || r.done.Stop != StopTypeEOS {
		t.Fatalf("lazy grammar: %q, want prefix %q", r.text, want)
	}
}

func TestEngineSamplingSeed(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 1024}, Parallel: 3})
	prompt := engTokenize(t, m, "Once upon a time", true)
	tk := engGreedyTask(prompt, 32)
	tk.Params = sampling.Defaults()
	tk.Params.Seed = 1234
	tk.Params.RepeatPenalty = 1.1
	tk.Params.DRYMultiplier = 0.5
	var wg sync.WaitGroup
	res := make([]engResult, 3)
	for i := range res {
		wg.Add(1)
		go func() { defer wg.Done(); res[i] = engRun(t, e, tk) }()
	}
	wg.Wait()
	for i := range res {
		if res[i].text != res[0].text || res[i].done.Generated == 0 {
			t.Fatalf("seeded sampling differs: %q vs %q", res[i].text, res[0].text)
		}
	}
	tk.Params.Mirostat = 2
	engRun(t, e, tk)
	tk.Params.Mirostat = 0
	tk.Params.Samplers = []string{"top_k", "typ_p", "top-p", "min_p", "xtc", "top_n_sigma", "temperature"}
	tk.Params.XTCProbability, tk.Params.TopNSigma, tk.Params.TypicalP = 0.5, 2, 0.9
	engRun(t, e, tk)
}

func TestEngineTMaxPredict(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 4096}})
	tk := engGreedyTask(engTokenize(t, m, "Once upon a time", true), 3000)
	tk.Params.IgnoreEOS = true
	tk.TMaxPredictMs = 1
	r := engRun(t, e, tk)
	if r.done.Stop != StopTypeLimit || r.done.Generated >= 3000 || !strings.Contains(r.text, "\n") {
		t.Fatalf("t_max_predict_ms: %+v", r.done)
	}
	// The largest bound is no bound: the milliseconds used to overflow
	// time.Duration, to -1 ms, which stopped at the first newline.
	tk = engGreedyTask(engTokenize(t, m, "Once upon a time", true), 300)
	tk.Params.IgnoreEOS = true
	tk.TMaxPredictMs = math.MaxInt
	r = engRun(t, e, tk)
	require.Equal(t, 300, r.done.Generated, "TMaxPredictMs MaxInt: %+v", r.done)
	require.Contains(t, r.text, "\n")
}

// TestEngineStopBounds: stop strings are matched on the loop at every
// token while every slot waits, so a request holds at most MaxStopStrings
// of at most MaxStopBytes (20,000 made a neighbour 12 times slower).
func TestEngineStopBounds(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 512}})
	for _, tc := range []struct {
		name string
		stop []string
		ok   bool
	}{
		{"the most strings", make([]string, MaxStopStrings), true},
		{"one string too many", make([]string, MaxStopStrings+1), false},
		{"the longest string", []string{strings.Repeat("x", MaxStopBytes)}, true},
		{"a string too long", []string{strings.Repeat("x", MaxStopBytes+1)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tk := engGreedyTask(engTokenize(t, m, "Once upon a time", true), 4)
			tk.Stop = tc.stop
			st, err := e.Submit(context.Background(), tk)
			if !tc.ok {
				require.ErrorIs(t, err, llama.ErrInvalid)
				return
			}
			require.NoError(t, err)
			for _, err := range st.All() {
				require.NoError(t, err)
			}
		})
	}
}

func TestEngineSlotsInfo(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 512}, Parallel: 2})
	info := e.SlotsInfo()
	if len(info) != 2 || info[0].NCtx != 256 || info[1].ID != 1 || info[0].IsProcessing {
		t.Fatalf("idle slots %+v", info)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tk := engGreedyTask(engTokenize(t, m, "Once upon a time", true), -1)
	tk.Params.IgnoreEOS, tk.NKeep = true, -1
	ch, err := e.Submit(ctx, tk)
	if err != nil {
		t.Fatal(err)
	}
	ch.Next()
	ch.Next()
	busy := 0
	for _, s := range e.SlotsInfo() {
		if s.IsProcessing {
			busy++
			if s.Prompt != "Once upon a time" && s.Prompt != " Once upon a time" {
				t.Errorf("prompt %q", s.Prompt)
			}
			if s.TaskID == 0 || s.NPast == 0 {
				t.Errorf("slot %+v", s)
			}
		}
	}
	if busy != 1 || e.Metrics().RequestsProcessing != 1 {
		t.Fatalf("busy %d, metrics %+v", busy, e.Metrics())
	}
	cancel()
	for ch.Next() {
	}
	// The loop frees a cancelled task's slot (reap) before it assigns the
	// next task, and a task's slot is freed before its last event: once a
	// task submitted now is done, no slot is busy.
	engRun(t, e, engGreedyTask(engTokenize(t, m, "Once upon a time", true), 2))
	if n := e.Metrics().RequestsProcessing; n != 0 {
		t.Fatalf("slot not freed after cancel: %d processing", n)
	}
}

func TestEngineTextHelpers(t *testing.T) {
	stops := []string{"Lily", "\n\n"}
	for _, c := range []struct {
		in string
		n  int
	}{{"a girl L", 7}, {"a girl Li", 7}, {"a girl", 6}, {"x\n", 1}, {"ly", 2}} {
		if n := engSafeStopPrefix([]byte(c.in), stops); n != c.n {
			t.Errorf("safeStopPrefix(%q) = %d, want %d", c.in, n, c.n)
		}
	}
	if i, w := engFindStop([]byte("a\n\nLily"), stops); i != 1 || w != "\n\n" {
		t.Errorf("findStop = %d %q", i, w)
	}
}

// A grammar that is complete allows only end-of-generation tokens: with
// ignore_eos the task must end (not abort the process on a rejected token).
func TestEngineGrammarIgnoreEOS(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 512}})
	tk := engGreedyTask(engTokenize(t, m, "Once upon a time", true), 8)
	tk.Params.Grammar = `root ::= "yes" | "no"`
	tk.Params.IgnoreEOS = true
	tk.Params.RepeatPenalty = 1.2
	for _, temp := range []float32{0, 0.8} {
		tk.Params.Temperature = temp
		r := engRun(t, e, tk)
		if (r.text != "yes" && r.text != "no") || r.done.Stop != StopTypeEOS {
			t.Fatalf("temp %v: %q %+v", temp, r.text, r.done)
		}
	}
}

// engMove is one reused chunk: n cached tokens moved from position from
// to position to.
type engMove struct{ from, to, n int }

// engReuseReference replays llama.cpp's cache reuse by hand on a fresh
// context with the engine's settings: decode cached, apply the moves
// (drop the cached tokens before each chunk, shift the chunk back), drop
// everything from kept on, decode the rest of prompt and generate nGen
// tokens greedily.
func engReuseReference(t *testing.T, m *llama.Model, cached, prompt []llama.Token, moves []engMove, kept, nGen int) []llama.Token {
	t.Helper()
	lctx := modeltest.NewContext(t, m, llama.ContextOptions{ContextSize: 512, BatchSize: 2048, UBatchSize: 512, Sequences: 1, Threads: 1})
	b := llama.NewBatch(2048, 1)
	decode := func(toks []llama.Token, pos int) llama.Token {
		b.Clear()
		require.NoError(t, b.AddSequence(toks, pos, 0, true))
		require.NoError(t, lctx.Decode(context.Background(), b))
		logits, err := lctx.Logits(len(toks) - 1)
		require.NoError(t, err)
		best := 0
		for i, l := range logits {
			if l > logits[best] {
				best = i
			}
		}
		return llama.Token(best)
	}
	decode(cached, 0)
	for _, mv := range moves {
		ok, err := lctx.Memory().Remove(0, mv.to, mv.from)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, lctx.Memory().Shift(0, mv.from, mv.from+mv.n, mv.to-mv.from))
	}
	ok, err := lctx.Memory().Remove(0, kept, -1)
	require.NoError(t, err)
	require.True(t, ok)
	var out []llama.Token
	next := decode(prompt[kept:], kept)
	for pos := len(prompt); len(out) < nGen; pos++ {
		out = append(out, next)
		if len(out) < nGen {
			next = decode([]llama.Token{next}, pos)
		}
	}
	return out
}

// TestEngineCacheReuse checks llama.cpp's --cache-reuse: after the common
// prefix, runs of at least CacheReuse cached tokens that the new prompt
// continues with are shifted into place instead of decoded again. The
// output must be that of llama.cpp's procedure replayed by hand; whether
// it also equals decoding the prompt afresh depends on the case: the moved
// entries were computed after the dropped tokens, which they keep "seeing"
// (RoPE shifting itself is exact enough on stories260K).
func TestEngineCacheReuse(t *testing.T) {
	m := engStoriesModel(t)
	tok := func(s string) []llama.Token { return engTokenize(t, m, s, false) }
	cat := func(parts ...[]llama.Token) []llama.Token {
		var out []llama.Token
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	// The parts start with different tokens (SentencePiece adds the space).
	P := engTokenize(t, m, "Once upon a time, there was a little girl named Lily.", true)
	A := tok("She had a big red ball that she liked to throw very high.")
	S := tok("One day, Lily went to the park with her mom. The sun was warm and the birds sang.")
	B := tok("Her dog Max ran after a cat.")
	S2 := tok("They sat under a tree and ate apples.")
	T := tok("Then Lily said,")
	require.GreaterOrEqual(t, len(S), 16)
	require.GreaterOrEqual(t, len(S2), 8)
	p, a, sl, bl, s2 := len(P), len(A), len(S), len(B), len(S2)

	tests := []struct {
		name        string
		reuse       int
		cachePrompt bool
		cached      []llama.Token // the first task's prompt
		prompt      []llama.Token // the second task's
		wantCached  int
		moves       []engMove // llama.cpp's shifts
		// exact: the output also equals a run without any cache.
		exact bool
	}{
		{"piece dropped: suffix shifted back", 4, true,
			cat(P, A, S), cat(P, S, T), p + sl,
			[]engMove{{p + a, p, sl}}, true},
		// Here the moved entries' memory of the dropped pieces changes
		// the greedy continuation after its first token.
		{"two pieces dropped: both chunks shifted", 4, true,
			cat(P, A, S, B, S2), cat(P, S, S2, T), p + sl + s2,
			[]engMove{{p + a, p, sl}, {p + a + sl + bl, p + sl, s2}}, false},
		{"whole prompt reused: last token decoded again", 4, true,
			cat(P, A, S), cat(P, S), p + sl - 1,
			[]engMove{{p + a, p, sl}}, true},
		{"chunk shorter than CacheReuse", sl + 1, true,
			cat(P, A, S), cat(P, S, T), p, nil, true},
		// llama.cpp only moves cached entries back: a piece inserted in the
		// new prompt ends the reuse at the common prefix.
		{"piece inserted in the new prompt", 4, true,
			cat(P, S), cat(P, A, S, T), p, nil, true},
		{"CacheReuse off", 0, true,
			cat(P, A, S), cat(P, S, T), p, nil, true},
		{"CachePrompt off", 4, false,
			cat(P, A, S), cat(P, S, T), 0, nil, true},
	}
	const nGen = 8
	_, fresh := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 512}})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 512}, CacheReuse: tc.reuse})
			first := engGreedyTask(tc.cached, 4)
			first.CachePrompt = true
			engRun(t, e, first)
			second := engGreedyTask(tc.prompt, nGen)
			second.CachePrompt = tc.cachePrompt
			got := engRun(t, e, second)
			assert.Equal(t, tc.wantCached, got.done.CachedTokens)
			assert.Equal(t, tc.wantCached, got.done.Timings.CacheN)
			assert.Equal(t, len(tc.prompt)-tc.wantCached, got.done.Timings.PromptN)

			want := engReuseReference(t, m, tc.cached, tc.prompt, tc.moves, tc.wantCached, nGen)
			assert.Equal(t, want, got.tokens, "llama.cpp's cache reuse replayed by hand")
			if tc.exact {
				plain := engRun(t, fresh, engGreedyTask(tc.prompt, nGen))
				assert.Equal(t, plain.tokens, got.tokens, "decoding the prompt afresh")
			}

			// The slot's memory now holds the second prompt and its output
			// at consecutive positions: the same task again reuses it all.
			again := engRun(t, e, second)
			if tc.cachePrompt {
				assert.Equal(t, len(tc.prompt)-1, again.done.CachedTokens)
			}
			assert.Equal(t, got.tokens, again.tokens)
		})
	}
}

// TestEngineThreads checks that the context gets Threads for single-token
// decodes and ThreadsBatch (default: Threads) for larger batches.
func TestEngineThreads(t *testing.T) {
	tests := []struct {
		name                  string
		threads, threadsBatch int
		wantN, wantBatch      int
	}{
		{"both set", 1, 2, 1, 2},
		{"batch defaults to threads", 2, 0, 2, 2},
		{"fewer for batches", 2, 1, 2, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 256, Threads: tc.threads, ThreadsBatch: tc.threadsBatch}})
			// The loop may hold the context (idling it) at the moment
			// Threads asks, which then answers 0, 0: ask again.
			var n, nb int
			require.Eventually(t, func() bool { n, nb = e.lctx.Threads(); return n != 0 }, time.Minute, time.Millisecond)
			assert.Equal(t, tc.wantN, n)
			assert.Equal(t, tc.wantBatch, nb)
		})
	}
}

// TestStreamOutbox checks the event queue between the loop and a Stream:
// events arrive in order whether the reader keeps up or lags, a reader
// that leaves (cancels) stops reading, pushes after the last are dropped,
// and no goroutine is involved.
func TestStreamOutbox(t *testing.T) {
	const n = 200
	tests := []struct {
		name       string
		startAfter int // the reader starts once this many events are pushed (a backlog)
		leaveAt    int // the reader cancels after this many events (-1: never)
	}{
		{"reader keeps up", 0, -1},
		{"reader lags: backlog", 100, -1},
		{"reader leaves", 0, 50},
		{"reader lags and leaves", 100, 50},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ob := newOutbox()
			st := &Stream{ctx: ctx, cancel: cancel, ob: ob}
			start := make(chan struct{})
			got := make(chan []int, 1)
			go func() {
				<-start
				var seen []int
				for st.Next() {
					seen = append(seen, st.Event().Generated)
					if len(seen) == tc.leaveAt {
						st.Close()
					}
				}
				got <- seen
			}()
			for i := 0; i < n; i++ {
				if i == tc.startAfter {
					close(start)
				}
				ob.push(&Event{Generated: i}, false)
			}
			ob.push(&Event{Generated: n, Done: true}, true)
			ob.push(&Event{Generated: n + 1}, false) // after the last: dropped
			seen := <-got
			if tc.leaveAt < 0 {
				require.Len(t, seen, n+1)
				require.NoError(t, st.Err())
			} else {
				require.GreaterOrEqual(t, len(seen), tc.leaveAt)
				require.Less(t, len(seen), n+1, "a reader that closed stops before the end")
			}
			for i, g := range seen {
				require.Equal(t, i, g, "events in order")
			}
		})
	}
}

// TestEngineSampleThreads: with the slots of a step sampled at once
// (SampleThreads), seeded requests sharing the steps give the tokens they
// give sampled one after another, a grammar's slot among them.
func TestEngineSampleThreads(t *testing.T) {
	run := func(threads int) ([]string, int) {
		m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 4 * 256}, Parallel: 4, SampleThreads: threads})
		prompt := engTokenize(t, m, "Once upon a time", true)
		texts := make([]string, 4)
		var wg sync.WaitGroup
		// All four are announced and queued before any is read, so that
		// they share their steps however late the readers start on a
		// loaded machine.
		arrived := e.Expect()
		for i := range texts {
			tk := engGreedyTask(prompt, 24)
			tk.Params = sampling.Defaults()
			tk.Params.Seed = uint32(10 + i)
			tk.Params.IgnoreEOS = true
			if i == 3 {
				tk.Params.Grammar = `root ::= [a-z ]+`
			}
			st, err := e.Submit(context.Background(), tk)
			require.NoError(t, err)
			wg.Go(func() { texts[i] = engCollect(t, st).text })
		}
		arrived()
		wg.Wait()
		var n int
		if err := e.do(func() { n = e.presampled }); err != nil {
			t.Fatal(err)
		}
		return texts, n
	}
	want, n := run(1)
	require.Zero(t, n)
	for _, threads := range []int{2, -1} {
		got, n := run(threads)
		assert.Equal(t, want, got, "SampleThreads %d", threads)
		assert.Positive(t, n, "SampleThreads %d: no step was sampled at once", threads)
	}
}

// An unset context is the training context for each slot, lowered (with a
// warning) when the memory is short, as llama-server's --fit.
func TestContextFit(t *testing.T) {
	for _, tt := range []struct {
		name    string
		fit     llama.FitOptions
		unified bool
		slotCtx int
		lowered bool
	}{
		{"the training context for each slot", llama.FitOptions{}, false, 2048, false},
		{"one buffer of it, shared", llama.FitOptions{}, true, 2048, false},
		{"no memory left: the minimum", llama.FitOptions{Margin: 1 << 62, MinContext: 512}, false, 512, true},
		{"fit off", llama.FitOptions{Off: true, Margin: 1 << 62}, false, 2048, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var logs testenv.Buffer
			_, e := newEngTestEngine(t, Options{Parallel: 2, Context: llama.ContextOptions{KVUnified: tt.unified, Fit: tt.fit},
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			assert.Equal(t, tt.slotCtx, e.SlotContext())
			if tt.lowered {
				assert.Contains(t, logs.String(), "context size lowered from 4096 (the training context for each KV stream) to 1024")
			} else {
				assert.NotContains(t, logs.String(), "lowered")
			}
		})
	}
}

// The warm-up decodes once before the first request and leaves the memory
// empty: the same tokens come out, with and without it, and the draft
// model is warmed up too.
func TestWarmup(t *testing.T) {
	var texts []string
	for _, noWarmup := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoWarmup %v", noWarmup), func(t *testing.T) {
			m, e := newEngTestEngine(t, Options{NoWarmup: noWarmup, Parallel: 2, Context: llama.ContextOptions{Perf: true},
				Speculative: SpeculativeOptions{Types: []string{SpecDraftSimple}, DraftModel: engModelPath(t), DraftModelOptions: llama.ModelOptions{}}})
			// On the loop's goroutine: the contexts are the engine's, and
			// an idle loop may be using them.
			var p llama.Perf
			var perr error
			require.NoError(t, e.do(func() {
				for _, c := range []*llama.Context{e.lctx, e.spec.draftC} {
					for seq := range 2 {
						lo, hi, err := c.Memory().PosRange(seq)
						assert.NoError(t, err)
						assert.Equal(t, -1, hi, "sequence %d holds positions %d to %d", seq, lo, hi)
					}
				}
				p, perr = e.lctx.Perf()
			}))
			require.NoError(t, perr)
			// llama.cpp reports at least 1; the warm-up is a batch of 2,
			// stories260K's BOS and EOS.
			if noWarmup {
				assert.Equal(t, 1, p.PromptTokens)
			} else {
				assert.Equal(t, 2, p.PromptTokens, "the warm-up's batch")
			}
			res := engRun(t, e, engGreedyTask(engTokenize(t, m, "Once upon a time", true), 24))
			texts = append(texts, res.text)
		})
	}
	require.Len(t, texts, 2)
	assert.Equal(t, texts[0], texts[1])
	assert.NotEmpty(t, texts[0])
}

// An embedding engine is warmed up too, and its first embedding is the
// one it gives without the warm-up.
func TestWarmupEmbedding(t *testing.T) {
	var vecs [][]float32
	for _, noWarmup := range []bool{false, true} {
		m, e := newEngTestEngine(t, Options{NoWarmup: noWarmup, Embedding: true,
			Context: llama.ContextOptions{ContextSize: 512, Pooling: llama.PoolingMean, Perf: true}})
		var p llama.Perf
		var perr error
		require.NoError(t, e.do(func() { p, perr = e.lctx.Perf() }))
		require.NoError(t, perr)
		if noWarmup {
			assert.Equal(t, 1, p.PromptTokens, "llama.cpp's floor")
		} else {
			assert.Equal(t, 2, p.PromptTokens, "the warm-up's batch")
		}
		ch, err := e.Submit(context.Background(), &Request{Kind: KindEmbedding, Prompt: engTokenize(t, m, "Once upon a time", true), SlotID: -1, Normalize: 2})
		require.NoError(t, err)
		r := engCollect(t, ch)
		require.NoError(t, r.done.Err)
		require.Len(t, r.done.Embedding, 1)
		vecs = append(vecs, r.done.Embedding[0])
	}
	assert.InDeltaSlice(t, vecs[0], vecs[1], 1e-5)
}

// TestEngineSlotSimilarity: a CachePrompt request takes the slot whose
// cache holds more than SlotSimilarity of its prompt, else the least
// recently used slot, as llama-server's --slot-prompt-similarity; a
// negative similarity always takes the least recently used.
func TestEngineSlotSimilarity(t *testing.T) {
	const a = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends every day."
	const b = "The big brown dog ran to the tree and sat down under it, because the sun was hot and the dog was very tired after the game."
	for _, tt := range []struct {
		name     string
		sim      float64
		shareOfB int // words of b the third prompt starts with
		wantSlot int
	}{
		{"a few common tokens: the older slot", 0, 1, 0},
		{"half the prompt: the slot holding it", 0, 13, 1},
		{"a few common tokens over a low similarity", 0.05, 1, 1},
		{"off: the older slot even for half the prompt", -1, 13, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 1024}, Parallel: 2, SlotSimilarity: tt.sim})
			run := func(text string) int {
				tk := engGreedyTask(engTokenize(t, m, text, true), 4)
				tk.CachePrompt = true
				return engRun(t, e, tk).done.SlotID
			}
			require.Equal(t, 0, run(a))
			require.Equal(t, 1, run(b), "a prompt sharing nothing takes the unused slot")
			words := strings.Fields(b)
			third := strings.Join(words[:tt.shareOfB], " ") + " and then a cat came by to look for some fish in the old river."
			assert.Equal(t, tt.wantSlot, run(third))
		})
	}
}

// TestEngineSharedMemoryFull: when the KV memory the slots share fills,
// the request whose end needs the most of it is preempted: its memory is
// given up, the others go on to their end, and it is decoded again and
// ends with the tokens it has alone. Where its memory cannot be rebuilt
// (speculative decoding), it ends with an error instead and the others
// go on.
func TestEngineSharedMemoryFull(t *testing.T) {
	for _, tt := range []struct {
		name    string
		spec    SpeculativeOptions
		preempt bool
	}{
		{"preempted", SpeculativeOptions{}, true},
		{"speculative: the largest fails", SpeculativeOptions{Types: []string{"ngram-simple"}}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, e := newEngTestEngine(t, Options{Parallel: 3, Context: llama.ContextOptions{ContextSize: 256, KVUnified: true}, Speculative: tt.spec})
			prompt := engTokenize(t, m, "Once upon a time", true)
			task := func(n int) *Request {
				tk := engGreedyTask(prompt, n)
				tk.Params.IgnoreEOS = true
				return tk
			}
			alone := engRun(t, e, task(200))
			require.NoError(t, alone.done.Err)

			var tasks []*Request
			for _, n := range []int{200, 120, 120} { // 3 × 85 cells fill 256 before the short ones end
				tasks = append(tasks, task(n))
			}
			results := make([]engResult, len(tasks))
			var wg sync.WaitGroup
			release := engHold(t, e)
			for i, tk := range tasks {
				st, err := e.Submit(context.Background(), tk)
				require.NoError(t, err)
				wg.Go(func() { results[i] = engCollect(t, st) })
			}
			release()
			wg.Wait()
			for i, n := range []int{120, 120} {
				require.NoError(t, results[i+1].done.Err, "request %d", i+1)
				assert.Equal(t, n, results[i+1].done.Generated)
			}
			if tt.preempt {
				require.NoError(t, results[0].done.Err)
				assert.Equal(t, alone.tokens, results[0].tokens, "decoded again, it goes on as alone")
				assert.Equal(t, 200, results[0].done.Generated)
				assert.Positive(t, e.Metrics().PreemptionsTotal)
			} else {
				require.Error(t, results[0].done.Err)
				assert.Contains(t, results[0].done.Err.Error(), "context size has been exceeded")
				assert.Zero(t, e.Metrics().PreemptionsTotal)
			}
			// The engine goes on: a new request is served in full.
			r := engRun(t, e, engGreedyTask(prompt, 16))
			assert.Equal(t, 16, r.done.Generated)
		})
	}
}

// TestEnginePromptProbs: the probabilities of a prompt's tokens are those
// generation gives the same tokens, whole or in chunks of a small batch,
// with the prompt cache warm or not; they come once, after the prompt.
func TestEnginePromptProbs(t *testing.T) {
	for _, batch := range []int{0, 5} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) {
			m, e := newEngTestEngine(t, Options{Parallel: 1, Context: llama.ContextOptions{ContextSize: 512, BatchSize: batch}})
			prompt := engTokenize(t, m, "Once upon a time", true)
			gen := engGreedyTask(prompt, 8)
			gen.Params.NProbs = 3
			want := engRun(t, e, gen)
			require.Len(t, want.tokens, 8)

			// The prompt and seven of its generated tokens, as a prompt.
			long := append(slices.Clone(prompt), want.tokens[:7]...)
			for _, n := range []int{1, 0} {
				tk := engGreedyTask(long, n)
				tk.Params.NProbs, tk.PromptProbs, tk.CachePrompt = 3, true, true
				r := engRun(t, e, tk)
				assert.Zero(t, r.done.CachedTokens, "the whole prompt is decoded")
				var got []PromptProb
				for _, ev := range append(r.events, r.done) {
					if ev.PromptProbs != nil {
						require.Nil(t, got, "sent once")
						got = ev.PromptProbs
					}
				}
				require.Len(t, got, len(long)-1)
				for i, pp := range got {
					assert.Equal(t, long[i+1], pp.Token.Token, "position %d", i+1)
					assert.InDelta(t, math.Exp(float64(pp.Token.Logprob)), pp.Token.Prob, 1e-4)
					require.Len(t, pp.Top, 3)
					assert.GreaterOrEqual(t, pp.Top[0].Logprob, pp.Token.Logprob)
				}
				// Where the prompt is the generated text, its probabilities
				// are generation's (batched logits differ in the last digits).
				for k := range 7 {
					pp, ev := got[len(prompt)-1+k], want.events[k]
					assert.Equal(t, ev.Token, pp.Token.Token)
					assert.InDelta(t, ev.Sampled.Logprob, pp.Token.Logprob, 1e-3, "generated token %d", k)
					assert.Equal(t, ev.Probs[0].Token, pp.Top[0].Token, "generated token %d", k)
				}
				if n == 1 {
					assert.Equal(t, want.tokens[7], r.tokens[0], "then generation goes on as before")
				}
			}
			// A request after it, without them, gets none.
			r := engRun(t, e, engGreedyTask(prompt, 2))
			for _, ev := range append(r.events, r.done) {
				assert.Nil(t, ev.PromptProbs)
			}
		})
	}
}

// Post-sampling probabilities come from the chain's output: the survivors
// of its filters with the probabilities it drew from, and sampling reads
// them without changing what it picks (a seeded run writes the same).
func TestEnginePostSamplingProbs(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 512}, SampleThreads: 2, Parallel: 2})
	prompt := engTokenize(t, m, "Once upon a time", true)
	seeded := func(topK int, grammar string) *Request {
		tk := engGreedyTask(prompt, 12)
		tk.Params.Temperature, tk.Params.TopK, tk.Params.Seed, tk.Params.Grammar = 1, topK, 42, grammar
		return tk
	}
	tests := []struct {
		name    string
		topK    int
		nProbs  int
		grammar string
		greedy  bool
	}{
		{name: "top-k", topK: 5, nProbs: 8},
		{name: "top-k, fewer asked", topK: 5, nProbs: 2},
		{name: "whole row, sorted", topK: 0, nProbs: 100},
		{name: "grammar", topK: 20, nProbs: 8, grammar: `root ::= [a-z ,.]+`},
		{name: "greedy", nProbs: 3, greedy: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plain := seeded(tc.topK, tc.grammar)
			post := seeded(tc.topK, tc.grammar)
			if tc.greedy {
				plain, post = engGreedyTask(prompt, 12), engGreedyTask(prompt, 12)
			}
			post.Params.NProbs, post.PostSamplingProbs = tc.nProbs, true
			// Two at once: the plain one may be sampled in parallel.
			stA, err := e.Submit(context.Background(), plain)
			require.NoError(t, err)
			stB, err := e.Submit(context.Background(), post)
			require.NoError(t, err)
			a, b := engCollect(t, stA), engCollect(t, stB)
			require.NoError(t, a.done.Err)
			require.NoError(t, b.done.Err)
			assert.Equal(t, a.tokens, b.tokens, "reading the chain's output changed the sampling")
			for _, ev := range b.events {
				require.NotNil(t, ev.Sampled)
				assert.Equal(t, ev.Token, ev.Sampled.Token)
				if tc.greedy {
					assert.Equal(t, []TokenProb{{Token: ev.Token, Text: ev.Sampled.Text, Prob: 1, Logprob: 0}}, ev.Probs)
					continue
				}
				require.NotEmpty(t, ev.Probs)
				assert.LessOrEqual(t, len(ev.Probs), tc.nProbs)
				if tc.topK > 0 {
					assert.LessOrEqual(t, len(ev.Probs), tc.topK)
				}
				sum, own := 0.0, float32(0)
				for i, p := range ev.Probs {
					assert.Greater(t, p.Prob, float32(0))
					assert.InDelta(t, math.Log(float64(p.Prob)), p.Logprob, 1e-4)
					if i > 0 {
						assert.LessOrEqual(t, p.Prob, ev.Probs[i-1].Prob, "not sorted")
					}
					if p.Token == ev.Token {
						own = p.Prob
					}
					sum += float64(p.Prob)
				}
				assert.Greater(t, ev.Sampled.Prob, float32(0))
				if own != 0 {
					assert.Equal(t, own, ev.Sampled.Prob)
				}
				if len(ev.Probs) < tc.nProbs {
					assert.InDelta(t, 1, sum, 1e-3, "fewer than asked, yet not all the chain kept")
				}
			}
		})
	}
}
