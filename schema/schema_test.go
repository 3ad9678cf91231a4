package schema_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/schema"
)

// TestFor reads the schema of a struct back: fields by their json tags,
// required unless omitempty, nothing else allowed.
func TestFor(t *testing.T) {
	type Pet struct {
		Name string   `json:"name"`
		Age  int      `json:"age"`
		Tags []string `json:"tags,omitempty"`
	}
	b, err := schema.For[Pet]()
	require.NoError(t, err)
	var s struct {
		Type                 string                    `json:"type"`
		Properties           map[string]map[string]any `json:"properties"`
		Required             []string                  `json:"required"`
		AdditionalProperties *bool                     `json:"additionalProperties"`
		Schema               string                    `json:"$schema"`
		ID                   string                    `json:"$id"`
	}
	require.NoError(t, json.Unmarshal(b, &s), string(b))
	assert.Equal(t, "object", s.Type)
	for field, typ := range map[string]string{"name": "string", "age": "integer", "tags": "array"} {
		assert.Equal(t, typ, s.Properties[field]["type"], field)
	}
	assert.ElementsMatch(t, []string{"name", "age"}, s.Required)
	require.NotNil(t, s.AdditionalProperties)
	assert.False(t, *s.AdditionalProperties)
	assert.Empty(t, s.Schema, "self-contained: no $schema")
	assert.Empty(t, s.ID, "self-contained: no $id")
}

func TestGrammarFor(t *testing.T) {
	type Pet struct {
		Name string   `json:"name"`
		Age  int      `json:"age"`
		Tags []string `json:"tags,omitempty"`
	}
	m, err := llama.LoadModel(context.Background(), testenv.Model(t, "stories260K.gguf"), llama.ModelOptions{VocabOnly: true})
	require.NoError(t, err)
	defer m.Close()
	g, err := schema.GrammarFor[Pet]()
	require.NoError(t, err)
	for _, tt := range []struct {
		text string
		ok   bool
	}{
		{`{"name": "Rex", "age": 3}`, true},
		{`{"name":"Rex","age":3,"tags":["a","b"]}`, true},
		{`{"name": "Rex"}`, false},
		{`{"name": "Rex", "age": "3"}`, false},
		{`{"age": 3, "name": "Rex"}`, false},
	} {
		ok, err := g.Match(m, tt.text)
		require.NoError(t, err)
		assert.Equal(t, tt.ok, ok, tt.text)
	}
}

// TestForRecursive: a recursive type (a tree) gets a schema with $defs
// and $ref, and a grammar that accepts its nested values; before, the
// reflection recursed until the stack overflowed, which ends the process.
func TestForRecursive(t *testing.T) {
	type Node struct {
		Name     string  `json:"name"`
		Children []*Node `json:"children,omitempty"`
	}
	b, err := schema.For[Node]()
	require.NoError(t, err)
	assert.Contains(t, string(b), `"$ref"`)
	assert.Contains(t, string(b), `"$defs"`)
	m, err := llama.LoadModel(context.Background(), testenv.Model(t, "stories260K.gguf"), llama.ModelOptions{VocabOnly: true})
	require.NoError(t, err)
	defer m.Close()
	g, err := schema.GrammarFor[Node]()
	require.NoError(t, err)
	for _, tt := range []struct {
		text string
		ok   bool
	}{
		{`{"name":"a"}`, true},
		{`{"name":"a","children":[{"name":"b","children":[{"name":"c"}]},{"name":"d"}]}`, true},
		{`{"name":"a","children":[{"children":[]}]}`, false},
	} {
		ok, err := g.Match(m, tt.text)
		require.NoError(t, err)
		assert.Equal(t, tt.ok, ok, tt.text)
	}
	var v Node
	require.NoError(t, json.Unmarshal([]byte(`{"name":"a","children":[{"name":"b"}]}`), &v))
}

// TestForUnsupported: a field JSON cannot hold is an ErrInvalid naming
// it (it was a panic); skipped fields do not count.
func TestForUnsupported(t *testing.T) {
	type Inner struct {
		Done chan int `json:"done"`
	}
	type Skips struct {
		Name string `json:"name"`
		F    func() `json:"-"`
		//lint:ignore U1000 an unexported field: JSON does not write it
		c chan int
		M map[string]int64 `json:"m"`
	}
	_, err := schema.For[Skips]()
	require.NoError(t, err)
	for name, f := range map[string]func() ([]byte, error){
		"chan":           schema.For[struct{ C chan int }],
		"func":           schema.For[struct{ F func() }],
		"complex":        schema.For[struct{ Z complex128 }],
		"nested":         schema.For[struct{ In []Inner }],
		"map of funcs":   schema.For[map[string]func()],
		"top-level chan": schema.For[chan int],
	} {
		_, err := f()
		assert.ErrorIs(t, err, llama.ErrInvalid, name)
		assert.ErrorContains(t, err, "JSON cannot hold", name)
	}
	_, err = schema.For[struct{ In []Inner }]()
	assert.ErrorContains(t, err, "In.Done")
}

type mapTree map[string]mapTree

type listNode struct {
	Name string   `json:"name"`
	Next nodeList `json:"next"`
}

type nodeList []listNode

type genericNode[T any] struct {
	Value T               `json:"value"`
	Next  *genericNode[T] `json:"next,omitempty"`
}

type item struct {
	N int `json:"n"`
}

// TestForRecursion: recursion through a named slice back to a struct,
// and through a generic type, gets references the converter resolves
// (the generic's package path kept out of the $defs name); recursion
// through no struct at all (a map of itself) is an ErrInvalid, where the
// reflection recursed until the stack overflowed.
func TestForRecursion(t *testing.T) {
	for name, f := range map[string]func() (*llama.Grammar, error){
		"slice type":  schema.GrammarFor[nodeList],
		"struct":      schema.GrammarFor[listNode],
		"generic":     schema.GrammarFor[genericNode[item]],
		"in a struct": schema.GrammarFor[struct{ Head genericNode[item] }],
	} {
		_, err := f()
		assert.NoError(t, err, name)
	}
	for name, f := range map[string]func() ([]byte, error){
		"map of itself":      schema.For[mapTree],
		"map in a struct":    schema.For[struct{ Kids mapTree }],
		"pointer to a map":   schema.For[*mapTree],
		"slice of such maps": schema.For[[]mapTree],
	} {
		_, err := f()
		assert.ErrorIs(t, err, llama.ErrInvalid, name)
		assert.ErrorContains(t, err, "through no struct", name)
	}
}
