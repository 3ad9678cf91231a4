package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"
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
		data, err := readJSONBody(r)
		if he := (*httpError)(nil); errors.As(err, &he) {
			return he
		}
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
		if err := s.models.Download(name); err != nil {
			return badRequest("%v", err)
		}
		writeJSON(w, http.StatusOK, map[string]bool{"success": true})
		return nil
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
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		if err := s.models.Remove(ctx, name); err != nil {
			return serverError("%v", err)
		}
		writeJSON(w, http.StatusOK, map[string]bool{"success": true})
		return nil
	}
}
