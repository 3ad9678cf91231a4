package sampling

import (
	"context"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/x/llama"
)

// Limits of one request's sampling settings. They are far above what a
// real client sends; they keep any value a client sends from turning into
// allocations or loops larger than the model and the context can use.
const (
	// MaxDRYBreakers is the most DRY sequence breakers; each is cut to
	// MaxDRYBreakerRunes characters, as llama.cpp's DRY sampler does.
	MaxDRYBreakers     = 64
	MaxDRYBreakerRunes = 40
	// MaxGrammarDepth is the deepest nesting of groups in a GBNF grammar
	// (llama.cpp parses groups recursively).
	MaxGrammarDepth = 128
	// MaxGrammarBytes is the longest grammar text.
	MaxGrammarBytes = 1 << 20
	// MaxSamplers is the longest sampler order: a chain runs each entry
	// for every token, and a list may repeat names (llama.cpp has eleven).
	MaxSamplers = 64
)

// Error is a sampling setting out of its limits. It matches
// llama.ErrInvalid.
type Error struct {
	Param string // the JSON name of the setting ("" for several)
	Msg   string // what is wrong, naming the setting as requests do
}

func (e *Error) Error() string { return "sampling: " + e.Msg }

// Is reports whether target is llama.ErrInvalid.
func (e *Error) Is(target error) bool { return target == llama.ErrInvalid }

func errorf(param, format string, args ...any) *Error {
	return &Error{Param: param, Msg: fmt.Sprintf(format, args...)}
}

// Limit bounds p for a slot context of nCtx tokens and a vocabulary of
// nVocab tokens, before any sampler is built: it clamps the windows
// (repeat_last_n, dry_penalty_last_n, dry_allowed_length; -1 becomes the
// context) to the context and top_k and n_probs to the vocabulary, cuts
// long DRY sequence breakers, and refuses (with an *Error) settings that
// must be finite and are not, lists beyond the limits above, unknown
// sampler names and a grammar too large or too deeply nested. Limit
// changes p in place; applied twice it changes nothing more.
func (p *Params) Limit(nCtx, nVocab int) error {
	nCtx = max(nCtx, 1)
	for i := range Table {
		if t := &Table[i]; t.Clamp != nil {
			v := t.Int(p)
			*v = t.Clamp(*v, nCtx, nVocab)
		}
	}
	if len(p.Samplers) > MaxSamplers {
		return errorf("samplers", `"samplers" has %d entries; at most %d are allowed`, len(p.Samplers), MaxSamplers)
	}
	if len(p.DRYSequenceBreakers) > MaxDRYBreakers {
		return errorf("dry_sequence_breakers", `"dry_sequence_breakers" has %d entries; at most %d are allowed`, len(p.DRYSequenceBreakers), MaxDRYBreakers)
	}
	cut := false
	for _, b := range p.DRYSequenceBreakers {
		cut = cut || utf8.RuneCountInString(b) > MaxDRYBreakerRunes
	}
	if cut {
		bs := make([]string, len(p.DRYSequenceBreakers))
		for i, b := range p.DRYSequenceBreakers {
			if utf8.RuneCountInString(b) > MaxDRYBreakerRunes {
				b = string([]rune(b)[:MaxDRYBreakerRunes])
			}
			bs[i] = b
		}
		p.DRYSequenceBreakers = bs
	}
	if len(p.LogitBias) > nVocab {
		return errorf("logit_bias", `"logit_bias" has %d entries; the vocabulary has %d tokens`, len(p.LogitBias), nVocab)
	}
	for i := range Table {
		if t := &Table[i]; t.Finite {
			if f := float64(*t.Float(p)); math.IsNaN(f) || math.IsInf(f, 0) {
				return errorf("", "sampling parameters must be finite numbers")
			}
		}
	}
	for _, n := range p.Samplers {
		if _, ok := LookupSampler(n); !ok {
			return errorf("samplers", "unknown sampler %q in \"samplers\"", n)
		}
	}
	return CheckGrammarSize(p.Grammar)
}

// CheckGrammarSize refuses a GBNF grammar longer than MaxGrammarBytes or
// nesting groups deeper than MaxGrammarDepth. Brackets inside string
// literals and character classes are not counted.
func CheckGrammarSize(g string) error {
	if len(g) > MaxGrammarBytes {
		return errorf("grammar", "the grammar has %d bytes; at most %d are allowed", len(g), MaxGrammarBytes)
	}
	depth := 0
	var quote byte // '"' in a literal, ']' in a class
	esc := false
	for i := 0; i < len(g); i++ {
		c := g[i]
		switch {
		case quote != 0:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == quote:
				quote = 0
			}
		case c == '#':
			for i < len(g) && g[i] != '\n' {
				i++
			}
		case c == '"':
			quote = '"'
		case c == '[':
			quote = ']'
		case c == '(':
			depth++
			if depth > MaxGrammarDepth {
				return errorf("grammar", "invalid grammar: groups nest deeper than %d levels", MaxGrammarDepth)
			}
		case c == ')':
			depth--
		}
	}
	return nil
}

// grammarProbe is how many tokens CheckGrammar offers a grammar at once.
// Applying a grammar costs time per token offered, before every
// request's first token: a large vocabulary whole costs that many times
// more than a block (BenchmarkCheckGrammar).
const grammarProbe = 4096

// CheckGrammar checks a GBNF grammar g for model m: its size and depth
// (CheckGrammarSize), that llama.cpp parses it, and that at least one
// token of the vocabulary can start it (a grammar with an empty character
// range, a token id past the vocabulary or a code point no text has can
// never match anything). It applies the grammar to the vocabulary in
// blocks of grammarProbe tokens, in id order, up to the first block that
// holds an allowed token: a grammar that starts with common text is
// answered from the first block, one that allows no token costs one pass
// over the vocabulary. Errors are *Error.
func CheckGrammar(m *llama.Model, g string) error {
	_, err := CheckedGrammar(m, g)
	return err
}

// CheckedGrammar is CheckGrammar that returns the grammar it parsed, for
// Params.ParsedGrammar: a request checked here builds its chain without
// parsing the grammar, or setting up its first parse states, again.
func CheckedGrammar(m *llama.Model, g string) (*llama.Grammar, error) {
	if err := CheckGrammarSize(g); err != nil {
		return nil, err
	}
	gr, err := llama.ParseGrammar(context.Background(), g, "root")
	if err != nil {
		return nil, errorf("grammar", "invalid grammar: %v", err)
	}
	c, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{Filter: true}, gr.Sampler())
	if err != nil {
		return nil, errorf("grammar", "invalid grammar: %v", err)
	}
	defer c.Close()
	n := m.VocabSize()
	cands := make([]llama.TokenData, min(n, grammarProbe))
	for start := 0; start < n; start += len(cands) {
		block := cands[:min(len(cands), n-start)]
		for i := range block {
			block[i] = llama.TokenData{ID: llama.Token(start + i)}
		}
		out, _, err := c.Apply(block)
		if err != nil {
			break
		}
		for _, t := range out {
			if !math.IsInf(float64(t.Logit), -1) {
				return gr, nil
			}
		}
	}
	return nil, errorf("grammar", "invalid grammar: it can never match (no token of the vocabulary can start it)")
}
