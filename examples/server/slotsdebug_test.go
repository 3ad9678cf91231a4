package main

import (
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSlotsDebugEnv: LLAMA_SERVER_SLOTS_DEBUG set to a non-zero number
// shows more of each slot in /slots, as llama-server.
func TestSlotsDebugEnv(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "1": true, "2": true, "yes": false} {
		c, err := parseFlags(nil, envOf(map[string]string{"LLAMA_SERVER_SLOTS_DEBUG": v}), io.Discard)
		require.NoError(t, err)
		assert.Equal(t, want, c.opts.SlotsDebug, "%q", v)
	}
}
