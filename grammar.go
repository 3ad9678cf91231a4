package llama

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/x/llama/internal/capi"
)

// Grammar is a GBNF grammar (llama.cpp's grammar format) that constrains
// generation. Make one with ParseGrammar, GrammarFromJSONSchema or
// GrammarFor; a Grammar is immutable and safe for concurrent use.
type Grammar struct {
	source string
	root   string
}

// Source returns the grammar text.
func (g *Grammar) Source() string { return g.source }

// Root returns the start rule's name.
func (g *Grammar) Root() string { return g.root }

// Sampler returns a sampler that masks every token the grammar does not
// allow. Put it first in a chain.
func (g *Grammar) Sampler() Sampler { return GrammarSampler(g.source, g.root) }

// LazySampler returns a sampler that lets the model write freely until a
// trigger appears (a regular expression over the generated text, or a
// token), and constrains what follows. Triggers of the form "word" match
// literally when escaped with regexp.QuoteMeta.
func (g *Grammar) LazySampler(patterns []string, tokens []Token) Sampler {
	return LazyGrammarSampler(g.source, g.root, patterns, tokens)
}

// GrammarSampler is Grammar.Sampler for grammar text. The text is checked
// by ParseGrammar when the chain is built (a malformed grammar is an error
// with its line and column, and the inputs llama.cpp cannot handle never
// reach it); empty text means no constraint.
func GrammarSampler(source, root string) Sampler {
	if root == "" {
		root = "root"
	}
	return samplerFunc{"grammar", func(m *Model) (capi.Sampler, error) {
		if err := checkGrammarText(source, root); err != nil {
			return 0, err
		}
		s := capi.SamplerInitGrammar(m.vocab, source, root)
		if s == 0 {
			return 0, errorf(CodeGrammar, "grammar", "llama.cpp rejected the grammar (syntax, an undefined rule, left recursion, or no rule %q)", root)
		}
		return s, nil
	}}
}

// LazyGrammarSampler is Grammar.LazySampler for grammar text.
func LazyGrammarSampler(source, root string, patterns []string, tokens []Token) Sampler {
	if root == "" {
		root = "root"
	}
	return samplerFunc{"grammar-lazy", func(m *Model) (capi.Sampler, error) {
		if err := checkGrammarText(source, root); err != nil {
			return 0, err
		}
		for _, t := range tokens {
			if err := m.CheckToken(t); err != nil {
				return 0, err
			}
		}
		cs := make([][]byte, len(patterns))
		ptrs := make([]uintptr, len(patterns)+1)
		for i, p := range patterns {
			if err := checkPattern(p); err != nil {
				return 0, err
			}
			cs[i] = append([]byte(p), 0)
			ptrs[i] = uintptr(unsafe.Pointer(&cs[i][0]))
		}
		var tp unsafe.Pointer
		if len(tokens) > 0 {
			tp = unsafe.Pointer(&tokens[0])
		}
		s := capi.SamplerInitGrammarLazyPatterns(m.vocab, source, root, unsafe.Pointer(&ptrs[0]), uintptr(len(patterns)), tp, uintptr(len(tokens)))
		keepAlive(cs)
		keepAlive(tokens)
		if s == 0 {
			return 0, errorf(CodeGrammar, "grammar", "llama.cpp rejected the lazy grammar")
		}
		return s, nil
	}}
}

// checkGrammarText parses grammar text in Go before llama.cpp sees it.
func checkGrammarText(s, root string) error {
	if s == "" {
		return nil
	}
	_, err := ParseGrammar(s, root)
	return err
}

// checkPattern refuses trigger patterns that std::regex may not handle:
// Go's RE2 syntax is the common subset we accept.
func checkPattern(p string) error {
	if strings.IndexByte(p, 0) >= 0 {
		return errorf(CodeInvalid, "grammar", "trigger pattern has a NUL byte")
	}
	if _, err := regexpCompile(p); err != nil {
		return errorf(CodeInvalid, "grammar", "trigger pattern %q: %v", p, err)
	}
	return nil
}

// Match reports whether text is a complete sentence of the grammar, as
// llama.cpp's grammar engine (the one that constrains sampling) judges it
// with m's vocabulary. Text is fed one byte token at a time where the
// vocabulary has byte tokens (SentencePiece), else as its tokenization.
func (g *Grammar) Match(m *Model, text string) (bool, error) {
	toks, err := m.grammarTokens(text)
	if err != nil {
		return false, err
	}
	chain, err := NewSamplerChain(m, SamplerChainOptions{}, g.Sampler())
	if err != nil {
		return false, err
	}
	defer chain.Close()
	allowed := func(t Token) (bool, error) {
		out, _, err := chain.Apply([]TokenData{{ID: t}})
		if err != nil {
			return false, err
		}
		return len(out) == 1 && !isNegInf(out[0].Logit), nil
	}
	for _, t := range toks {
		ok, err := allowed(t)
		if err != nil || !ok {
			return false, err
		}
		if err := chain.Accept(t); err != nil {
			return false, err
		}
	}
	eos := m.SpecialTokens().EOS
	if eos == NoToken {
		eos = m.SpecialTokens().EOT
	}
	return allowed(eos)
}

func isNegInf(f float32) bool { return f < -3.0e38 }

// grammarTokens maps text to tokens whose pieces concatenate to it exactly.
func (m *Model) grammarTokens(text string) ([]Token, error) {
	m.byteOnce.Do(func() {
		for i := range m.byteTok {
			m.byteTok[i] = NoToken
		}
		n := 0
		for t := Token(0); t < Token(m.nVocb); t++ {
			s, err := m.TokenText(t)
			if err != nil || len(s) != 6 || s[:3] != "<0x" || s[5] != '>' {
				continue
			}
			var b byte
			if _, err := fmt.Sscanf(s[3:5], "%02X", &b); err == nil {
				m.byteTok[b] = t
				n++
			}
		}
		m.hasBytes = n == 256
	})
	if m.hasBytes {
		out := make([]Token, len(text))
		for i := 0; i < len(text); i++ {
			out[i] = m.byteTok[text[i]]
		}
		return out, nil
	}
	return m.Tokenize(text, TokenizeOptions{})
}
