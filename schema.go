package llama

import (
	"encoding/json"

	"github.com/invopop/jsonschema"
	schemagbnf "github.com/x/llama/internal/jsonschema"
)

// GrammarFromJSONSchema converts a JSON Schema into a grammar whose
// sentences are exactly the JSON values the schema allows (within what
// llama.cpp's converter covers: types, enum, const, anyOf/oneOf/allOf,
// $ref/$defs, properties and required, additionalProperties, items,
// prefixItems, minItems/maxItems, string lengths, formats and patterns,
// integer bounds). A schema it cannot express is an error naming the part
// (a JSON pointer).
func GrammarFromJSONSchema(schema []byte) (*Grammar, error) {
	g, err := schemagbnf.ToGBNF(schema)
	if err != nil {
		return nil, &Error{Code: CodeGrammar, Op: "json schema", Err: err}
	}
	return &Grammar{source: g, root: "root"}, nil
}

// SchemaFor returns the JSON Schema of Go type T (through
// github.com/invopop/jsonschema: struct fields by their json tags, required
// unless omitempty, no additional properties), self-contained.
func SchemaFor[T any]() ([]byte, error) {
	r := &jsonschema.Reflector{ExpandedStruct: true, DoNotReference: true}
	var zero T
	s := r.Reflect(&zero)
	s.Version = ""
	s.ID = ""
	b, err := json.Marshal(s)
	if err != nil {
		return nil, &Error{Code: CodeInvalid, Op: "schema", Err: err}
	}
	return b, nil
}

// GrammarFor returns a grammar whose sentences are JSON texts that
// unmarshal into a T: ask the model for a T, and decode what it writes.
func GrammarFor[T any]() (*Grammar, error) {
	s, err := SchemaFor[T]()
	if err != nil {
		return nil, err
	}
	return GrammarFromJSONSchema(s)
}
