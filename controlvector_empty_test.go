package llama_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
)

// TestSetControlVectorEmpty: empty data (nil or not) clears the vector; a
// non-nil empty slice passed the size checks and panicked indexing it.
func TestSetControlVectorEmpty(t *testing.T) {
	m := stories(t)
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 64})
	for name, data := range map[string][]float32{"nil": nil, "empty": {}, "empty with capacity": make([]float32, 0, 8)} {
		t.Run(name, func(t *testing.T) {
			require.NotPanics(t, func() { assert.NoError(t, c.SetControlVector(data, 0, 0)) })
		})
	}
}
