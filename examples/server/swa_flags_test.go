package main

import (
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/engine"
)

// TestFlagSWA: --swa-full and the context checkpoint options reach the
// engine (zero: llama-server's defaults), and a checkpoint count past the
// limit is an error naming the option.
func TestFlagSWA(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		env       map[string]string
		full      bool
		ckpt, cms int
	}{
		{args: nil},
		{args: []string{"--swa-full"}, full: true},
		{env: map[string]string{"LLAMA_ARG_SWA_FULL": "1"}, full: true},
		{args: []string{"-ctxcp", "4", "-cms", "256"}, ckpt: 4, cms: 256},
		{args: []string{"--swa-checkpoints", "0", "--checkpoint-min-step", "0"}, ckpt: -1, cms: -1},
		{args: []string{"--ctx-checkpoints", "1024"}, ckpt: 1024},
		{env: map[string]string{"LLAMA_ARG_CTX_CHECKPOINTS": "7", "LLAMA_ARG_CHECKPOINT_MIN_SPACING_NT": "9"}, ckpt: 7, cms: 9},
	} {
		c, err := parseFlags(tc.args, envOf(tc.env), io.Discard)
		require.NoError(t, err, "%v %v", tc.args, tc.env)
		e := c.opts.Engine
		assert.Equal(t, tc.full, e.Context.SWAFull, "%v", tc.args)
		assert.Equal(t, tc.ckpt, e.ContextCheckpoints, "%v", tc.args)
		assert.Equal(t, tc.cms, e.CheckpointMinStep, "%v", tc.args)
	}
	for _, args := range [][]string{
		{"--ctx-checkpoints", "1025"}, {"-ctxcp", "-1"}, {"--swa-checkpoints", "many"},
		{"--checkpoint-min-step", "-1"},
	} {
		_, err := parseFlags(args, noEnv, io.Discard)
		if assert.Error(t, err, "%v", args) {
			assert.Contains(t, err.Error(), args[0])
		}
	}
	_, err := parseFlags([]string{"--ctx-checkpoints", "5000"}, noEnv, io.Discard)
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "1024"), "the limit is named: %v", err)
	assert.Equal(t, 1024, engine.MaxContextCheckpoints)
}
