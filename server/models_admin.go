package server

import (
	"encoding/json"
	"net/http"
)

func init() {
	addRoute("POST /models", false, handleModelsAdd)
	addRoute("DELETE /models", false, handleModelsRemove)
}

// handleModelsAdd is llama-server's POST /models of router mode:
// {"model": "org/repo[:quant]"} downloads a model from the Hugging Face
// hub into the cache and lists it. This server does not download models,
// so a new name is refused (500, as llama-server answers a model it
// cannot fetch); a missing name or one already listed get llama-server's
// 400. Not found (404) outside router mode, as there.
func handleModelsAdd(s *Server) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.router {
			writeError(w, http.StatusNotFound, errNotFound, "File Not Found")
			return
		}
		var body map[string]any
		data, err := readBody(r)
		if err == nil {
			err = json.Unmarshal(data, &body)
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, errInvalidRequest, "invalid JSON body: "+err.Error())
			return
		}
		name, _ := body["model"].(string)
		if name == "" {
			writeError(w, http.StatusBadRequest, errInvalidRequest, "model must be a non-empty string")
			return
		}
		s.mu.Lock()
		_, exists := s.byName[name]
		s.mu.Unlock()
		if exists {
			writeError(w, http.StatusBadRequest, errInvalidRequest, "model '"+name+"' already exists")
			return
		}
		writeError(w, http.StatusInternalServerError, errServer,
			"cannot download model '"+name+"': this server serves the models of --models-dir and --models-preset only")
	}
}

// handleModelsRemove is llama-server's DELETE /models?model=NAME of
// router mode, which removes a model downloaded into the cache. The
// models here come from --models-dir and --models-preset, which it never
// removes (500 "not removable", as llama-server); an unknown name is 500
// "not found", as there.
func handleModelsRemove(s *Server) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.router {
			writeError(w, http.StatusNotFound, errNotFound, "File Not Found")
			return
		}
		name := r.URL.Query().Get("model")
		if name == "" {
			writeError(w, http.StatusBadRequest, errInvalidRequest, "model must be a non-empty string")
			return
		}
		s.mu.Lock()
		_, exists := s.byName[name]
		s.mu.Unlock()
		if !exists {
			writeError(w, http.StatusInternalServerError, errServer, "model name="+name+" is not found")
			return
		}
		writeError(w, http.StatusInternalServerError, errServer, "model name="+name+" is not removable (not from cache)")
	}
}
