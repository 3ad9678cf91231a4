package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/hub/hubtest"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/server"
)

// TestDockerRepo checks -dr/--docker-repo against a fake OCI registry: the
// model is pulled into the cache folder (LLAMA_CACHE) under llama-server's
// file name, once, and served; the flag's environment variable works; a
// missing tag, a blob that does not match its digest and --offline
// without the file fail naming the option.
func TestDockerRepo(t *testing.T) {
	modelPath := testenv.Model(t, "stories260K.gguf")
	model, err := os.ReadFile(modelPath)
	require.NoError(t, err)
	reg := hubtest.NewRegistry(t, map[string]*hubtest.Image{
		"ai/stories:q8":     {GGUF: model},
		"ai/corrupt:latest": {GGUF: model, Digest: hubtest.Digest([]byte("other"))},
	})
	cache := t.TempDir()
	t.Setenv("LLAMA_CACHE", cache)
	source := func(args []string, env map[string]string) (*config, error) {
		c, err := parseFlags(args, envOf(env), io.Discard)
		require.NoError(t, err)
		return c, c.modelSource(context.Background(), io.Discard)
	}

	want := filepath.Join(cache, strings.NewReplacer(":", "_", ".", "_").Replace(reg.Host)+"_ai_stories_q8.gguf")
	c, err := source([]string{"-dr", reg.Host + "/ai/stories:q8", "-c", "256", "-np", "1", "-t", "1", "-tb", "1"}, nil)
	require.NoError(t, err)
	assert.Equal(t, want, c.opts.Model)
	got, err := os.ReadFile(c.opts.Model)
	require.NoError(t, err)
	assert.Equal(t, model, got)
	n := len(reg.Requests())

	c2, err := source(nil, map[string]string{"LLAMA_ARG_DOCKER_REPO": reg.Host + "/stories:q8", "LLAMA_ARG_OFFLINE": "1"})
	require.NoError(t, err, "the default namespace is ai/; offline, from the cache")
	assert.Equal(t, want, c2.opts.Model)
	assert.Len(t, reg.Requests(), n, "a model already pulled is not pulled again")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--docker-repo", reg.Host + "/ai/stories:q4"}, "MANIFEST_UNKNOWN"},
		{[]string{"--docker-repo", reg.Host + "/ai/corrupt"}, "checksum mismatch"},
		{[]string{"--docker-repo", reg.Host + "/ai/other", "--offline"}, "offline"},
		{[]string{"--docker-repo", "Not A Reference"}, "invalid OCI reference"},
	} {
		_, err := source(tc.args, nil)
		require.Error(t, err, "%v", tc.args)
		assert.Contains(t, err.Error(), tc.want)
		assert.Contains(t, err.Error(), "--docker-repo", "names the option")
	}

	srv, err := server.New(context.Background(), c.opts)
	require.NoError(t, err)
	defer srv.Close()
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/completion", strings.NewReader(`{"prompt":"Once upon a time","n_predict":8}`)))
	require.Equal(t, 200, rec.Code, rec.Body.String())
	var out struct {
		TokensPredicted int `json:"tokens_predicted"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
	assert.Equal(t, 8, out.TokensPredicted)
}
