package server

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"github.com/x/llama/hub"
)

// handleModelsAdd is llama-server's POST /models of router mode:
// {"model": "org/repo[:quant]"} pulls a model from the Hugging Face hub
// into the cache (only the cache with Options.Offline) and lists it. It
// answers {"success": true} at once; /models/sse tells the outcome with a
// model_status "downloading" event, then "download_finished" or
// "download_failed" (with the error). A missing name, or one already listed
// or downloading, is llama-server's 400; outside router mode it is a 404.
func handleModelsAdd(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if !s.router {
			return errFileNotFound()
		}
		var body struct {
			Model any `json:"model"`
		}
		data, err := readBody(r)
		if err == nil {
			err = json.Unmarshal(data, &body)
		}
		if err != nil {
			return badRequest("invalid JSON body: %v", err)
		}
		name, _ := body.Model.(string)
		if name == "" {
			return badRequest("model must be a non-empty string")
		}
		s.mu.Lock()
		_, exists := s.byName[name]
		if exists || s.downloading[name] {
			s.mu.Unlock()
			return badRequest("model '%s' already exists", name)
		}
		if s.downloading == nil {
			s.downloading = map[string]bool{}
		}
		s.downloading[name] = true
		s.broadcastLocked(modelEvent{Model: name, Event: "model_status", Data: modelEventStatus{Status: "downloading"}})
		s.loads.Add(1)
		s.mu.Unlock()
		go s.download(name)
		writeJSON(w, http.StatusOK, map[string]bool{"success": true})
		return nil
	}
}

// download pulls a model for POST /models and lists it when it arrives.
func (s *Server) download(name string) {
	defer s.loads.Done()
	path, err := hub.Pull(s.ctx, name, hub.Options{Offline: s.opts.Offline})
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.downloading, name)
	if err != nil {
		if s.ctx.Err() == nil {
			s.log.Warn("model download failed", "model", name, "err", err)
		}
		s.broadcastLocked(modelEvent{Model: name, Event: "download_failed", Data: modelEventError{Error: err.Error()}})
		return
	}
	if _, exists := s.byName[name]; !exists && !s.closed {
		s.addEntry(&modelEntry{name: name, path: path, opts: routerOptions(s.opts), created: time.Now().Unix(), downloaded: true})
	}
	s.broadcastLocked(modelEvent{Model: name, Event: "download_finished"})
}

// broadcastLocked sends ev to the /models/sse listeners; s.mu must be held.
func (s *Server) broadcastLocked(ev modelEvent) {
	for ch := range s.subs {
		select {
		case ch <- ev:
		default: // a slow listener misses events rather than blocking
		}
	}
}

// handleModelsRemove is llama-server's DELETE /models?model=NAME of
// router mode: it removes a model POST /models downloaded from the list
// (unloading it first); the files stay in the Hugging Face cache, shared
// with other tools. Models of --models-dir and --models-preset are never
// removed (500 "not removable", as llama-server); an unknown name is 500
// "not found", as there.
func handleModelsRemove(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if !s.router {
			return errFileNotFound()
		}
		name := r.URL.Query().Get("model")
		if name == "" {
			return badRequest("model must be a non-empty string")
		}
		s.mu.Lock()
		e, exists := s.byName[name]
		s.mu.Unlock()
		if !exists {
			return serverError("model name=%s is not found", name)
		}
		if !e.downloaded {
			return serverError("model name=%s is not removable (not from cache)", name)
		}
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		s.mu.Lock()
		loaded := e.state != stateUnloaded
		s.mu.Unlock()
		if err := s.unload(ctx, e); loaded && err != nil {
			return serverError("%v", err)
		}
		s.mu.Lock()
		if s.byName[name] == e {
			delete(s.byName, name)
			s.models = slices.DeleteFunc(s.models, func(m *modelEntry) bool { return m == e })
		}
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]bool{"success": true})
		return nil
	}
}

// modelEventStatus and modelEventError are the data of /models/sse's
// events of a download.
type (
	modelEventStatus struct {
		Status string `json:"status"`
	}
	modelEventError struct {
		Error string `json:"error"`
	}
)
