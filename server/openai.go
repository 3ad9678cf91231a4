package server

// OpenAI-compatible text completions, POST /v1/completions, and the wire
// types shared with chat completions.

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/x/llama/engine"
	"github.com/x/llama/server/internal/wire"

	"github.com/x/llama"
)

// systemFingerprint identifies the server build in OpenAI responses.
const systemFingerprint = "b0.4.0-go-llama"

// oaiUsage is OpenAI's token usage.
type oaiUsage struct {
	PromptTokens        int                `json:"prompt_tokens"`
	CompletionTokens    int                `json:"completion_tokens"`
	TotalTokens         int                `json:"total_tokens"`
	PromptTokensDetails oaiPromptTokDetail `json:"prompt_tokens_details"`
}

type oaiPromptTokDetail struct {
	CachedTokens int `json:"cached_tokens"`
}

func (u *oaiUsage) add(ev engine.Event) {
	u.PromptTokens += ev.PromptTokens
	u.CompletionTokens += ev.Generated
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	u.PromptTokensDetails.CachedTokens += ev.CachedTokens
}

// oaiLogprobs is the logprobs object of a choice: llama.cpp's probability
// entries under "content" (OpenAI's chat shape).
type oaiLogprobs struct {
	Content []wire.Prob `json:"content"`
}

// oaiCompletion is a /v1/completions response or stream chunk.
type oaiCompletion struct {
	ID                string                `json:"id"`
	Object            string                `json:"object"`
	Created           int64                 `json:"created"`
	Model             string                `json:"model"`
	SystemFingerprint string                `json:"system_fingerprint"`
	Choices           []oaiCompletionChoice `json:"choices"`
	Usage             *oaiUsage             `json:"usage,omitempty"`
	Timings           *wire.Timings         `json:"timings,omitempty"`
	// Verbose is llama-server's __verbose debug object.
	Verbose any `json:"__verbose,omitempty"`
}

type oaiCompletionChoice struct {
	Text         string             `json:"text"`
	Index        int                `json:"index"`
	Logprobs     *oaiLegacyLogprobs `json:"logprobs"`
	FinishReason *string            `json:"finish_reason"`
}

// oaiLegacyLogprobs is the logprobs object of a /v1/completions choice in
// OpenAI's legacy shape: per generated token its text, log probability,
// the top alternatives by text, and its character offset in the choice's
// text.
type oaiLegacyLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// legacyLogprobs converts steps to the legacy shape; offset is the number
// of characters of the choice's text before the first step. It returns the
// offset after the last step too, for the next stream chunk.
func legacyLogprobs(m *llama.Model, steps []wire.Step, offset int) (*oaiLegacyLogprobs, int) {
	lp := &oaiLegacyLogprobs{
		Tokens: make([]string, 0, len(steps)), TokenLogprobs: make([]float64, 0, len(steps)),
		TopLogprobs: make([]map[string]float64, 0, len(steps)), TextOffset: make([]int, 0, len(steps)),
	}
	for _, s := range steps {
		pj := wire.SampledProb(m, s, false)
		top := make(map[string]float64, len(s.Probs))
		for _, p := range s.Probs {
			tj := wire.TokenProb(m, p, false)
			if _, dup := top[tj.Token]; !dup {
				top[tj.Token] = *tj.Logprob
			}
		}
		lp.Tokens = append(lp.Tokens, pj.Token)
		lp.TokenLogprobs = append(lp.TokenLogprobs, *pj.Logprob)
		lp.TopLogprobs = append(lp.TopLogprobs, top)
		lp.TextOffset = append(lp.TextOffset, offset)
		offset += utf8.RuneCountInString(s.Text)
	}
	return lp, offset
}

// finishReason maps a stop reason to OpenAI's.
func finishReason(r engine.StopType, toolCalls bool) string {
	switch r {
	case engine.StopTypeEOS, engine.StopTypeWord:
		if toolCalls {
			return "tool_calls"
		}
		return "stop"
	}
	return "length"
}

// oaiUnsupported are the OpenAI fields the server cannot honour.
type oaiUnsupported struct {
	BestOf json.RawMessage `json:"best_of"`
	Suffix json.RawMessage `json:"suffix"`
}

// check rejects best_of and suffix.
func (u *oaiUnsupported) check() error {
	for _, f := range []struct {
		name string
		raw  json.RawMessage
	}{{"best_of", u.BestOf}, {"suffix", u.Suffix}} {
		if len(f.raw) > 0 {
			return badRequest("unsupported parameter: %s", f.name)
		}
	}
	return nil
}

