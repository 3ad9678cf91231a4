package llama_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
)

type schemaCase struct {
	Name    string          `json:"name"`
	Schema  json.RawMessage `json:"schema"`
	Valid   []string        `json:"valid"`
	Invalid []string        `json:"invalid"`
}

// TestSchemaGrammarsWithLlamaEngine converts every schema of the converter's
// case table and checks, with llama.cpp's own grammar engine through the
// library, that the grammar accepts each valid instance and rejects each
// invalid one.
func TestSchemaGrammarsWithLlamaEngine(t *testing.T) {
	m := stories(t)
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "internal", "jsonschema", "testdata", "cases.json"))
	require.NoError(t, err)
	var cases []schemaCase
	require.NoError(t, json.Unmarshal(b, &cases))
	require.GreaterOrEqual(t, len(cases), 40)
	checked := 0
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			g, err := llama.GrammarFromJSONSchema(context.Background(), tc.Schema)
			require.NoError(t, err)
			for _, v := range tc.Valid {
				ok, err := g.Match(m, v)
				require.NoError(t, err)
				assert.True(t, ok, "valid instance rejected: %s\n%s", v, g.Source())
				checked++
			}
			for _, v := range tc.Invalid {
				ok, err := g.Match(m, v)
				require.NoError(t, err)
				assert.False(t, ok, "invalid instance accepted: %s", v)
				checked++
			}
		})
	}
	t.Logf("%d schemas, %d instances checked by llama.cpp's grammar engine", len(cases), checked)
}

// TestGrammarFromJSONSchemaLookahead: a pattern the converter cannot
// express (a lookahead) is a grammar error, not a grammar.
func TestGrammarFromJSONSchemaLookahead(t *testing.T) {
	_, err := llama.GrammarFromJSONSchema(context.Background(), []byte(`{"type": "string", "pattern": "(?=x)"}`))
	assert.ErrorIs(t, err, llama.ErrGrammar)
}
