package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/x/llama/engine"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
)

func TestParseFlags(t *testing.T) {
	env := map[string]string{"LLAMA_ARG_CTX_SIZE": "4096", "LLAMA_API_KEY": "k1"}
	getenv := func(k string) string { return env[k] }
	slotDir := t.TempDir()
	keyFile := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(keyFile, []byte("# comment\nk2\n\nk3\n"), 0o600))
	c, err := parseFlags([]string{"-m", "model.gguf", "-a", "tiny", "-c", "2048", "-np", "8", "-b", "1024", "-ub", "256",
		"-t", "2", "-n", "64", "--host", "0.0.0.0", "--port=9090", "--api-key-file", keyFile, "--metrics", "--no-slots", "--props",
		"--slot-save-path", slotDir, "--lora-scaled", "a.gguf:0.5,b.gguf:2", "--lora", "c.gguf", "--chat-template", "chatml",
		"--reasoning-format", "deepseek", "--cors-origins", "http://x,http://y", "--sleep-idle-seconds", "30", "-fa", "off",
		"-ctk", "q8_0", "-ctv", "q8_0", "--context-shift", "--cache-reuse", "256", "-to", "60", "--embedding", "--pooling", "mean",
		"-ngl", "0"}, getenv, io.Discard)
	require.NoError(t, err)
	o := c.opts
	assert.Equal(t, "model.gguf", o.Model)
	assert.Equal(t, "tiny", o.Alias)
	assert.Equal(t, 2048, o.Engine.Context.ContextSize, "the command line overrides the environment")
	assert.Equal(t, 8, o.Engine.Parallel)
	assert.Equal(t, 1024, o.Engine.Context.BatchSize)
	assert.Equal(t, 256, o.Engine.Context.UBatchSize)
	assert.Equal(t, 2, o.Engine.Context.Threads)
	assert.Equal(t, 64, o.NPredict)
	assert.Equal(t, "0.0.0.0", c.host)
	assert.Equal(t, 9090, c.port)
	assert.Equal(t, []string{"k1", "k2", "k3"}, o.APIKeys)
	assert.True(t, o.Metrics)
	assert.False(t, o.Slots)
	assert.True(t, o.PropsEndpoint)
	assert.Equal(t, slotDir, o.SlotSavePath)
	assert.Equal(t, []engine.AdapterSpec{{Path: "a.gguf", Scale: 0.5}, {Path: "b.gguf", Scale: 2}, {Path: "c.gguf", Scale: 1}}, o.Engine.Adapters)
	assert.Equal(t, "chatml", o.ChatTemplate)
	assert.Equal(t, "deepseek", o.ReasoningFormat)
	assert.Equal(t, []string{"http://x", "http://y"}, o.CORSOrigins)
	assert.Equal(t, 30, o.SleepIdleSeconds)
	assert.Equal(t, llama.FlashAttentionOff, o.Engine.Context.FlashAttention)
	assert.Equal(t, "q8_0", o.Engine.Context.TypeK)
	assert.True(t, o.Engine.ContextShift)
	assert.Equal(t, 256, o.Engine.CacheReuse)
	assert.Equal(t, 60*time.Second, c.timeout)
	assert.Equal(t, 60*time.Second, o.WriteTimeout, "-to bounds each write")
	assert.True(t, o.Engine.Embedding)
	assert.Equal(t, llama.PoolingMean, o.Engine.Context.Pooling)
	assert.True(t, o.ModelOptions.CPUOnly)

	// llama-server's defaults.
	c, err = parseFlags([]string{"-m", "x.gguf"}, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", c.host)
	assert.Equal(t, 8080, c.port)
	assert.Equal(t, 4, c.opts.Engine.Parallel, "-np -1 (auto) means 4 slots")
	assert.True(t, c.opts.Engine.Context.KVUnified)
	assert.True(t, c.opts.Slots)
	assert.Equal(t, -1, c.opts.NPredict)
	assert.Equal(t, 4, c.opts.ModelsMax)
	assert.Equal(t, 3600*time.Second, c.timeout)
	assert.Equal(t, 3600*time.Second, c.opts.WriteTimeout)

	for _, bad := range [][]string{{"-m"}, {"-m", "x", "--nope"}, {"-m", "x", "-c", "many"}, {"-m", "x", "-fa", "maybe"},
		{"-m", "x", "--lora-scaled", "nocolon"}, {"-m", "x", "--pooling", "max"}, {"-m", "x", "--metrics=1"}} {
		_, err := parseFlags(bad, func(string) string { return "" }, io.Discard)
		assert.Error(t, err, "%v", bad)
	}
	var help bytes.Buffer
	_, err = parseFlags([]string{"--help"}, func(string) string { return "" }, &help)
	assert.ErrorIs(t, err, errHelp)
	assert.Contains(t, help.String(), "--ctx-size")
}

// TestBinary builds and runs the server binary as a user would, talks to
// it over HTTP, and stops it with SIGTERM.
func TestBinary(t *testing.T) {
	model := testenv.Model(t, "stories260K.gguf")
	srv := startServer(t, buildServer(t), "-m", model, "-c", "1024", "-np", "2", "-t", "1", "--metrics", "--api-key", "secret", "--reuse-port", "--temp", "0.5", "-cb")
	base := srv.base
	resp, err := http.Get(base + "/health")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	post := func(key, body string) (*http.Response, []byte) {
		req, _ := http.NewRequest("POST", base+"/completion", strings.NewReader(body))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	resp, _ = post("", `{"prompt":"Once upon a time","n_predict":8}`)
	assert.Equal(t, 401, resp.StatusCode)
	resp, b := post("secret", `{"prompt":"Once upon a time","n_predict":16,"temperature":0}`)
	require.Equal(t, 200, resp.StatusCode, "%s", b)
	var r struct {
		Content string `json:"content"`
	}
	require.NoError(t, json.Unmarshal(b, &r))
	assert.True(t, strings.HasPrefix(r.Content, ", there was a little girl named Lily"), r.Content)

	assert.NoError(t, srv.stop(), "graceful exit on SIGTERM: %s", srv.logs.String())
	assert.Contains(t, srv.logs.String(), "shutting down")
}

// TestStartupWarnings: router mode and a listener open beyond the
// loopback without an API key are warned about at start.
func TestStartupWarnings(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		network string
		want    []string
	}{
		{"defaults", []string{"-m", "x.gguf"}, "tcp", nil},
		{"all interfaces, no key", []string{"-m", "x.gguf", "--host", "0.0.0.0"}, "tcp", []string{"without an API key"}},
		{"ipv6 any, no key", []string{"-m", "x.gguf", "--host", "::"}, "tcp", []string{"without an API key"}},
		{"all interfaces with a key", []string{"-m", "x.gguf", "--host", "0.0.0.0", "--api-key", "k"}, "tcp", nil},
		{"ipv6 loopback", []string{"-m", "x.gguf", "--host", "::1"}, "tcp", nil},
		{"localhost", []string{"-m", "x.gguf", "--host", "localhost"}, "tcp", nil},
		{"unix socket", []string{"-m", "x.gguf", "--host", "/tmp/s.sock"}, "unix", nil},
		{"router mode", []string{"--models-dir", "/models"}, "tcp", []string{"router mode"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseFlags(tc.args, func(string) string { return "" }, io.Discard)
			require.NoError(t, err)
			got := c.startupWarnings(tc.network)
			require.Len(t, got, len(tc.want), "%q", got)
			for i, w := range tc.want {
				assert.Contains(t, got[i], w)
			}
		})
	}
}
