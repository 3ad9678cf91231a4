package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/testenv"
)

// TestModelURL checks --model-url and --mmproj-url: the file is
// downloaded into the cache folder (or the file -m/-mm names) once and
// then used from there, a split model's parts all come, --offline never
// downloads, and the server serves the downloaded model.
func TestModelURL(t *testing.T) {
	modelPath := testenv.Model(t, "stories260K.gguf")
	model, err := os.ReadFile(modelPath)
	require.NoError(t, err)
	files := map[string][]byte{
		"/m/tiny.gguf": model, "/m/proj.gguf": []byte("projector"),
		"/s/big-00001-of-00002.gguf": []byte("part1"), "/s/big-00002-of-00002.gguf": []byte("part2"),
	}
	var gets atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gets.Add(1)
		b, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	}))
	defer ts.Close()
	cache := t.TempDir()
	t.Setenv("LLAMA_CACHE", cache)
	source := func(args ...string) (*config, error) {
		c, err := parseFlags(args, noEnv, io.Discard)
		require.NoError(t, err)
		return c, c.modelSource(context.Background(), io.Discard)
	}

	c, err := source("--model-url", ts.URL+"/m/tiny.gguf?download=true", "--mmproj-url", ts.URL+"/m/proj.gguf")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(cache, "tiny.gguf"), c.opts.Model)
	assert.Equal(t, filepath.Join(cache, "proj.gguf"), c.opts.Multimodal.Projector)
	got, err := os.ReadFile(c.opts.Model)
	require.NoError(t, err)
	assert.Equal(t, model, got)
	assert.EqualValues(t, 2, gets.Load())

	_, err = source("--model-url", ts.URL+"/m/tiny.gguf", "--offline")
	require.NoError(t, err, "offline from the cache")
	assert.EqualValues(t, 2, gets.Load(), "a file already there is not downloaded again")

	dst := filepath.Join(t.TempDir(), "mine.gguf")
	c, err = source("-m", dst, "-mu", ts.URL+"/m/tiny.gguf")
	require.NoError(t, err)
	assert.Equal(t, dst, c.opts.Model, "-m names the file")
	assert.FileExists(t, dst)

	c, err = source("--model-url", ts.URL+"/s/big-00001-of-00002.gguf")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(cache, "big-00001-of-00002.gguf"), c.opts.Model)
	part2, err := os.ReadFile(filepath.Join(cache, "big-00002-of-00002.gguf"))
	require.NoError(t, err)
	assert.Equal(t, "part2", string(part2), "every part comes")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--model-url", ts.URL + "/m/other.gguf", "--offline"}, "--offline"},
		{[]string{"--model-url", ts.URL + "/m/missing.gguf"}, "404"},
		{[]string{"--model-url", "ftp://host/m.gguf"}, "not an http(s) URL"},
		{[]string{"--mmproj-url", ts.URL + "/"}, "does not name a file"},
	} {
		_, err := source(tc.args...)
		require.Error(t, err, "%v", tc.args)
		assert.Contains(t, err.Error(), tc.want)
		assert.Contains(t, err.Error(), tc.args[0], "names the option")
	}
	c, err = source("--mmproj-url", ts.URL+"/m/proj.gguf", "--no-mmproj")
	require.NoError(t, err)
	assert.Empty(t, c.opts.Multimodal.Projector, "--no-mmproj: nothing downloaded or used")

	c, err = source("--model-url", ts.URL+"/m/tiny.gguf", "-c", "256", "-np", "1", "-t", "1", "-tb", "1")
	require.NoError(t, err)
	assert.Contains(t, serveCompletion(t, c.opts, `{"prompt":"Once upon a time","n_predict":8,"temperature":0}`).String(), "there was a little girl")
}
