package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
)

// TestFlagDevices checks -dev and --list-devices: the listing has
// llama-server's shape (the devices besides the CPU, or "(none)"), the
// names it lists are accepted, none and CPU keep the model on the CPU, and
// an unknown name stops the start.
func TestFlagDevices(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		env     map[string]string
		cpuOnly bool
		draft   bool // the draft model's options
		devices []string
	}{
		{args: []string{"-dev", "none"}, cpuOnly: true},
		{args: []string{"--device", "CPU"}, cpuOnly: true},
		{args: []string{"-dev", "CUDA0,CUDA1"}, devices: []string{"CUDA0", "CUDA1"}},
		{args: []string{"-dev", "CUDA0", "-dev", "none"}, cpuOnly: true},
		{env: map[string]string{"LLAMA_ARG_DEVICE": "Vulkan0"}, devices: []string{"Vulkan0"}},
		{args: []string{"-devd", "CUDA1"}, draft: true, devices: []string{"CUDA1"}},
		{args: []string{"--spec-draft-device", "none"}, draft: true, cpuOnly: true},
	} {
		c, err := parseFlags(tc.args, envOf(tc.env), io.Discard)
		require.NoError(t, err, "%v", tc.args)
		mo := c.opts.ModelOptions
		if tc.draft {
			mo = c.opts.Engine.Speculative.DraftModelOptions
		}
		assert.Equal(t, tc.cpuOnly, mo.CPUOnly, "%v %v", tc.args, tc.env)
		assert.Equal(t, tc.devices, mo.Devices, "%v %v", tc.args, tc.env)
	}
	for _, bad := range []string{"", ",", "CUDA0,"} {
		_, err := parseFlags([]string{"-dev", bad}, noEnv, io.Discard)
		assert.ErrorContains(t, err, "-dev", "%q", bad)
		_, err = parseFlags([]string{"-devd", bad}, noEnv, io.Discard)
		assert.ErrorContains(t, err, "-devd", "%q", bad)
	}

	c, err := parseFlags([]string{"--list-devices"}, noEnv, io.Discard)
	require.NoError(t, err)
	require.True(t, c.listDevices)
	var out bytes.Buffer
	require.NoError(t, printDevices(&out))
	devs, err := llama.Devices()
	require.NoError(t, err)
	var gpus []string // what -dev may name
	for _, d := range devs {
		if d.Type != "cpu" {
			gpus = append(gpus, d.Name)
		}
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	assert.Equal(t, "Available devices:", lines[0])
	if len(gpus) == 0 {
		assert.Equal(t, []string{"  (none)"}, lines[1:])
	}
	for i, g := range gpus {
		assert.True(t, strings.HasPrefix(lines[1+i], "  "+g+": "), lines[1+i])
	}

	model := testenv.Model(t, "stories260K.gguf")
	want, err := greedy(t, model, "-dev", "none")
	require.NoError(t, err)
	got, err := greedy(t, model, "-dev", "CPU")
	require.NoError(t, err)
	assert.Equal(t, want, got)
	for _, g := range gpus {
		_, err := greedy(t, model, "-dev", g)
		assert.NoError(t, err, "the listed device %s is accepted", g)
	}
	_, err = greedy(t, model, "-dev", "NOPE0")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `invalid device "NOPE0"`)
	_, err = greedy(t, model, "-md", model, "--spec-type", "draft-simple", "-devd", "NOPE1")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `invalid device "NOPE1"`, "the draft model's devices are checked too")
}
