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

// vocabTypeFlag is meta.vocab_type of /v1/models as the pinned
// llama-server writes it: a boolean, true for any vocabulary type but none.
func vocabTypeFlag(name string) bool { return vocabTypeNumber(name) != 0 }

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
			"vocab_type": vocabTypeFlag(in.VocabType), "n_vocab": in.VocabSize, "n_ctx": e.info.NCtxSlot,
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

func handleModels(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if v := r.URL.Query().Get("reload"); s.router && (v == "1" || v == "true") {
			if err := s.reloadModels(); err != nil {
				return serverError("%v", err)
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
		return nil
	}
}

func handleModelsSSE(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		events, cancel := s.subscribe()
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
		s.mu.Lock()
		st := e.state
		s.mu.Unlock()
		if st == stateLoaded {
			return badRequest("model is already loaded")
		}
		_, release, err := s.acquire(r.Context(), e)
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
		if err := s.unload(r.Context(), e); err != nil {
			return badRequest("%v", err)
		}
		writeJSON(w, http.StatusOK, map[string]bool{"success": true})
		return nil
	}
}
