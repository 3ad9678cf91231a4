package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/x/llama/server/webui"
)

// The chat page (package webui) answers GET / and the page's files. It is
// public, as llama-server's: the page holds no data, and the API calls it
// makes carry the key the user types in. Paths that are neither a route
// nor a file of the page get the API's JSON 404.
//
// With API keys, what is public is the same set of paths as llama-server's
// (pagePublic): "/" and the names of the built-in page's files, whether
// they are served from the binary or from Options.UIPath. Any other file
// of UIPath, and any other path, needs the key. Files and folders whose
// name starts with "." are never served from UIPath (package webui).

func handleUI(s *Server) handlerFunc {
	notFound := func(http.ResponseWriter, *http.Request) error { return errFileNotFound() }
	if s.opts.NoUI {
		return notFound
	}
	h, err := webui.Handler(webui.Options{Dir: s.opts.UIPath, NotFound: llamaErrors.serve(notFound)})
	if err != nil { // checked by New (prepareUI); the folder may have gone since
		s.log.Error("server: web UI", "err", err)
		return notFound
	}
	return func(w http.ResponseWriter, r *http.Request) error {
		h.ServeHTTP(w, r)
		return nil
	}
}

// pagePublic reports whether a GET of path is public under the page's
// rule: "/" and the built-in page's files.
func (s *Server) pagePublic() func(path string) bool {
	names := map[string]bool{"/": true}
	for _, f := range webui.Files() {
		names["/"+f] = true
	}
	return func(path string) bool { return names[path] }
}

// prepareUI reads UIConfigFile into UIConfig and checks that UIConfig is a
// JSON object and UIPath a folder, as llama-server refuses to start
// otherwise.
func prepareUI(o *Options) error {
	if o.UIConfigFile != "" {
		if o.UIConfig != "" {
			return errors.New("server: UIConfig and UIConfigFile are exclusive")
		}
		b, err := os.ReadFile(o.UIConfigFile)
		if err != nil {
			return fmt.Errorf("server: UI config file: %w", err)
		}
		o.UIConfig = string(b)
	}
	if o.UIConfig != "" {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(o.UIConfig), &m); err != nil || m == nil {
			return fmt.Errorf("server: UI config is not a JSON object: %v", err)
		}
	}
	if o.UIPath != "" && !o.NoUI {
		st, err := os.Stat(o.UIPath)
		if err != nil {
			return fmt.Errorf("server: static files path: %w", err)
		}
		if !st.IsDir() {
			return fmt.Errorf("server: static files path %s is not a folder", o.UIPath)
		}
	}
	return nil
}

// uiSettings is what /props reports as "ui_settings": UIConfig, or {}.
func (s *Server) uiSettings() json.RawMessage {
	if s.opts.UIConfig == "" {
		return json.RawMessage("{}")
	}
	return json.RawMessage(s.opts.UIConfig)
}
