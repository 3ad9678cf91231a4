package llama_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
)

// abortChildEnv names the case a child process of TestSamplerChainsNeverAbort runs.
const abortChildEnv = "LLAMA_TEST_SAMPLER_ABORT_CHILD"

// filterSampler is a Custom sampler that only filters (it lowers one logit).
type filterSampler struct{}

func (filterSampler) Name() string               { return "filter" }
func (filterSampler) Apply(c *llama.Candidates)  { c.Data()[0].Logit -= 1 }
func (filterSampler) Accept(llama.Token)         {}
func (filterSampler) Reset()                     {}
func (filterSampler) Clone() llama.CustomSampler { return filterSampler{} }

// selectSampler is a Custom SelectingSampler: the greedy choice, or, with
// broken set, no choice at all (against its declaration).
type selectSampler struct{ broken bool }

func (selectSampler) Name() string                 { return "select" }
func (selectSampler) Selects() bool                { return true }
func (selectSampler) Accept(llama.Token)           {}
func (selectSampler) Reset()                       {}
func (s selectSampler) Clone() llama.CustomSampler { return s }
func (s selectSampler) Apply(c *llama.Candidates) {
	if s.broken {
		return
	}
	best := 0
	for i, td := range c.Data() {
		if td.Logit > c.Data()[best].Logit {
			best = i
		}
	}
	c.Select(best)
}

// wildSampler is a Custom sampler that leaves what llama.cpp cannot take:
// a token id outside the vocabulary, or (empty) no candidate at all.
type wildSampler struct{ empty bool }

func (wildSampler) Name() string       { return "wild" }
func (wildSampler) Accept(llama.Token) {}
func (wildSampler) Reset()             {}
func (w wildSampler) Apply(c *llama.Candidates) {
	if w.empty {
		c.Truncate(0)
		return
	}
	c.Data()[0].ID = 1 << 30
	c.Data()[0].Logit = 1e30
}

