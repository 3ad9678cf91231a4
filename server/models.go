package server

// The model list (GET /v1/models, GET /models) and router mode's loading,
// unloading and events (/models/load, /models/unload, /models/sse).
// Downloads and removals are in models_admin.go.

import (
	"net/http"
)

// vocabTypeNumber is llama.cpp's enum llama_vocab_type for a type name.
func vocabTypeNumber(name string) int {
	for i, n := range []string{"none", "spm", "bpe", "wpm", "ugm", "rwkv", "plamo2"} {
		if n == name {
			return i
		}
	}
	return 0
}

// modelCard is a model's entry in /v1/models. s.mu must be held.
func (s *Server) modelCard(e *modelEntry) map[string]any {
	c := map[string]any{
		"id": e.name, "object": "model", "created": e.created, "owned_by": "llamacpp",
		"aliases": nonNilStrings(e.aliases), "tags": nonNilStrings(e.opts.Tags),
	}
	if !s.router && len(e.aliases) == 0 {
		// As llama-server: without aliases, the model's name is its alias.
		c["aliases"] = []string{e.name}
	}
	if e.info != nil {
		in := e.info.Info
		c["meta"] = map[string]any{
			"vocab_type": vocabTypeNumber(in.VocabType), "n_vocab": in.VocabSize, "n_ctx": e.info.NCtxSlot,
			"n_ctx_train": in.TrainContext, "n_embd": in.EmbeddingSize, "n_params": in.Params,
			"size": in.Size, "ftype": in.FileType,
		}
	} else {
		c["meta"] = nil
	}
	if s.router {
		st := map[string]any{"value": string(e.state)}
		if e.failed && e.state == stateUnloaded {
			st["failed"] = true
		}
		c["path"] = e.path
		c["in_cache"] = false
		c["status"] = st
		c["architecture"] = map[string][]string{"input_modalities": {"text"}, "output_modalities": {"text"}}
	}
	return c
}

func handleModels(s *Server) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if v := r.URL.Query().Get("reload"); s.router && (v == "1" || v == "true") {
			if err := s.reloadModels(); err != nil {
				writeError(w, http.StatusInternalServerError, errServer, err.Error())
				return
			}
		}
		s.mu.Lock()
		data := make([]map[string]any, 0, len(s.models))
		for _, e := range s.models {
			data = append(data, s.modelCard(e))
		}
		caps := []string{"completion"}
		if len(s.models) > 0 && s.models[0].info != nil && (s.models[0].info.Vision || s.models[0].info.Audio) {
			caps = append(caps, "multimodal")
		}
		s.mu.Unlock()
		resp := map[string]any{"object": "list", "data": data}
		if !s.router {
			// Ollama-style list, as llama.cpp also sends.
			resp["models"] = []map[string]any{{
				"name": data[0]["id"], "model": data[0]["id"], "modified_at": "", "size": "", "digest": "",
				"type": "model", "description": "", "tags": []string{""}, "capabilities": caps,
				"parameters": "", "details": map[string]any{"parent_model": "", "format": "gguf", "family": "",
					"families": []string{""}, "parameter_size": "", "quantization_level": ""},
			}}
		}
		writeJSON(w, http.StatusOK, resp)
	}
}

func handleModelsSSE(s *Server) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		events, cancel := s.subscribe()
		defer cancel()
		send, ok := s.sse(w)
		if !ok {
			return
		}
		for {
			select {
			case ev := <-events:
				if send("", ev) != nil {
					return
				}
			case <-r.Context().Done():
				return
			case <-s.done:
				return
			}
		}
	}
}

type modelRequest struct {
	Model string `json:"model"`
}

// routerModel reads the model named by a /models/load or unload body.
func (s *Server) routerModel(w http.ResponseWriter, r *http.Request) *modelEntry {
	if !s.router {
		writeError(w, http.StatusBadRequest, errInvalidRequest, "this endpoint is only available in router mode")
		return nil
	}
	var req modelRequest
	if !decodeJSON(w, r, &req) {
		return nil
	}
	if req.Model == "" {
		writeError(w, http.StatusBadRequest, errInvalidRequest, "model name is missing from the request")
		return nil
	}
	e, msg := s.lookup(r, req.Model)
	if e == nil {
		writeError(w, http.StatusBadRequest, errInvalidRequest, msg)
	}
	return e
}

func handleModelsLoad(s *Server) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		e := s.routerModel(w, r)
		if e == nil {
			return
		}
		s.mu.Lock()
		st := e.state
		s.mu.Unlock()
		if st == stateLoaded {
			writeError(w, http.StatusBadRequest, errInvalidRequest, "model is already loaded")
			return
		}
		_, release, err := s.acquire(r.Context(), e)
		if err != nil {
			writeError(w, http.StatusInternalServerError, errServer, "failed to load model: "+err.Error())
			return
		}
		release()
		writeJSON(w, http.StatusOK, map[string]bool{"success": true})
	}
}

func handleModelsUnload(s *Server) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		e := s.routerModel(w, r)
		if e == nil {
			return
		}
		if err := s.unload(r.Context(), e); err != nil {
			writeError(w, http.StatusBadRequest, errInvalidRequest, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, map[string]bool{"success": true})
	}
}
