package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/hub/hubtest"
	"github.com/x/llama/internal/testenv"
)

// TestHFRepo builds the chat command and runs it with -hf against a fake
// hub on 127.0.0.1 serving stories260K: the first run downloads with a
// progress bar and prints the greedy story; later runs use the cache, with
// --offline or with the hub gone. LLAMA_CACHE points at the model cache
// only: the library is still found in its own cache.
func TestHFRepo(t *testing.T) {
	model, err := os.ReadFile(testenv.Model(t, "stories260K.gguf"))
	require.NoError(t, err)
	h := hubtest.New(t, map[string]*hubtest.Repo{
		"tiny/stories": {Files: map[string][]byte{"stories260K-Q8_0.gguf": model, "stories260K-F32.gguf": model}},
		"tiny/gated":   {Files: map[string][]byte{"stories260K-Q4_K_M.gguf": model}, Gated: true},
	})
	bin := filepath.Join(t.TempDir(), "chat")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	cache := t.TempDir()
	const story = "Once upon a time, there was a little girl"
	for _, tc := range []struct {
		name     string
		args     []string
		env      []string
		stop     bool   // stop the hub before this run
		download string // the file a progress bar must show; "" for none
		fail     string // a text of the error, when the run must fail
	}{
		{name: "download", args: []string{"-hf", "tiny/stories"}, download: "stories260K-Q8_0.gguf"},
		// The F32 file has the Q8_0 file's contents: its blob is cached already.
		{name: "quant and HF_ENDPOINT", args: []string{"--hf-repo", "tiny/stories:f32"}, env: []string{"MODEL_ENDPOINT=", "HF_ENDPOINT=" + h.URL}},
		{name: "file", args: []string{"-hf", "tiny/stories", "-hff", "stories260K-F32.gguf"}},
		{name: "gated without token", args: []string{"-hf", "tiny/gated"}, fail: "401"},
		{name: "gated with -hft", args: []string{"-hf", "tiny/gated", "-hft", hubtest.Token}, download: "stories260K-Q4_K_M.gguf"},
		{name: "gated with HF_TOKEN", args: []string{"-hf", "tiny/gated"}, env: []string{"HF_TOKEN=" + hubtest.Token}},
		{name: "offline from cache", args: []string{"-hf", "tiny/stories", "--offline"}, stop: true},
		{name: "hub gone, cache used", args: []string{"-hf", "tiny/stories"}},
		{name: "offline, not cached", args: []string{"-hf", "tiny/other", "--offline"}, fail: "offline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.stop {
				h.Close()
			}
			cmd := exec.Command(bin, append(tc.args, "-p", "Once upon a time", "-n", "8", "--temp", "0", "-t", "1")...)
			cmd.Env = append(os.Environ(), "LLAMA_CACHE="+cache, "MODEL_ENDPOINT="+h.URL, "HF_TOKEN=", "HF_HUB_OFFLINE=", "LLAMA_ARG_OFFLINE=")
			cmd.Env = append(cmd.Env, tc.env...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if tc.fail != "" {
				require.Error(t, err)
				assert.Contains(t, stderr.String(), tc.fail)
				return
			}
			require.NoError(t, err, "stderr: %s", stderr.String())
			assert.True(t, strings.HasPrefix(stdout.String(), story), stdout.String())
			if tc.download != "" {
				assert.Contains(t, stderr.String(), "Downloading "+tc.download)
				assert.Contains(t, stderr.String(), "100%")
			} else {
				assert.NotContains(t, stderr.String(), "Downloading")
			}
		})
	}
}
