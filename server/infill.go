package server

// Fill-in-the-middle: POST /infill. The code before and after the cursor
// (and optionally other files) become a prompt in the model's FIM format;
// the rest is a native completion.

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/x/llama"
	"github.com/x/llama/server/internal/wire"
)

// infillChunk is one extra file given as context.
type infillChunk struct {
	Filename string
	Text     string
}

// infillInput is what /infill adds to a completion request.
type infillInput struct {
	Prefix, Suffix embdPrompt
	Extra          []infillChunk
	Prompt         string
}

// infillBody is an /infill body: a completion's generation fields and
// the code around the cursor.
type infillBody struct {
	wire.ModelField
	wire.Gen
	Prompt      json.RawMessage `json:"prompt"`
	InputPrefix json.RawMessage `json:"input_prefix"`
	InputSuffix json.RawMessage `json:"input_suffix"`
	InputExtra  json.RawMessage `json:"input_extra"`
}

// parseInfillInput reads and checks the infill fields of a request.
func parseInfillInput(b *infillBody) (*infillInput, error) {
	var in infillInput
	if len(b.Prompt) > 0 && json.Unmarshal(b.Prompt, &in.Prompt) != nil {
		return nil, badRequest(`"prompt" must be a string`)
	}
	for _, side := range []struct {
		key string
		raw json.RawMessage
		dst *embdPrompt
	}{{"input_prefix", b.InputPrefix, &in.Prefix}, {"input_suffix", b.InputSuffix, &in.Suffix}} {
		if len(side.raw) == 0 {
			return nil, badRequest("%q is required", side.key)
		}
		p, err := parseEmbdPrompt(side.raw)
		if err != nil {
			return nil, badRequest("%q: %v", side.key, err)
		}
		*side.dst = p
	}
	if len(b.InputExtra) > 0 {
		if wire.Kind(b.InputExtra) != 'a' {
			return nil, badRequest(`"input_extra" must be an array of {"filename": string, "text": string}`)
		}
		var chunks []map[string]json.RawMessage
		if err := json.Unmarshal(b.InputExtra, &chunks); err != nil {
			return nil, badRequest(`"input_extra" must be an array of {"filename": string, "text": string}`)
		}
		for _, c := range chunks {
			ch := infillChunk{Filename: "tmp"}
			if wire.Kind(c["text"]) != 's' {
				return nil, badRequest(`extra_context chunk must contain a "text" field with a string value`)
			}
			_ = json.Unmarshal(c["text"], &ch.Text)
			if raw, ok := c["filename"]; ok && !wire.IsNull(raw) {
				if wire.Kind(raw) != 's' {
					return nil, badRequest(`extra_context chunk's "filename" field must be a string`)
				}
				_ = json.Unmarshal(raw, &ch.Filename)
			}
			in.Extra = append(in.Extra, ch)
		}
	}
	return &in, nil
}

// infillSupport returns why the model cannot infill ("" when it can).
func infillSupport(sp llama.SpecialTokens) string {
	msg := ""
	if sp.FIMPre == llama.NoToken {
		msg += "prefix token is missing. "
	}
	if sp.FIMSuf == llama.NoToken {
		msg += "suffix token is missing. "
	}
	if sp.FIMMid == llama.NoToken {
		msg += "middle token is missing. "
	}
	return msg
}

// infillLimits are the sizes format_prompt_infill fits the prompt into.
type infillLimits struct {
	NBatch   int  // logical batch size: the prefix gets 3/4, the suffix 1/4
	NPredict int  // tokens to generate (-1: unlimited)
	NCtx     int  // context of one slot
	SPM      bool // suffix-prefix-middle order (--spm-infill)
}

