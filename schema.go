package llama

import (
	"context"
	"errors"

	schemagbnf "github.com/x/llama/internal/jsonschema"
)

// GrammarFromJSONSchema converts a JSON Schema into a grammar whose
// sentences are exactly the JSON values the schema allows (within what
// llama.cpp's converter covers: types, enum, const, anyOf/oneOf/allOf,
// $ref/$defs, properties and required, additionalProperties, items,
// prefixItems, minItems/maxItems, string lengths, formats and patterns,
// integer bounds). A schema it cannot express is an error naming the part
// (a JSON pointer).
//
// Subschemas may nest at most MaxSchemaDepth levels, and the document
// itself at most 1,000 levels of arrays and objects; conversion takes time
// and makes a grammar roughly linear in the size of the schema. Errors
// match ErrGrammar and ErrInvalid. It gives up when ctx ends, with an
// error matching ErrCanceled and ctx's error.
func GrammarFromJSONSchema(ctx context.Context, schema []byte) (*Grammar, error) {
	g, err := schemagbnf.ToGBNFContext(ctx, schema)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return nil, &Error{Code: CodeCanceled, Op: "json schema", Err: err}
		}
		return nil, &Error{Code: CodeGrammar, Op: "json schema", Err: err, input: true}
	}
	return &Grammar{source: g, root: "root"}, nil
}

// MaxSchemaDepth bounds how deeply the subschemas of a JSON Schema may nest
// for GrammarFromJSONSchema (items of items, properties of properties...).
const MaxSchemaDepth = 128

// The converter's bound (a compile-time check, as for MaxGrammarNesting).
const _ = uint(MaxSchemaDepth-schemagbnf.MaxDepth) + uint(schemagbnf.MaxDepth-MaxSchemaDepth)
