package llama

import (
	"context"
	"errors"
	"fmt"

	"github.com/x/llama/internal/gbnf"
)

// MaxGrammarNesting bounds how deeply parenthesized groups of a GBNF
// grammar may nest. llama.cpp parses groups by recursion on the C stack
// and kills the process with a stack overflow somewhere between 10,000
// and 20,000 levels; deeper grammars are an error matching ErrInvalid
// (and ErrGrammar) instead.
const MaxGrammarNesting = 1000

// The parser's bound is the one documented here (a compile-time check:
// a negative constant does not convert to uint).
const _ = uint(MaxGrammarNesting-gbnf.MaxNesting) + uint(gbnf.MaxNesting-MaxGrammarNesting)

// GrammarError says where GBNF text is malformed: the line and the column
// (from 1; columns count characters, not bytes) and what is wrong. The
// *Error of ParseGrammar wraps it (errors.As finds it).
type GrammarError struct {
	Line, Column int
	Msg          string
}

// Error formats the error as "gbnf: line L, col C: message".
func (e *GrammarError) Error() string {
	return fmt.Sprintf("gbnf: line %d, col %d: %s", e.Line, e.Column, e.Msg)
}

// ParseGrammar parses and checks GBNF text before any use, so that a
// malformed grammar is an error that says where (line and column), never a
// crash. root "" means "root". It accepts what llama.cpp's grammar parser
// accepts, with the same checks (every referenced rule defined, the start
// rule present, no left recursion); token references by name (<name>) are
// checked only when the grammar is used with a model, and so are token ids
// (<[id]>) against the model's vocabulary size. It also refuses what
// llama.cpp cannot handle or could never match: a NUL byte, a repetition
// x{m,n} with m > n, groups nested deeper than MaxGrammarNesting, a
// character U+0000 or above U+10FFFF in a string literal, a reversed range
// such as [z-a], a character class that can match only such
// characters (as [^\x00-\U0010FFFF]), and a grammar so ambiguous that
// llama.cpp's grammar engine would hold hundreds of parse stacks that each
// advance into hundreds more (minutes to hours of work per token, in C,
// where nothing interrupts it; the bound leaves real grammars alone, JSON
// Schemas with thousands of optional properties included). The error is an
// *Error with Code CodeGrammar that wraps a *GrammarError holding the line and column; it
// matches both ErrGrammar and ErrInvalid. Parsing takes time linear in the
// size of src; it gives up when ctx ends, with an error matching
// ErrCanceled and ctx's error.
//
// A parsed Grammar is not parsed again when a chain is built from its
// Sampler (only its token ids are checked against the model), so parsing
// it once, cancellably, is the way to prepare a large grammar.
func ParseGrammar(ctx context.Context, src, root string) (*Grammar, error) {
	if root == "" {
		root = "root"
	}
	g, err := parseGrammar(ctx, src, root, nil)
	if err != nil {
		return nil, err
	}
	return &Grammar{source: src, root: root, parsed: g, maxToken: g.MaxTokenID}, nil
}

// parseGrammar runs the Go parser; with a model it also checks token ids
// and resolves token references by name, as llama.cpp does (the text,
// special text parsed, must be exactly one token).
func parseGrammar(ctx context.Context, src, root string, m *Model) (*gbnf.Grammar, error) {
	opts := gbnf.Options{Root: root}
	if m != nil {
		opts.VocabSize = int(m.nVocb)
		opts.Token = func(text string) (uint32, bool) {
			t, ok := m.singleTokenLocked(text) // under the chain's m.use
			return uint32(t), ok
		}
	}
	g, err := gbnf.ParseContext(ctx, src, opts)
	if err != nil {
		var ge *gbnf.Error
		if errors.As(err, &ge) {
			return nil, &Error{Code: CodeGrammar, Op: "parse grammar", Err: &GrammarError{Line: ge.Line, Column: ge.Col, Msg: ge.Msg}, input: true}
		}
		if ctx.Err() != nil {
			return nil, &Error{Code: CodeCanceled, Op: "parse grammar", Err: err}
		}
		return nil, &Error{Code: CodeGrammar, Op: "parse grammar", Err: err, input: true}
	}
	return g, nil
}
