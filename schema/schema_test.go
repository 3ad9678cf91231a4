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