// infillPrompt builds the fill-in-the-middle prompt as llama.cpp's
// format_prompt_infill (repo-level pattern, prefix-suffix-middle order, or
// suffix first with SPM):
//
//	[extra context] [BOS] FIM_PRE prefix prompt FIM_SUF suffix FIM_MID
//
// where the extra context is FIM_REP "myproject\n" then, per file,
// FIM_SEP filename "\n" text (a "--- snippet ---" line stands in for a
// missing FIM_SEP), then FIM_SEP "filename\n". The prefix keeps its last
// 3/4 of a batch, the suffix its first quarter less the prompt, and the
// extra context its last tokens that fit the slot beside a batch and twice
// n_predict.
func infillPrompt(m *llama.Model, in *infillInput, lim infillLimits) ([]llama.Token, error) {
	sp := m.SpecialTokens()
	tok := func(s string) ([]llama.Token, error) { return tokenizeText(m, s, llama.TokenizeOptions{}) }
	prefix, err := in.Prefix.tokenize(m, false, false)
	if err != nil {
		return nil, badRequest("input_prefix: %v", err)
	}
	suffix, err := in.Suffix.tokenize(m, false, false)
	if err != nil {
		return nil, badRequest("input_suffix: %v", err)
	}
	prompt, err := tokenizeText(m, in.Prompt, llama.TokenizeOptions{ParseSpecial: true})
	if err != nil {
		return nil, badRequest("prompt: %v", err)
	}

	var extra []llama.Token
	add := func(s string) error {
		t, err := tok(s)
		extra = append(extra, t...)
		return err
	}
	if sp.FIMRep != llama.NoToken {
		extra = append(extra, sp.FIMRep)
		if err := add("myproject\n"); err != nil {
			return nil, err
		}
	}
	for _, c := range in.Extra {
		if sp.FIMSep != llama.NoToken {
			extra = append(extra, sp.FIMSep)
			if err := add(c.Filename + "\n"); err != nil {
				return nil, err
			}
		} else if err := add("\n\n--- snippet ---\n\n"); err != nil {
			return nil, err
		}
		if err := add(c.Text); err != nil {
			return nil, err
		}
	}
	if sp.FIMSep != llama.NoToken {
		extra = append(extra, sp.FIMSep)
		if err := add("filename\n"); err != nil {
			return nil, err
		}
	}

	nPrefix := min(len(prefix), 3*(lim.NBatch/4))
	nSuffix := min(len(suffix), max(0, lim.NBatch/4-(2+len(prompt))))
	nExtra := min(max(0, lim.NCtx-lim.NBatch-2*lim.NPredict), len(extra))

	out := make([]llama.Token, 0, nExtra+nPrefix+nSuffix+len(prompt)+4)
	out = append(out, extra[len(extra)-nExtra:]...)
	if sp.AddBOS && sp.BOS != llama.NoToken {
		out = append(out, sp.BOS)
	}
	pre := slices.Concat([]llama.Token{sp.FIMPre}, prefix[len(prefix)-nPrefix:], prompt)
	suf := slices.Concat([]llama.Token{sp.FIMSuf}, suffix[:nSuffix])
	if lim.SPM {
		pre, suf = suf, pre
	}
	out = append(out, pre...)
	out = append(out, suf...)
	out = append(out, sp.FIMMid)
	return out, nil
}

// infillLimits are the instance's sizes for infillPrompt.
func (inst *instance) infillLimits() infillLimits {
	nBatch := inst.Opts.Engine.Context.BatchSize
	if nBatch <= 0 {
		nBatch = 2048
	}
	nPredict := inst.Opts.NPredict
	if nPredict == 0 {
		nPredict = -1
	}
	return infillLimits{NBatch: nBatch, NPredict: nPredict, NCtx: inst.slotContext(), SPM: inst.Opts.SPMInfill}
}

func handleInfill(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var b infillBody
		inst, release, err := s.requestInstance(r, &b)
		if err != nil {
			return err
		}
		defer release()
		arrived := inst.Engine.Expect()
		defer arrived()
		if msg := infillSupport(inst.Model.SpecialTokens()); msg != "" {
			return notSupported("Infill is not supported by this model: %s", msg)
		}
		in, err := parseInfillInput(&b)
		if err != nil {
			return err
		}
		t, opt, err := inst.generation(&b.Gen, inst.Opts.NPredict)
		if err != nil {
			return err
		}
		prompt, err := infillPrompt(inst.Model, in, inst.infillLimits())
		if err != nil {
			return err
		}
		g := &genRequest{inst: inst, prompts: [][]llama.Token{prompt}, task: t, opt: opt}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		st, err := s.startTasks(ctx, inst, arrived, g.tasks(), streamTo(w, opt.Stream))
		if err != nil {
			return err
		}
		if opt.Stream {
			streamNative(ctx, w, g, st)
			return nil
		}
		res, err := collect(ctx, inst.Model, st, 1)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, nativeFinal(g, 0, res[0], false))
		return nil
	}
}
