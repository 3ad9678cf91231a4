package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
)

func TestToolLoop(t *testing.T) {
	path := testenv.Model(t, "stories260K.gguf")
	for _, seed := range []uint32{1, 2} {
		var buf bytes.Buffer
		require.NoError(t, run(context.Background(), &buf, config{model: path, template: "chatml",
			question: "What is the weather in Paris?", seed: seed, threads: 1}))
		out := buf.String()
		m := regexp.MustCompile(`(?m)^call get_weather\((.*)\) -> (.*)$`).FindStringSubmatch(out)
		require.NotNil(t, m, out)
		var args struct {
			City string `json:"city"`
		}
		require.NoError(t, json.Unmarshal([]byte(m[1]), &args), m[1])
		assert.Contains(t, m[2], "temperature_c")
		assert.Regexp(t, `(?m)^assistant: `, out)
	}
	// Without a template, the model is refused with the way to give one.
	err := run(context.Background(), io.Discard, config{model: path, question: "Hi", threads: 1})
	require.ErrorIs(t, err, llama.ErrInvalid)
	assert.Contains(t, err.Error(), "--chat-template-file (session.Options.TemplateFile)")
}