// oaiCompletionBody is a /v1/completions body.
type oaiCompletionBody struct {
	completionBody
	oaiUnsupported
	N    wire.Num       `json:"n"`
	Echo wire.Opt[bool] `json:"echo"`
	// Logprobs is the number of top tokens to return (llama.cpp's n_probs).
	Logprobs wire.Num `json:"logprobs"`
}

// answerOAICompletion writes /v1/completions' response.
func answerOAICompletion(ctx context.Context, w http.ResponseWriter, b *oaiCompletionBody, g *genRequest, st eventStream) error {
	inst := g.inst
	base := oaiCompletion{
		ID: wire.NewID("cmpl-"), Object: "text_completion", Created: time.Now().Unix(),
		Model: cmp.Or(b.Model.V, inst.Name), SystemFingerprint: systemFingerprint,
	}
	nProbs := g.task.Params.NProbs
	if g.opt.Stream {
		streamOAICompletion(ctx, w, g, st, base)
		return nil
	}
	results, err := collect(ctx, inst.Model, st, len(g.prompts))
	if err != nil {
		return err
	}
	resp := base
	var usage oaiUsage
	for i, res := range results {
		fr := finishReason(res.Final.Stop, false)
		c := oaiCompletionChoice{Text: res.Text, Index: i, FinishReason: &fr}
		if nProbs > 0 {
			c.Logprobs, _ = legacyLogprobs(inst.Model, res.Steps, 0)
		}
		resp.Choices = append(resp.Choices, c)
		usage.add(res.Final)
		if i == len(results)-1 {
			resp.Timings = wire.NewTimings(res.Final.Timings)
			if g.opt.Verbose {
				resp.Verbose = nativeFinal(g, i, res, false)
			}
		}
	}
	resp.Usage = &usage
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// parseOAICompletion reads a /v1/completions body.
func parseOAICompletion(b *oaiCompletionBody, inst *instance) (*genRequest, error) {
	if len(b.Prompt) == 0 {
		return nil, badRequest(`"prompt" is required`)
	}
	if err := b.oaiUnsupported.check(); err != nil {
		return nil, err
	}
	if b.N.Set {
		n, err := b.N.Integer()
		if err != nil {
			return nil, err
		}
		if n != 1 {
			return nil, badRequest(`only one completion choice is allowed ("n" must be 1)`)
		}
	}
	var echo bool
	if err := b.Echo.Read(&echo, "a boolean"); err != nil {
		return nil, err
	}
	if echo {
		return nil, badRequest(`only "echo": false is supported`)
	}
	t, opt, err := inst.generation(&b.Gen, inst.Opts.NPredict)
	if err != nil {
		return nil, err
	}
	if b.Logprobs.Set && !b.Params.Has("n_probs") {
		if err := b.Logprobs.Int(&t.Params.NProbs, 0, 20); err != nil {
			return nil, err
		}
	}
	prompts, err := parsePrompts(b.Prompt, "prompt", inst)
	if err != nil {
		return nil, err
	}
	return &genRequest{inst: inst, prompts: prompts, task: t, opt: opt}, nil
}

// streamOAICompletion sends text_completion chunks, a last chunk per
// prompt with its finish reason, usage and timings, then [DONE].
func streamOAICompletion(ctx context.Context, w http.ResponseWriter, g *genRequest, events eventStream, base oaiCompletion) {
	sse, _ := sseStart(ctx, w)
	nProbs := g.task.Params.NProbs
	pending := make([][]wire.Step, len(g.prompts))
	offsets := make([]int, len(g.prompts))
	for events.Next() {
		ev, idx := events.Event(), events.Index()
		if ev.Err != nil {
			sse.fail(ev.Err)
			return
		}
		if ev.Progress != nil {
			continue
		}
		chunk := base
		if ev.Done {
			fr := finishReason(ev.Stop, false)
			var u oaiUsage
			u.add(ev)
			chunk.Choices = []oaiCompletionChoice{{Index: idx, FinishReason: &fr}}
			chunk.Usage, chunk.Timings = &u, wire.NewTimings(ev.Timings)
			if sse.data(chunk) != nil {
				return
			}
			continue
		}
		if nProbs > 0 {
			pending[idx] = append(pending[idx], wire.StepOf(ev))
		}
		if ev.Text == "" {
			continue
		}
		c := oaiCompletionChoice{Text: ev.Text, Index: idx}
		if nProbs > 0 {
			c.Logprobs, offsets[idx] = legacyLogprobs(g.inst.Model, pending[idx], offsets[idx])
			pending[idx] = nil
		}
		if g.opt.TimingsPerToken {
			chunk.Timings = wire.NewTimings(ev.Timings)
		}
		chunk.Choices = []oaiCompletionChoice{c}
		if sse.data(chunk) != nil {
			return
		}
	}
	if ctx.Err() == nil {
		_ = sse.data("[DONE]")
	}
}
