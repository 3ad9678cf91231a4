package server

// The model list (GET /v1/models, GET /models), one model's entry (GET
// /v1/models/{model}, OpenAI's retrieval), and router mode's loading,
// unloading and events (/models/load, /models/unload, /models/sse): thin
// handlers over internal/router. Downloads and removals are in
// models_admin.go.

import (
	"net/http"

	"github.com/x/llama/server/internal/router"
)

func handleModels(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if v := r.URL.Query().Get("reload"); s.router && (v == "1" || v == "true") {
			if err := s.models.Reload(); err != nil {
				return serverError("%v", err)
			}
		}
		writeJSON(w, http.StatusOK, s.models.List())
		return nil
	}
}

// handleModel answers OpenAI's model retrieval with the entry of the model
// that a request naming it runs on: out of router mode the one model,
// whatever the name, as the generation endpoints take any name. An unknown
// name is a 404. The name is the rest of the path, slashes included (a
// model file's path, or a repository's name, may hold some).
func handleModel(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		name := r.PathValue("model")
		e, _ := s.models.Lookup(name)
		if e == nil || name == "" {
			return apiError(errNotFound, "model '%s' not found", name)
		}
		writeJSON(w, http.StatusOK, s.models.Card(e))
		return nil
	}
}

func handleModelsSSE(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		events, cancel := s.models.Subscribe()
		defer cancel()
		sse, err := sseStart(r.Context(), w)
		if err != nil {
			return nil
		}
		for {
			select {
			case ev := <-events:
				if sse.data(ev) != nil {
					return nil
				}
			case <-r.Context().Done():
				return nil
			case <-s.done:
				return nil
			}
		}
	}
}

type modelRequest struct {
	Model string `json:"model"`
}

// routerModel reads the model named by a /models/load or unload body.
func (s *Server) routerModel(r *http.Request) (*modelEntry, error) {
	if !s.router {
		return nil, badRequest("this endpoint is only available in router mode")
	}
	var req modelRequest
	if err := decodeJSON(r, &req); err != nil {
		return nil, err
	}
	if req.Model == "" {
		return nil, badRequest("model name is missing from the request")
	}
	e, msg := s.lookup(r, req.Model)
	if e == nil {
		return nil, badRequest("%s", msg)
	}
	return e, nil
}

func handleModelsLoad(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		e, err := s.routerModel(r)
		if err != nil {
			return err
		}
		if s.models.View(e).State == router.Loaded {
			return badRequest("model is already loaded")
		}
		_, release, err := s.models.Acquire(r.Context(), e)
		if err != nil {
			return serverError("failed to load model: %v", err)
		}
		release()
		writeJSON(w, http.StatusOK, map[string]bool{"success": true})
		return nil
	}
}

func handleModelsUnload(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		e, err := s.routerModel(r)
		if err != nil {
			return err
		}
		if err := s.models.Unload(r.Context(), e); err != nil {
			return badRequest("%v", err)
		}
		writeJSON(w, http.StatusOK, map[string]bool{"success": true})
		return nil
	}
}
