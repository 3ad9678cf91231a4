package server

// The thinking token budget (llama-server's --reasoning-budget, and a
// request's reasoning_budget_tokens or thinking_budget_tokens): once a
// thinking block has used its budget, a sampler forces the budget message
// and the end-of-thinking tag, token by token, and the answer goes on
// after it.

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/x/llama"
)

// budgetState is where a reasoningBudget is.
type budgetState int

const (
	budgetIdle     budgetState = iota // outside a thinking block
	budgetCounting                    // in one, counting its tokens
	budgetWaitUTF8                    // spent, waiting for the end of a character
	budgetForcing                     // forcing the message and end tag
	budgetDone                        // the block ended (a new start tag re-arms)
)

// reasoningBudget is the sampler: it matches the start and end tags as
// token sequences in the generated tokens, and while forcing leaves the
// one token to force as the only candidate. Its Accepts before its first
// Apply are the prompt's (the engine gives them to samplers that keep a
// history) and are ignored: the prompt's own open block is its initial
// state.
type reasoningBudget struct {
	model      *llama.Model
	start      []llama.Token
	ends       [][]llama.Token
	forced     []llama.Token // the message, then the first end tag
	budget     int
	state      budgetState
	remaining  int
	forcePos   int
	recent     []llama.Token // the last generated tokens, for the tag matches
	maxTag     int
	generating bool // Apply was called: Accepts are generated tokens
	init       budgetState
	initLeft   int
}

// budgetSpec is what a chat request's budget samplers are made from.
type budgetSpec struct {
	model  *llama.Model
	start  string
	ends   []string
	msg    string
	budget int
	// open and used: the prompt ends inside an open thinking block,
	// after used tokens of it.
	open bool
	used int
}

// newBudgetSampler makes the sampler of spec, or nil when a tag does not
// tokenize.
func (b budgetSpec) sampler() *reasoningBudget {
	tok := func(s string) []llama.Token {
		t, err := b.model.Tokenize(s, llama.TokenizeOptions{ParseSpecial: true})
		if err != nil {
			return nil
		}
		return t
	}
	r := &reasoningBudget{model: b.model, start: tok(b.start), budget: b.budget}
	for _, e := range b.ends {
		if t := tok(e); len(t) > 0 && !slices.ContainsFunc(r.ends, func(x []llama.Token) bool { return slices.Equal(x, t) }) {
			r.ends = append(r.ends, t)
		}
	}
	if len(r.start) == 0 || len(r.ends) == 0 {
		return nil
	}
	if b.msg != "" {
		r.forced = tok(b.msg)
	}
	r.forced = append(r.forced, r.ends[0]...)
	r.maxTag = len(r.start)
	for _, e := range r.ends {
		r.maxTag = max(r.maxTag, len(e))
	}
	r.init, r.initLeft = budgetIdle, b.budget
	if b.open {
		r.init, r.initLeft = budgetCounting, b.budget-b.used
		if r.initLeft <= 0 {
			r.init = budgetForcing
		}
	}
	r.Reset()
	return r
}

func (r *reasoningBudget) Name() string { return "reasoning-budget" }

func (r *reasoningBudget) Reset() {
	r.state, r.remaining, r.forcePos, r.recent, r.generating = r.init, r.initLeft, 0, r.recent[:0], false
}

// Apply leaves the token to force as the only candidate while forcing.
func (r *reasoningBudget) Apply(c *llama.Candidates) {
	r.generating = true
	if r.state != budgetForcing || r.forcePos >= len(r.forced) {
		return
	}
	want := r.forced[r.forcePos]
	d := c.Data()
	if len(d) == 0 {
		return
	}
	// The samplers before this one may have dropped the token: put it
	// first whatever they left.
	d[0] = llama.TokenData{ID: want, Logit: 0, P: 1}
	c.Truncate(1)
	c.SetSorted(true)
}

// Accept follows the generated tokens through the states.
func (r *reasoningBudget) Accept(t llama.Token) {
	if !r.generating {
		return
	}
	r.recent = append(r.recent, t)
	if len(r.recent) > r.maxTag {
		r.recent = r.recent[len(r.recent)-r.maxTag:]
	}
	switch r.state {
	case budgetIdle, budgetDone:
		if r.endsWith(r.start) {
			r.recent = r.recent[:0]
			r.state, r.remaining = budgetCounting, r.budget
			if r.remaining <= 0 {
				r.state, r.forcePos = budgetForcing, 0
			}
		}
	case budgetCounting, budgetWaitUTF8:
		for _, e := range r.ends {
			if r.endsWith(e) {
				r.state = budgetDone
				r.recent = r.recent[:0]
				return
			}
		}
		piece, _ := r.model.TokenPiece(t, false)
		complete := utf8Complete(piece)
		if r.state == budgetWaitUTF8 {
			if complete {
				r.state, r.forcePos = budgetForcing, 0
			}
			return
		}
		if r.remaining--; r.remaining <= 0 {
			r.state = budgetWaitUTF8
			if complete {
				r.state, r.forcePos = budgetForcing, 0
			}
		}
	case budgetForcing:
		if r.forcePos++; r.forcePos >= len(r.forced) {
			r.state = budgetDone
			r.recent = r.recent[:0]
		}
	}
}

func (r *reasoningBudget) endsWith(tag []llama.Token) bool {
	return len(tag) > 0 && len(r.recent) >= len(tag) && slices.Equal(r.recent[len(r.recent)-len(tag):], tag)
}

// utf8Complete reports whether s does not end inside a UTF-8 character.
func utf8Complete(s string) bool {
	for i := len(s) - 1; i >= 0 && i >= len(s)-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			return utf8.FullRuneInString(s[i:])
		}
	}
	return true
}

// budgetFor returns the budget spec of a chat whose rendered prompt is
// prompt, its thinking tags start and end: nil when there is no budget
// (budget < 0) or no tags.
func (inst *instance) budgetFor(budget int, msg, prompt, start, end string) *budgetSpec {
	start, end = strings.TrimSpace(start), strings.TrimSpace(end)
	if budget < 0 || start == "" || end == "" {
		return nil
	}
	b := &budgetSpec{model: inst.Model, start: start, ends: []string{end}, msg: msg, budget: budget}
	if i := strings.LastIndex(prompt, start); i >= 0 && !strings.Contains(prompt[i:], end) {
		b.open = true
		if tail := prompt[i+len(start):]; tail != "" {
			if toks, err := inst.Model.Tokenize(tail, llama.TokenizeOptions{ParseSpecial: true}); err == nil {
				b.used = len(toks)
			}
		}
	}
	return b
}
