package server

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/x/llama/internal/testenv"
)

func TestModelsAddRemove(t *testing.T) {
	dir := t.TempDir()
	src := testenv.Model(t, "stories260K.gguf")
	if err := os.Symlink(src, filepath.Join(dir, "tiny.gguf")); err != nil {
		t.Fatal(err)
	}
	_, router := newTestServer(t, Options{ModelsDir: dir})
	_, single := newTestServer(t, Options{})
	for _, tc := range []struct {
		name, method, url string
		body              any
		code              int
		msg               string
	}{
		{"add: no name", "POST", router.URL + "/models", map[string]any{}, 400, "model must be a non-empty string"},
		{"add: listed", "POST", router.URL + "/models", map[string]any{"model": "tiny"}, 400, "model 'tiny' already exists"},
		{"add: download refused", "POST", router.URL + "/models", map[string]any{"model": "org/repo:Q4_K_M"}, 500, "cannot download model"},
		{"add: not JSON", "POST", router.URL + "/models", "{", 400, "invalid JSON"},
		{"remove: no name", "DELETE", router.URL + "/models", nil, 400, "model must be a non-empty string"},
		{"remove: unknown", "DELETE", router.URL + "/models?model=nope", nil, 500, "model name=nope is not found"},
		{"remove: not from cache", "DELETE", router.URL + "/models?model=tiny", nil, 500, "is not removable (not from cache)"},
		{"single model: add", "POST", single.URL + "/models", map[string]any{"model": "x"}, 404, "File Not Found"},
		{"single model: remove", "DELETE", single.URL + "/models?model=x", nil, 404, "File Not Found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, data := call(t, tc.method, tc.url, tc.body, nil)
			assert.Equal(t, tc.code, code, "%s", data)
			assert.Contains(t, errOf(t, data)["message"], tc.msg)
		})
	}
	// The router with no models at all, as llama-server started without one.
	_, empty := newTestServer(t, Options{ModelsDir: t.TempDir()})
	code, data := call(t, "GET", empty.URL+"/v1/models", nil, nil)
	assert.Equal(t, 200, code)
	assert.JSONEq(t, `{"object":"list","data":[]}`, string(data))
}
