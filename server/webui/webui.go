// Package webui is the server's chat page: plain HTML, CSS and JavaScript
// embedded in the binary (no build step), served at "/" by the server's
// Handler. The page talks to the server's API with relative URLs only, so
// it works when the Handler is mounted under a prefix.
//
// The page streams chat completions (/v1/chat/completions), renders
// Markdown, keeps conversations in the browser's localStorage, and reads
// /props (modalities, "ui_settings") and /v1/models (the model picker of
// router mode). It asks for an API key when the server answers 401.
package webui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// Options configure Handler. The zero value serves the built-in page.
type Options struct {
	// Dir is a folder of static files served instead of the built-in page
	// (llama-server's --path). "/" serves its index.html; folders are never
	// listed, nothing outside Dir is reachable, and no file or folder
	// whose name starts with "." is served (.git, .env, .htpasswd...).
	Dir string
	// NotFound answers requests for files that do not exist (nil:
	// http.NotFound).
	NotFound http.Handler
}

// Files lists the built-in page's files, as served ("index.html",
// "app.js", ...).
func Files() []string {
	var names []string
	_ = fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, strings.TrimPrefix(p, "static/"))
		}
		return nil
	})
	return names
}

// asset is one embedded file with its precomputed ETag.
type asset struct {
	data []byte
	etag string
}

// Handler serves the page. It answers GET and HEAD: "/" and "/index.html"
// are the page, other paths its assets. The built-in page's responses
// carry a Content-Type from the file's extension, an ETag, "Cache-Control:
// no-cache" (so a new binary's page is picked up at once, and unchanged
// files cost a 304) and "X-Content-Type-Options: nosniff"; its HTML also
// carries a Content-Security-Policy that allows only the page's own
// scripts, styles and API.
//
// Files of Options.Dir are served as llama-server serves its --path: a
// Content-Type from the extension, a weak ETag and Last-Modified from the
// file's size and time (a 304 when they match), and no other header, so
// that pages with inline scripts and styles (llama.cpp's own web UI) run;
// a folder's path without its final "/" is redirected to it. Handler is
// safe for concurrent use.
func Handler(o Options) (http.Handler, error) {
	notFound := o.NotFound
	if notFound == nil {
		notFound = http.HandlerFunc(http.NotFound)
	}
	if o.Dir != "" {
		st, err := os.Stat(o.Dir)
		if err != nil {
			return nil, errors.New("webui: static files folder: " + err.Error())
		}
		if !st.IsDir() {
			return nil, errors.New("webui: static files folder: " + o.Dir + " is not a folder")
		}
		root, err := os.OpenRoot(o.Dir)
		if err != nil {
			return nil, errors.New("webui: static files folder: " + err.Error())
		}
		return &dirHandler{root: root, notFound: notFound}, nil
	}
	assets := map[string]asset{}
	for _, name := range Files() {
		b, err := static.ReadFile("static/" + name)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		assets[name] = asset{data: b, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
	}
	return &embedHandler{assets: assets, notFound: notFound}, nil
}

// fileName maps a request path to a file name relative to the root, or ""
// when the path cannot name a file.
func fileName(p string) string {
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	if strings.Contains(p, "\x00") || strings.Contains(p, "\\") {
		return ""
	}
	clean := path.Clean(p) // starts with "/", no "..", no "//"
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	if strings.HasSuffix(clean, "/") {
		clean += "index.html"
	}
	return clean[1:]
}

// hidden reports whether a segment of the file name starts with ".": a
// dotfile or a file in a dot-folder.
func hidden(name string) bool {
	for seg := range strings.SplitSeq(name, "/") {
		if strings.HasPrefix(seg, ".") {
			return true
		}
	}
	return false
}

// contentType is a file's Content-Type by its extension.
func contentType(name string) string {
	if ct := mime.TypeByExtension(filepath.Ext(name)); ct != "" {
		return ct
	}
	return "application/octet-stream"
}

// setHeaders sets the headers every file of the built-in page carries.
func setHeaders(w http.ResponseWriter, name string) {
	h := w.Header()
	h.Set("Content-Type", contentType(name))
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	if strings.HasSuffix(name, ".html") {
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data: blob:; "+
			"style-src 'self'; script-src 'self'; connect-src 'self'; object-src 'none'; "+
			"base-uri 'none'; frame-ancestors 'self'")
		h.Set("Referrer-Policy", "no-referrer")
	}
}

type embedHandler struct {
	assets   map[string]asset
	notFound http.Handler
}

func (h *embedHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := fileName(r.URL.Path)
	a, ok := h.assets[name]
	if !ok || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		h.notFound.ServeHTTP(w, r)
		return
	}
	setHeaders(w, name)
	w.Header().Set("ETag", a.etag)
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.data))
}

type dirHandler struct {
	root     *os.Root
	notFound http.Handler
}

func (h *dirHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := fileName(r.URL.Path)
	if name == "" || hidden(name) || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		h.notFound.ServeHTTP(w, r)
		return
	}
	// Opened without blocking on a FIFO; anything but a folder or a
	// regular file is then refused.
	f, err := h.root.OpenFile(filepath.FromSlash(name), os.O_RDONLY|openNonblocking, 0)
	if err != nil {
		h.notFound.ServeHTTP(w, r)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err == nil && st.IsDir() && !strings.HasSuffix(r.URL.Path, "/") {
		// Relative, so that it holds under a prefix the handler is
		// mounted at.
		loc := url.PathEscape(path.Base(name)) + "/"
		if r.URL.RawQuery != "" {
			loc += "?" + r.URL.RawQuery
		}
		w.Header().Set("Location", loc)
		w.WriteHeader(http.StatusMovedPermanently)
		return
	}
	if err != nil || !st.Mode().IsRegular() {
		h.notFound.ServeHTTP(w, r)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", contentType(name))
	hd.Set("ETag", fmt.Sprintf(`W/"%x-%x"`, st.ModTime().Unix(), st.Size()))
	http.ServeContent(w, r, name, st.ModTime(), f)
}
