//go:build realmodel

package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/llama/engine"
	"github.com/x/llama/internal/testenv"
)

// specPrompts are prompts whose greedy continuations repeat what came
// before, so that the n-gram drafters find matches, and two plain ones.
func specPrompts() []string {
	return []string{
		strings.Repeat("1, 2, 3, 4, 5, 6, 7, 8, 9, 10, ", 4),
		strings.Repeat("The cat sat on the mat. The dog sat on the log. ", 5),
		"func add(a, b int) int { return a + b }\nfunc sub(a, b int) int { return a - b }\nfunc mul(a, b int) int {",
		"The capital of France is",
	}
}

// TestRealModelSpeculativeDiff runs greedy completions on Gemma 3 270M
// without drafting, then with each drafter our server supports (Gemma
// drafting for itself, ngram-simple, ngram-map-k, ngram-map-k4v, ngram-mod, ngram-cache), on both
// servers: each drafted generation must give the text of no drafting, on
// ours and on llama-server, and the drafters must have drafted.
func TestRealModelSpeculativeDiff(t *testing.T) {
	allowed := realDeviations(t)
	model := testenv.RealModel(t, "gemma3-270m")
	prompts := specPrompts()
	gen := func(t *testing.T, p diffPair) (ref, ours []string, drafted float64) {
		t.Helper()
		for i, prompt := range prompts {
			rc, r, oc, o := p.both(t, "/completion", map[string]any{"prompt": prompt, "n_predict": 32,
				"temperature": 0, "cache_prompt": false})
			require.Equal(t, 200, rc, "prompt %d: %v", i, r)
			require.Equal(t, 200, oc, "prompt %d: %v", i, o)
			ref = append(ref, r.(map[string]any)["content"].(string))
			ours = append(ours, o.(map[string]any)["content"].(string))
			if tm, ok := o.(map[string]any)["timings"].(map[string]any); ok {
				n, _ := tm["draft_n"].(float64)
				drafted += n
			}
		}
		return ref, ours, drafted
	}

	plainRef, plainOurs, _ := gen(t, startRealDiffPair(t, allowed))
	d := &diffLog{allowed: allowed}
	for i := range prompts {
		d.check(fmt.Sprintf("speculative/none/%d", i), plainRef[i], plainOurs[i])
	}

	// Small n-gram sizes, so that the drafters find matches in prompts of a
	// few dozen tokens.
	types := []struct {
		name    string
		refArgs []string
		spec    engine.SpeculativeOptions
	}{
		{"draft-simple", []string{"--spec-type", "draft-simple", "-md", model, "-td", "1", "-tbd", "1"},
			engine.SpeculativeOptions{Types: []string{engine.SpecDraftSimple}, DraftModel: model}},
		{"ngram-simple", []string{"--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3", "--spec-ngram-simple-size-m", "8"},
			engine.SpeculativeOptions{Types: []string{engine.SpecNgramSimple}, NgramSimpleSizeN: 3, NgramSimpleSizeM: 8}},
		{"ngram-map-k", []string{"--spec-type", "ngram-map-k", "--spec-ngram-map-k-size-n", "3", "--spec-ngram-map-k-size-m", "8"},
			engine.SpeculativeOptions{Types: []string{engine.SpecNgramMapK}, NgramMapKSizeN: 3, NgramMapKSizeM: 8}},
		{"ngram-map-k4v", []string{"--spec-type", "ngram-map-k4v", "--spec-ngram-map-k4v-size-n", "2", "--spec-ngram-map-k4v-size-m", "4"},
			engine.SpeculativeOptions{Types: []string{engine.SpecNgramMapK4V}, NgramMapK4VSizeN: 2, NgramMapK4VSizeM: 4}},
		{"ngram-mod", []string{"--spec-type", "ngram-mod", "--spec-ngram-mod-n-match", "3", "--spec-ngram-mod-n-min", "2", "--spec-ngram-mod-n-max", "8"},
			engine.SpeculativeOptions{Types: []string{engine.SpecNgramMod}, NgramModNMatch: 3, NgramModNMin: 2, NgramModNMax: 8}},
		{"ngram-cache", []string{"--spec-type", "ngram-cache"},
			engine.SpeculativeOptions{Types: []string{engine.SpecNgramCache}}},
	}
	for _, ty := range types {
		t.Run(ty.name, func(t *testing.T) {
			spec := ty.spec
			spec.Adapt.Off = true // draft as llama-server does
			p := startRealDiffPairWith(t, allowed, ty.refArgs, func(o *Options) { o.Engine.Speculative = spec })
			ref, ours, drafted := gen(t, p)
			require.Positive(t, drafted, "%s drafted nothing", ty.name)
			for i := range prompts {
				// Each server drafting against itself without, and the two
				// drafting against each other.
				// (llama-server's pair, ours) without drafting against with.
				d.check(fmt.Sprintf("speculative-plain/%s/%d", ty.name, i),
					[]string{plainRef[i], plainOurs[i]}, []string{ref[i], ours[i]})
				d.check(fmt.Sprintf("speculative/%s/%d", ty.name, i), ref[i], ours[i])
			}
			t.Logf("%s: %d prompts, %.0f tokens drafted", ty.name, len(prompts), drafted)
		})
	}
	d.report(t, "speculative", "speculative-plain")
}
