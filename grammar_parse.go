package llama

import (
	"errors"

	"github.com/x/llama/internal/gbnf"
)

// ParseGrammar parses and checks GBNF text before any use, so that a
// malformed grammar is an error that says where (line and column), never a
// crash. root "" means "root". It accepts what llama.cpp's grammar parser
// accepts, with the same checks (every referenced rule defined, the start
// rule present, no left recursion); token references by name (<name>) are
// checked only when the grammar is used with a model. It also refuses the
// two inputs llama.cpp cannot handle: a NUL byte, and a repetition x{m,n}
// with m > n. The error is an *Error with Code CodeGrammar that wraps a
// *gbnf.Error holding the line and column.
func ParseGrammar(src, root string) (*Grammar, error) {
	if root == "" {
		root = "root"
	}
	if _, err := gbnf.Parse(src, root); err != nil {
		var ge *gbnf.Error
		if errors.As(err, &ge) {
			return nil, &Error{Code: CodeGrammar, Op: "parse grammar", Err: ge}
		}
		return nil, &Error{Code: CodeGrammar, Op: "parse grammar", Err: err}
	}
	return &Grammar{source: src, root: root}, nil
}