// abortCases are the chains TestSamplerChainsNeverAbort drives: every
// sampler constructor alone, each prefix of llama-server's default order,
// and Custom samplers that break their contract. selects says whether
// NewSamplerChain accepts the chain without SamplerChainOptions.Filter;
// fails, that sampling with an accepted chain returns an error; backend,
// that the chain can also run on the backend.
func abortCases(t *testing.T) []abortCase {
	g := mustGrammar(t, `root ::= [a-z ]+`)
	cases := []abortCase{
		{name: "empty"},
		{name: "greedy", ss: []llama.Sampler{llama.Greedy()}, selects: true},
		{name: "dist", ss: []llama.Sampler{llama.Dist(1)}, selects: true},
		{name: "top-k", ss: []llama.Sampler{llama.TopK(40)}},
		{name: "top-k 0", ss: []llama.Sampler{llama.TopK(0)}},
		{name: "top-p", ss: []llama.Sampler{llama.TopP(0.9, 1)}},
		{name: "min-p", ss: []llama.Sampler{llama.MinP(0.05, 1)}},
		{name: "typical", ss: []llama.Sampler{llama.Typical(0.9, 1)}},
		{name: "temp", ss: []llama.Sampler{llama.Temp(0.8)}},
		{name: "temp 0", ss: []llama.Sampler{llama.Temp(0)}},
		{name: "temp-ext", ss: []llama.Sampler{llama.TempExt(0.8, 0.2, 1)}},
		{name: "xtc", ss: []llama.Sampler{llama.XTC(0.5, 0.1, 1, 1)}},
		{name: "top-n-sigma", ss: []llama.Sampler{llama.TopNSigma(1)}},
		{name: "mirostat", ss: []llama.Sampler{llama.Mirostat(5, 0.1, 100, 1)}, selects: true},
		{name: "mirostat-v2", ss: []llama.Sampler{llama.MirostatV2(5, 0.1, 1)}, selects: true},
		{name: "penalties", ss: []llama.Sampler{llama.Penalties(64, 1.1, 0.1, 0.1)}},
		{name: "dry", ss: []llama.Sampler{llama.DRY(0.8, 1.75, 2, 64, nil)}},
		{name: "adaptive-p", ss: []llama.Sampler{llama.AdaptiveP(0.5, 0.9, 1)}, selects: true},
		{name: "adaptive-p off", ss: []llama.Sampler{llama.AdaptiveP(-1, 0.9, 1)}, selects: true},
		{name: "logit-bias", ss: []llama.Sampler{llama.LogitBias(map[llama.Token]float32{5: -1})}},
		{name: "infill", ss: []llama.Sampler{llama.Infill()}},
		{name: "grammar", ss: []llama.Sampler{g.Sampler()}},
		{name: "grammar-lazy", ss: []llama.Sampler{g.LazySampler([]string{"the"}, nil)}},
		{name: "custom filter", ss: []llama.Sampler{llama.Custom(filterSampler{})}},
		{name: "custom select", ss: []llama.Sampler{llama.Custom(selectSampler{})}, selects: true},
		{name: "custom select broken", ss: []llama.Sampler{llama.Custom(selectSampler{broken: true})}, selects: true, fails: true},
		{name: "custom bad id then greedy", ss: []llama.Sampler{llama.Custom(wildSampler{}), llama.Greedy()}, selects: true, fails: true},
		{name: "custom bad id then mirostat", ss: []llama.Sampler{llama.Custom(wildSampler{}), llama.Mirostat(5, 0.1, 100, 1)}, selects: true, fails: true},
		{name: "custom empty then dist", ss: []llama.Sampler{llama.Custom(wildSampler{empty: true}), llama.TopP(0.9, 1), llama.Dist(1)}, selects: true},
		{name: "grammar then greedy", ss: []llama.Sampler{g.Sampler(), llama.Greedy()}, selects: true},
		{name: "infill then greedy", ss: []llama.Sampler{llama.Infill(), llama.Greedy()}, selects: true},
		{name: "greedy then top-k", ss: []llama.Sampler{llama.Greedy(), llama.TopK(1)}},
		// Chains the backend can run (SetSampler).
		{name: "backend random", ss: []llama.Sampler{llama.Penalties(64, 1.1, 0, 0), llama.LogitBias(map[llama.Token]float32{2: -1}),
			llama.TopK(40), llama.TopP(0.95, 1), llama.MinP(0.05, 1), llama.TempExt(0.8, 0, 1), llama.Dist(1)}, selects: true, backend: true},
		{name: "backend greedy", ss: []llama.Sampler{llama.TopK(40), llama.Temp(0), llama.Greedy()}, selects: true, backend: true},
		{name: "backend filter", ss: []llama.Sampler{llama.TopK(40), llama.TopP(0.95, 1), llama.Temp(0.8)}},
	}
	// llama-server's default order, each prefix (the last is its chain).
	order := []llama.Sampler{
		llama.Penalties(64, 1, 0, 0), llama.DRY(0, 1.75, 2, -1, nil), llama.TopNSigma(-1), llama.TopK(40),
		llama.Typical(1, 1), llama.TopP(0.95, 1), llama.MinP(0.05, 1), llama.XTC(0, 0.1, 1, 1), llama.TempExt(0.8, 0, 1),
		llama.Dist(1),
	}
	for n := 1; n <= len(order); n++ {
		cases = append(cases, abortCase{name: fmt.Sprintf("server order %d", n), ss: order[:n], selects: n == len(order)})
	}
	return cases
}

type abortCase struct {
	name    string
	ss      []llama.Sampler
	selects bool
	fails   bool
	backend bool // runs on the backend too (SetSampler)
}

// TestSamplerChainsNeverAbort runs each chain of abortCases in a child
// process (a llama.cpp assertion aborts the whole process, which a test in
// process could not survive) through what a caller can do with it: build
// it, Sample, Propose, Generate, Apply, Clone, and attach it to a sequence
// (SetSampler). The child must exit normally, every call having returned
// a token or an error.
func TestSamplerChainsNeverAbort(t *testing.T) {
	if name := os.Getenv(abortChildEnv); name != "" {
		for _, tc := range abortCases(t) {
			if tc.name == name {
				driveChain(t, tc)
				fmt.Println("child done:", name)
				return
			}
		}
		t.Fatalf("no case %q", name)
	}
	for _, tc := range abortCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestSamplerChainsNeverAbort$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), abortChildEnv+"="+tc.name)
			out, err := cmd.CombinedOutput()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
				require.False(t, ws.Signaled(), "the child died of %v:\n%s", ws.Signal(), out)
			}
			// Go's runtime turns llama.cpp's abort (SIGABRT) into exit
			// status 2 after printing the assertion.
			require.NotContains(t, string(out), "GGML_ASSERT", "llama.cpp aborted the child")
			require.NoError(t, err, "%s", out)
			assert.Contains(t, string(out), "child done: "+tc.name)
		})
	}
}

