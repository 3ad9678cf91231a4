package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/testenv"
)

func TestToolLoop(t *testing.T) {
	path := testenv.Model(t, "stories260K.gguf")
	for _, seed := range []uint32{1, 2} {
		var buf bytes.Buffer
		require.NoError(t, run(context.Background(), &buf, path, "What is the weather in Paris?", seed, 1))
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
}
