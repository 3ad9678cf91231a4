// Package schema derives a JSON Schema, and the grammar of its JSON
// texts, from a Go type, so that a model can be asked for a value of that
// type and what it writes decoded into one.
//
// The schema comes from github.com/invopop/jsonschema's reflection; the
// grammar from llama.GrammarFromJSONSchema, which takes any schema text.
package schema

import (
	"context"
	"encoding/json"

	"github.com/invopop/jsonschema"

	"github.com/x/llama"
)

// For returns the JSON Schema of Go type T (through
// github.com/invopop/jsonschema: struct fields by their json tags, required
// unless omitempty, no additional properties), self-contained. An error is
// a *llama.Error matching llama.ErrInvalid.
func For[T any]() ([]byte, error) {
	r := &jsonschema.Reflector{ExpandedStruct: true, DoNotReference: true}
	var zero T
	s := r.Reflect(&zero)
	s.Version = ""
	s.ID = ""
	b, err := json.Marshal(s)
	if err != nil {
		return nil, &llama.Error{Code: llama.CodeInvalid, Op: "schema", Err: err}
	}
	return b, nil
}

// GrammarFor returns a grammar whose sentences are JSON texts that
// unmarshal into a T: ask the model for a T, and decode what it writes.
func GrammarFor[T any]() (*llama.Grammar, error) {
	s, err := For[T]()
	if err != nil {
		return nil, err
	}
	return llama.GrammarFromJSONSchema(context.Background(), s)
}
