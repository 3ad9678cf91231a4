package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/testenv"
)

func TestAskCharacter(t *testing.T) {
	path := testenv.Model(t, "stories260K.gguf")
	for _, seed := range []uint32{1, 2, 3} {
		c, err := ask[Character](context.Background(), path, "Lily", seed, 1)
		require.NoError(t, err)
		assert.LessOrEqual(t, len(c.Name), 24*6)
		assert.True(t, c.Age >= 1 && c.Age <= 99, "age %d", c.Age)
		assert.LessOrEqual(t, len(c.Friends), 3)
	}
	var buf bytes.Buffer
	require.NoError(t, run(context.Background(), &buf, path, "Lily", 4, 1))
	assert.Contains(t, buf.String(), "Name:")
}