// driveChain runs, in the child, every use of tc's chain.
func driveChain(t *testing.T, tc abortCase) {
	m := stories(t)
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 256, Sequences: 2})
	toks, err := m.Tokenize("Once upon a time", llama.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	b := llama.NewBatch(64, 1)
	require.NoError(t, b.AddSequence(toks, 0, 0, true))
	require.NoError(t, c.Decode(context.Background(), b))
	last := b.Len() - 1

	chain, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, tc.ss...)
	if !tc.selects {
		require.ErrorIs(t, err, llama.ErrInvalid)
		assert.Contains(t, err.Error(), "end the chain with llama.Dist(seed) or llama.Greedy()")
		// As a filter, the chain applies but never samples.
		chain, err = llama.NewSamplerChain(m, llama.SamplerChainOptions{Filter: true}, tc.ss...)
		require.NoError(t, err)
		defer chain.Close()
		assert.False(t, chain.Selects())
		_, err = chain.Sample(c, last)
		assert.ErrorIs(t, err, llama.ErrInvalid, "Sample")
		_, err = chain.Propose(c, last)
		assert.ErrorIs(t, err, llama.ErrInvalid, "Propose")
		jobs := []llama.SampleJob{{Chain: chain, Index: last}}
		require.NoError(t, c.SampleParallel(jobs, 1))
		assert.ErrorIs(t, jobs[0].Err, llama.ErrInvalid, "SampleParallel")
		for _, err := range c.Generate(context.Background(), "Once", llama.GenerateOptions{MaxTokens: 4, Sampler: chain}).Seq() {
			assert.ErrorIs(t, err, llama.ErrInvalid, "Generate")
		}
		assert.False(t, chain.Offloadable())
		assert.Error(t, c.SetSampler(1, chain))
		cands := make([]llama.TokenData, m.VocabSize())
		for i := range cands {
			cands[i] = llama.TokenData{ID: llama.Token(i), Logit: float32(i % 7)}
		}
		out, _, err := chain.Apply(cands)
		if err == nil {
			assert.NotEmpty(t, out)
		}
		return
	}
	require.NoError(t, err)
	defer chain.Close()
	require.True(t, chain.Selects())
	if tc.backend {
		require.True(t, chain.Offloadable())
	}

	check := func(op string, tok llama.Token, err error) {
		t.Helper()
		if tc.fails {
			require.ErrorIs(t, err, llama.ErrInvalid, op)
			return
		}
		if err != nil {
			// A grammar may reject what the story model writes: an error,
			// never an abort.
			require.True(t, errors.Is(err, llama.ErrGrammar) || errors.Is(err, llama.ErrInvalid), "%s: %v", op, err)
			return
		}
		require.NoError(t, m.CheckToken(tok), op)
	}
	tok, err := chain.Propose(c, last)
	check("Propose", tok, err)
	tok, err = chain.Sample(c, last)
	check("Sample", tok, err)
	jobs := []llama.SampleJob{{Chain: chain, Index: last}}
	require.NoError(t, c.SampleParallel(jobs, 1))
	check("SampleParallel", jobs[0].Token, jobs[0].Err)
	clone, err := chain.Clone()
	if err == nil {
		tok, err = clone.Sample(c, last)
		check("Sample a clone", tok, err)
		clone.Close()
	}
	cands := []llama.TokenData{{ID: 1, Logit: 2}, {ID: 2, Logit: 1}, {ID: 3, Logit: 3}}
	out, sel, err := chain.Apply(cands)
	if err == nil {
		require.GreaterOrEqual(t, sel, 0)
		require.Less(t, sel, len(out))
	} else if tc.fails {
		require.ErrorIs(t, err, llama.ErrInvalid)
	}
	var text strings.Builder
	for p, err := range c.Generate(context.Background(), "Once upon a time", llama.GenerateOptions{MaxTokens: 8, Sampler: chain, Seq: 0}).Seq() {
		if err != nil {
			check("Generate", llama.NoToken, err)
			break
		}
		text.WriteString(p.Text)
	}
	if chain.Offloadable() {
		bc, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, tc.ss...)
		require.NoError(t, err)
		defer bc.Close()
		require.NoError(t, c.SetSampler(1, bc))
		b.Clear()
		require.NoError(t, b.AddSequence(toks, 0, 1, true))
		require.NoError(t, c.Decode(context.Background(), b))
		tok, err := bc.Sample(c, b.Len()-1)
		check("Sample on the backend", tok, err)
	}
}
