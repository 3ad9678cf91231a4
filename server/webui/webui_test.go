package webui

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFileName(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"/", "index.html"},
		{"", "index.html"},
		{"/index.html", "index.html"},
		{"/app.js", "app.js"},
		{"/sub/", "sub/index.html"},
		{"/sub/a.txt", "sub/a.txt"},
		{"/../a.txt", "a.txt"},
		{"/sub/../../a.txt", "a.txt"},
		{"//a.txt", "a.txt"},
		{"/a\x00.txt", ""},
		{`/..\a.txt`, ""},
	} {
		assert.Equal(t, tc.want, fileName(tc.path), "path %q", tc.path)
	}
}

func TestFiles(t *testing.T) {
	assert.Subset(t, Files(), []string{"index.html", "app.js", "style.css", "favicon.svg"})
}

func TestHandler(t *testing.T) {
	h, err := Handler(Options{})
	require.NoError(t, err)
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{http.MethodGet, "/", http.StatusOK},
		{http.MethodHead, "/app.js", http.StatusOK},
		{http.MethodPost, "/", http.StatusNotFound},
		{http.MethodGet, "/missing.js", http.StatusNotFound},
		{http.MethodGet, "/static/app.js", http.StatusNotFound},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		assert.Equal(t, tc.code, rec.Code, "%s %s", tc.method, tc.path)
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "file.txt")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	for _, bad := range []string{filepath.Join(dir, "missing"), file} {
		_, err := Handler(Options{Dir: bad})
		assert.Error(t, err, bad)
	}
}
