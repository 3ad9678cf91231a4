package llama_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/chat"
)

// structuredSchemas are ten schemas of different shapes for grammar-
// constrained generation with a model that knows nothing of JSON.
var structuredSchemas = []string{
	`{"type":"object","properties":{"name":{"type":"string","maxLength":20},"age":{"type":"integer","minimum":0,"maximum":120}},"required":["name","age"],"additionalProperties":false}`,
	`{"type":"array","items":{"type":"integer","minimum":-5,"maximum":5},"minItems":2,"maxItems":4}`,
	`{"enum":["red","green","blue"]}`,
	`{"type":"object","properties":{"ok":{"type":"boolean"},"note":{"type":["string","null"],"maxLength":10}},"required":["ok","note"],"additionalProperties":false}`,
	`{"type":"string","format":"date"}`,
	`{"type":"string","pattern":"^[A-Z][a-z]{2,5}-[0-9]{3}$"}`,
	`{"type":"object","properties":{"items":{"type":"array","items":{"$ref":"#/$defs/item"},"maxItems":2}},"required":["items"],"additionalProperties":false,"$defs":{"item":{"type":"object","properties":{"id":{"type":"integer","minimum":1,"maximum":99},"tag":{"const":"x"}},"required":["id","tag"],"additionalProperties":false}}}`,
	`{"anyOf":[{"type":"integer","minimum":10,"maximum":20},{"type":"string","minLength":1,"maxLength":3}]}`,
	`{"type":"array","prefixItems":[{"type":"string","maxLength":5},{"type":"number"},{"type":"boolean"}],"items":false}`,
	`{"type":"string","format":"uuid"}`,
}

func compileSchema(t *testing.T, i int, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	url := fmt.Sprintf("mem://schema%d.json", i)
	require.NoError(t, c.AddResource(url, doc))
	s, err := c.Compile(url)
	require.NoError(t, err)
	return s
}

func validate(t *testing.T, s *jsonschema.Schema, text string) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	require.NoError(t, err, "output is not JSON: %q", text)
	assert.NoError(t, s.Validate(v), "output %s", text)
}

// TestStructuredOutputAcrossSeeds generates under the grammar of each
// schema with several seeds and checks every output with an independent
// JSON Schema validator.
func TestStructuredOutputAcrossSeeds(t *testing.T) {
	m := stories(t)
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 512})
	for i, schema := range structuredSchemas {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			validator := compileSchema(t, i, schema)
			g, err := llama.GrammarFromJSONSchema(context.Background(), []byte(schema))
			require.NoError(t, err)
			for _, seed := range []uint32{1, 2, 3, 4} {
				s, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, g.Sampler(), llama.TopK(40), llama.Temp(1.0), llama.Dist(seed))
				require.NoError(t, err)
				out := generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 300, Sampler: s})
				s.Close()
				validate(t, validator, out)
			}
		})
	}
}

// TestRequiredToolCall constrains stories260K to a required tool call in
// the Hermes/Qwen format and checks the parsed call against the tool's
// parameter schema, across seeds.
func TestRequiredToolCall(t *testing.T) {
	m := stories(t)
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 512})
	params := `{"type":"object","properties":{"city":{"type":"string","maxLength":12},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","days"],"additionalProperties":false}`
	tools := []chat.Tool{{Name: "get_weather", Description: "Weather forecast", Parameters: json.RawMessage(params)}}
	validator := compileSchema(t, 100, params)
	for _, f := range []chat.Format{chat.FormatHermes2Pro, chat.FormatGeneric, chat.FormatMistralNemo} {
		tg, err := chat.BuildToolGrammar(f, tools, chat.ToolChoice{Mode: "required"}, false)
		require.NoError(t, err)
		require.False(t, tg.Lazy)
		for _, seed := range []uint32{7, 8, 9} {
			s, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, mustGrammar(t, tg.Grammar).Sampler(), llama.TopK(40), llama.Temp(1), llama.Dist(seed))
			require.NoError(t, err)
			out := generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 300, Sampler: s, RenderSpecial: true})
			s.Close()
			msg, err := chat.Parse(out, chat.ParseOptions{Format: f, ParseToolCalls: true})
			require.NoError(t, err, "%s output %q", f, out)
			require.Len(t, msg.ToolCalls, 1, "%s output %q", f, out)
			assert.Equal(t, "get_weather", msg.ToolCalls[0].Name)
			validate(t, validator, msg.ToolCalls[0].Arguments)
			assert.True(t, json.Valid(bytes.TrimSpace([]byte(msg.ToolCalls[0].Arguments))))
		}
	}
}
