//go:build realmodel

package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRealModelSWADiff runs both servers with their default sliding-window
// cache (Gemma 3's window of 512 positions, a cache of 1024 cells at the
// suite's context) and compares what prefix reuse gives on follow-up
// requests: a chat's second turn after a short and after a long first turn
// (a short prefix goes through a context checkpoint, a long one through
// the window itself), and a prompt that keeps only an early part of a long
// one the window has moved past (decoded again from 0). The texts, token
// counts, timings.cache_n, tokens_cached and /slots' n_ctx must be the
// same. (The texts of long chats match only with the batches broken where
// llama-server breaks them, at user messages: a batch's size changes the
// last digits of the logits, and greedy picks between near-equal tokens.)
func TestRealModelSWADiff(t *testing.T) {
	allowed := realDeviations(t)
	p := startRealDiffPairWith(t, allowed, []string{"--slots"}, func(o *Options) { o.Slots = true })
	d := &diffLog{allowed: allowed}
	post := func(t *testing.T, id, path string, body map[string]any) (map[string]any, map[string]any) {
		t.Helper()
		rc, ref, oc, ours := p.both(t, path, body)
		require.Equal(t, 200, rc, "%s: %v", id, ref)
		require.Equal(t, 200, oc, "%s: %v", id, ours)
		return ref.(map[string]any), ours.(map[string]any)
	}
	timing := func(m map[string]any, k string) any {
		tm, _ := m["timings"].(map[string]any)
		return tm[k]
	}
	chatPick := func(m map[string]any) any {
		c := m["choices"].([]any)[0].(map[string]any)
		return map[string]any{"content": c["message"].(map[string]any)["content"], "usage": m["usage"],
			"cache_n": timing(m, "cache_n"), "prompt_n": timing(m, "prompt_n")}
	}
	msg := func(role, content string) map[string]any { return map[string]any{"role": role, "content": content} }
	long := strings.Repeat("The farmer counts his sheep one by one in the green field near the river. ", 50)
	for i, sys := range []string{"You are a helpful assistant.", long, long + long} {
		id := fmt.Sprintf("swa-chat/%d", i)
		// The first turn decodes its prompt and one token; the second
		// carries a fixed answer, so both slots hold the same tokens.
		msgs := []map[string]any{msg("system", sys), msg("user", "What does the farmer count?")}
		body := map[string]any{"messages": msgs, "max_tokens": 1, "temperature": 0}
		ref, ours := post(t, id+"/first", "/v1/chat/completions", body)
		d.check(id+"/first", chatPick(ref), chatPick(ours))
		body["messages"] = append(msgs, msg("assistant", "He counts his sheep."), msg("user", "And where is he?"))
		body["max_tokens"] = 16
		ref, ours = post(t, id+"/second", "/v1/chat/completions", body)
		require.Greater(t, timing(ref, "cache_n").(float64), float64(0), "%s: llama-server reused nothing", id)
		d.check(id+"/second", chatPick(ref), chatPick(ours))
	}

	pick := func(m map[string]any) any {
		return map[string]any{"content": m["content"], "tokens_evaluated": m["tokens_evaluated"],
			"tokens_cached": m["tokens_cached"], "cache_n": timing(m, "cache_n"), "prompt_n": timing(m, "prompt_n")}
	}
	text := strings.Repeat("one two three four five six seven eight nine ten ", 150)
	for i, second := range []string{text[:len(text)/5] + " Then the count stops.", text + " And so on."} {
		id := fmt.Sprintf("swa-completion/%d", i)
		body := map[string]any{"prompt": text, "n_predict": 8, "temperature": 0, "cache_prompt": true}
		ref, ours := post(t, id+"/first", "/completion", body)
		d.check(id+"/first", pick(ref), pick(ours))
		body["prompt"] = second
		ref, ours = post(t, id+"/second", "/completion", body)
		d.check(id+"/second", pick(ref), pick(ours))
	}

	get := func(url string) any {
		resp, err := http.Get(url + "/slots")
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode)
		var v any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&v))
		return v
	}
	ref, ours := get(p.ref), get(p.ours)
	nctx := func(v any) any {
		var out []any
		for _, s := range v.([]any) {
			out = append(out, s.(map[string]any)["n_ctx"])
		}
		return out
	}
	d.check("swa-slots/n_ctx", nctx(ref), nctx(ours))
	d.report(t, "swa-chat", "swa-completion", "swa-slots")
}
