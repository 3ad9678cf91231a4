package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/server/webui"
)

// get fetches url with an optional Bearer key and returns the status, the
// headers and the body.
func get(t *testing.T, url, key string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(b)
}

// assertNotFound checks llama-server's JSON 404.
func assertNotFound(t *testing.T, code int, body string) {
	t.Helper()
	assert.Equal(t, http.StatusNotFound, code)
	var e struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &e), body)
	assert.Equal(t, "not_found_error", e.Error.Type)
}

func TestUIServesPage(t *testing.T) {
	_, ts := newTestServer(t, Options{APIKeys: []string{"sk-ui"}})

	for _, tc := range []struct {
		name, base, path, ctype, contains string
	}{
		{"root", ts.URL, "/", "text/html; charset=utf-8", `<script src="app.js"`},
		{"index", ts.URL, "/index.html", "text/html; charset=utf-8", `<link rel="stylesheet" href="style.css">`},
		{"script", ts.URL, "/app.js", "text/javascript; charset=utf-8", "renderMarkdown"},
		{"style", ts.URL, "/style.css", "text/css; charset=utf-8", `html[data-theme="dark"]`},
		{"icon", ts.URL, "/favicon.svg", "image/svg+xml", "<svg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// No API key: the page is public, as llama-server's UI.
			code, h, body := get(t, tc.base+tc.path, "")
			require.Equal(t, http.StatusOK, code, body)
			assert.Equal(t, tc.ctype, h.Get("Content-Type"))
			assert.Equal(t, "nosniff", h.Get("X-Content-Type-Options"))
			assert.NotEmpty(t, h.Get("ETag"))
			assert.Contains(t, body, tc.contains)
			if strings.HasPrefix(tc.ctype, "text/html") {
				assert.Contains(t, h.Get("Content-Security-Policy"), "script-src 'self'")
			}
		})
	}

	t.Run("api still needs the key", func(t *testing.T) {
		code, _, _ := get(t, ts.URL+"/props", "")
		assert.Equal(t, http.StatusUnauthorized, code)
		code, _, _ = get(t, ts.URL+"/props", "sk-ui")
		assert.Equal(t, http.StatusOK, code)
	})
	t.Run("unknown paths stay JSON 404", func(t *testing.T) {
		for _, p := range []string{"/nope.js", "/static/app.js", "/sub/", "/..%2fui.go"} {
			code, _, body := get(t, ts.URL+p, "sk-ui")
			assertNotFound(t, code, body)
			// As llama-server's: without the key, only the page's own
			// paths are public.
			code, _, _ = get(t, ts.URL+p, "")
			assert.Equal(t, http.StatusUnauthorized, code, p)
		}
	})
	t.Run("etag revalidation", func(t *testing.T) {
		_, h, _ := get(t, ts.URL+"/app.js", "")
		req, err := http.NewRequest(http.MethodGet, ts.URL+"/app.js", nil)
		require.NoError(t, err)
		req.Header.Set("If-None-Match", h.Get("ETag"))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusNotModified, resp.StatusCode)
	})
	t.Run("props report the ui", func(t *testing.T) {
		code, _, body := get(t, ts.URL+"/props", "sk-ui")
		require.Equal(t, http.StatusOK, code)
		var p struct {
			UI         bool            `json:"ui"`
			UISettings json.RawMessage `json:"ui_settings"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &p))
		assert.True(t, p.UI)
		assert.JSONEq(t, `{}`, string(p.UISettings))
	})
}

func TestUIUnderPrefix(t *testing.T) {
	s, _ := newTestServer(t, Options{})
	mux := http.NewServeMux()
	mux.Handle("/llm/", http.StripPrefix("/llm", s.Handler()))
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)

	code, h, body := get(t, ts.URL+"/llm/", "")
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "text/html; charset=utf-8", h.Get("Content-Type"))
	// Every URL of the page is relative, so it resolves under the prefix.
	for _, attr := range []string{`src="`, `href="`} {
		for _, part := range strings.Split(body, attr)[1:] {
			assert.False(t, strings.HasPrefix(part, "/"), "absolute URL %s%s", attr, part[:min(20, len(part))])
		}
	}
	for _, f := range webui.Files() {
		code, _, _ := get(t, ts.URL+"/llm/"+f, "")
		assert.Equal(t, http.StatusOK, code, f)
	}
	js, err := os.ReadFile(filepath.Join("webui", "static", "app.js"))
	require.NoError(t, err)
	for _, call := range []string{`api('/`, `fetch('/`, `api("/`, `fetch("/`} {
		assert.NotContains(t, string(js), call, "API calls must use relative URLs")
	}
	code, _, _ = get(t, ts.URL+"/llm/v1/models", "")
	assert.Equal(t, http.StatusOK, code)
}

func TestUIOptions(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "index.html"), []byte("<p>custom</p>"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "a.txt"), []byte("text a"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "a #b"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(t.TempDir(), "secret.txt"), []byte("secret"), 0o644))
	cfgFile := filepath.Join(t.TempDir(), "ui.json")
	require.NoError(t, os.WriteFile(cfgFile, []byte(`{"theme": "dark", "temperature": 0.5}`), 0o644))

	t.Run("no-ui", func(t *testing.T) {
		_, ts := newTestServer(t, Options{NoUI: true})
		for _, p := range []string{"/", "/index.html", "/app.js"} {
			code, _, body := get(t, ts.URL+p, "")
			assertNotFound(t, code, body)
		}
		_, _, body := get(t, ts.URL+"/props", "")
		assert.Contains(t, body, `"ui":false`)
	})
	t.Run("path", func(t *testing.T) {
		_, ts := newTestServer(t, Options{UIPath: dir})
		for _, tc := range []struct{ path, body, ctype string }{
			{"/", "<p>custom</p>", "text/html; charset=utf-8"},
			{"/sub/a.txt", "text a", "text/plain; charset=utf-8"},
		} {
			code, h, body := get(t, ts.URL+tc.path, "")
			assert.Equal(t, http.StatusOK, code, tc.path)
			assert.Equal(t, tc.body, body)
			assert.Equal(t, tc.ctype, h.Get("Content-Type"))
			// As llama-server serves --path: no policy of the built-in
			// page (llama.cpp's own UI has inline scripts and styles), a
			// weak validator from the file's time and size.
			for _, k := range []string{"Content-Security-Policy", "Referrer-Policy", "X-Content-Type-Options", "Cache-Control"} {
				assert.Empty(t, h.Get(k), "%s %s", tc.path, k)
			}
			assert.Regexp(t, `^W/"[0-9a-f]+-[0-9a-f]+"$`, h.Get("ETag"), tc.path)
			assert.NotEmpty(t, h.Get("Last-Modified"), tc.path)
			req, err := http.NewRequest(http.MethodGet, ts.URL+tc.path, nil)
			require.NoError(t, err)
			req.Header.Set("If-None-Match", h.Get("ETag"))
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusNotModified, resp.StatusCode, tc.path)
		}
		// A folder without its "/" is redirected to it, as llama-server
		// does, relatively (the server may sit under a prefix).
		req, err := http.NewRequest(http.MethodGet, ts.URL+"/sub", nil)
		require.NoError(t, err)
		resp, err := http.DefaultTransport.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusMovedPermanently, resp.StatusCode)
		assert.Equal(t, "sub/", resp.Header.Get("Location"))
		// A name with characters a URL gives meaning to is escaped, and
		// the query string is kept.
		req, err = http.NewRequest(http.MethodGet, ts.URL+"/a%20%23b?x=1", nil)
		require.NoError(t, err)
		resp, err = http.DefaultTransport.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusMovedPermanently, resp.StatusCode)
		assert.Equal(t, "a%20%23b/?x=1", resp.Header.Get("Location"))
		for _, p := range []string{"/sub/", "/app.js", "/../secret.txt", "/%2e%2e/secret.txt", "/sub/..%2f..%2fsecret.txt"} {
			code, _, body := get(t, ts.URL+p, "")
			assertNotFound(t, code, body)
		}
	})
	t.Run("config", func(t *testing.T) {
		for _, o := range []Options{{UIConfig: `{"theme": "dark", "temperature": 0.5}`}, {UIConfigFile: cfgFile}} {
			_, ts := newTestServer(t, o)
			_, _, body := get(t, ts.URL+"/props", "")
			var p struct {
				UISettings map[string]any `json:"ui_settings"`
			}
			require.NoError(t, json.Unmarshal([]byte(body), &p))
			assert.Equal(t, map[string]any{"theme": "dark", "temperature": 0.5}, p.UISettings)
		}
	})
	t.Run("bad options", func(t *testing.T) {
		model := testenv.Model(t, "stories260K.gguf")
		for _, o := range []Options{
			{UIConfig: `[1]`},
			{UIConfig: `{"theme":`},
			{UIConfigFile: filepath.Join(dir, "missing.json")},
			{UIConfig: `{}`, UIConfigFile: cfgFile},
			{UIPath: filepath.Join(dir, "missing")},
			{UIPath: filepath.Join(dir, "index.html")},
		} {
			o.Model = model
			o.Logger = slog.New(slog.DiscardHandler)
			s, err := New(context.Background(), o)
			if !assert.Error(t, err, "%+v", o) {
				_ = s.Close()
			}
		}
	})
}
