//go:build realmodel

package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// realLongCtx is the small context of the long-generation cases, so that
// 160 tokens go past it.
const realLongCtx = 128

// TestRealModelLongDiff runs both servers on Gemma 3 270M with a context of
// 128 tokens, context shift on and a slot save folder, and compares:
// greedy generations that go past n_ctx with several n_keep (the context
// shifts), a prompt longer than the context, a second request that reuses
// the first one's cached prompt, and a slot saved, overwritten by another
// request, restored and continued. Continuations, token counts and the
// tokens taken from the cache must be the same.
func TestRealModelLongDiff(t *testing.T) {
	allowed := realDeviations(t)
	refDir, oursDir := t.TempDir(), t.TempDir()
	p := startRealDiffPairWith(t, allowed,
		[]string{"-c", fmt.Sprint(realLongCtx), "--context-shift", "--slot-save-path", refDir},
		func(o *Options) {
			o.Engine.Context.ContextSize = realLongCtx
			o.Engine.ContextShift = true
			o.SlotSavePath = oursDir
		})
	complete := func(t *testing.T, id string, body map[string]any) (map[string]any, map[string]any) {
		t.Helper()
		rc, ref, oc, ours := p.both(t, "/completion", body)
		require.Equal(t, rc, oc, "%s: status\n  llama-server: %v\n  ours: %v", id, ref, ours)
		require.Equal(t, 200, rc, "%s: %v", id, ref)
		return ref.(map[string]any), ours.(map[string]any)
	}
	pick := func(m map[string]any) any {
		timings, _ := m["timings"].(map[string]any)
		return map[string]any{"content": m["content"], "tokens_predicted": m["tokens_predicted"],
			"tokens_evaluated": m["tokens_evaluated"], "tokens_cached": m["tokens_cached"],
			"stop_type": m["stop_type"], "truncated": m["truncated"], "prompt_n": timings["prompt_n"]}
	}

	t.Run("context-shift", func(t *testing.T) {
		d := &diffLog{allowed: allowed}
		cases := []struct {
			prompt string
			nKeep  int
		}{
			{"Once upon a time, there was a little girl who", 0},
			{"Once upon a time, there was a little girl who", -1},
			{"The history of the Roman Empire begins with", 4},
			{strings.Repeat("one two three four five six seven eight nine ten ", 6), 16},
		}
		for i, c := range cases {
			id := fmt.Sprintf("context-shift/%d", i)
			ref, ours := complete(t, id, map[string]any{"prompt": c.prompt, "n_predict": 160, "n_keep": c.nKeep,
				"temperature": 0, "cache_prompt": false})
			require.Greater(t, ref["tokens_predicted"].(float64)+ref["tokens_evaluated"].(float64), float64(realLongCtx),
				"%s: the generation must pass n_ctx", id)
			d.check(id, pick(ref), pick(ours))
		}
		// A prompt longer than the context is refused (or truncated) the
		// same way.
		long := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 40)
		rc, ref, oc, ours := p.both(t, "/completion", map[string]any{"prompt": long, "n_predict": 8, "temperature": 0})
		require.Equal(t, rc, oc, "too long prompt:\n  llama-server: %v\n  ours: %v", ref, ours)
		if rc == 200 {
			d.check("context-shift/too-long", pick(ref.(map[string]any)), pick(ours.(map[string]any)))
		} else {
			d.check("context-shift/too-long", errorShape(ref), errorShape(ours))
		}
		t.Logf("%d context-shift cases compared", len(cases)+1)
		d.report(t, "context-shift")
	})

	t.Run("prompt-cache", func(t *testing.T) {
		d := &diffLog{allowed: allowed}
		prompts := []string{"The capital of France is", "Here is a list of fruits: apple,", "func add(a, b int) int {"}
		for i, prompt := range prompts {
			body := map[string]any{"prompt": prompt, "n_predict": 24, "temperature": 0, "cache_prompt": true}
			ref, ours := complete(t, fmt.Sprintf("prompt-cache/%d/first", i), body)
			d.check(fmt.Sprintf("prompt-cache/%d/first", i), pick(ref), pick(ours))
			// The second request continues the first one's prompt and
			// answer: only the new tokens are evaluated.
			body["prompt"] = prompt + ref["content"].(string) + " And then"
			ref, ours = complete(t, fmt.Sprintf("prompt-cache/%d/second", i), body)
			require.Less(t, ref["timings"].(map[string]any)["prompt_n"].(float64), ref["tokens_evaluated"].(float64),
				"llama-server reused no cache")
			d.check(fmt.Sprintf("prompt-cache/%d/second", i), pick(ref), pick(ours))
		}
		t.Logf("%d prompt-cache pairs compared", len(prompts))
		d.report(t, "prompt-cache")
	})

	t.Run("slot-save-restore", func(t *testing.T) {
		d := &diffLog{allowed: allowed}
		slotOp := func(t *testing.T, id, action, file string) {
			t.Helper()
			rc, ref, oc, ours := p.both(t, "/slots/0?action="+action, map[string]any{"filename": file})
			require.Equal(t, 200, rc, "%s: %v", id, ref)
			require.Equal(t, 200, oc, "%s: %v", id, ours)
			drop := func(v any) any {
				m := v.(map[string]any)
				delete(m, "timings")
				return m
			}
			d.check(id, drop(ref), drop(ours))
		}
		prompts := []string{"In the beginning of the universe,", "My favourite recipe for pancakes needs"}
		for i, prompt := range prompts {
			file := fmt.Sprintf("gemma-slot-%d.bin", i)
			body := map[string]any{"prompt": prompt, "n_predict": 24, "temperature": 0, "cache_prompt": true}
			ref, ours := complete(t, fmt.Sprintf("slot/%d/first", i), body)
			d.check(fmt.Sprintf("slot/%d/first", i), pick(ref), pick(ours))
			slotOp(t, fmt.Sprintf("slot/%d/save", i), "save", file)
			// Another prompt takes the slot's cache.
			other := map[string]any{"prompt": "Something else entirely: bananas", "n_predict": 8, "temperature": 0, "cache_prompt": true}
			r2, o2 := complete(t, fmt.Sprintf("slot/%d/other", i), other)
			d.check(fmt.Sprintf("slot/%d/other", i), pick(r2), pick(o2))
			slotOp(t, fmt.Sprintf("slot/%d/restore", i), "restore", file)
			// Continue from the restored state.
			body["prompt"] = prompt + ref["content"].(string) + " Then"
			// With Gemma's sliding window (and no --swa-full) llama-server
			// decodes a restored prompt shorter than the window again: a
			// restore keeps no context checkpoint. Ours must do the same.
			ref, ours = complete(t, fmt.Sprintf("slot/%d/continue", i), body)
			d.check(fmt.Sprintf("slot/%d/continue", i), pick(ref), pick(ours))
		}
		t.Logf("%d save-restore-continue rounds compared", len(prompts))
		d.report(t, "slot")
	})
}

// errorShape is the comparable part of an error answer: its type and code.
func errorShape(v any) any {
	m, _ := v.(map[string]any)
	e, _ := m["error"].(map[string]any)
	return map[string]any{"type": e["type"], "code": e["code"]}
}
