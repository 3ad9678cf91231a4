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

// modelCard is a model's entry in /v1/models. Its fields, and those of
// the objects below, are in the order of their names, as llama-server's
// JSON objects are.
type modelCard struct {
	Aliases      []string       `json:"aliases"`
	Architecture *modelArch     `json:"architecture,omitempty"` // router mode
	Created      int64          `json:"created"`
	ID           string         `json:"id"`
	InCache      *bool          `json:"in_cache,omitempty"` // router mode
	Meta         *modelMeta     `json:"meta"`               // null until loaded
	Object       string         `json:"object"`
	OwnedBy      string         `json:"owned_by"`
	Path         *string        `json:"path,omitempty"`   // router mode
	Status       *modelStatusJS `json:"status,omitempty"` // router mode
	Tags         []string       `json:"tags"`
}

// modelMeta is what /v1/models tells of a loaded model.
type modelMeta struct {
	FileType  string `json:"ftype"`
	NCtx      int    `json:"n_ctx"`
	NCtxTrain int    `json:"n_ctx_train"`
	NEmbd     int    `json:"n_embd"`
	NParams   uint64 `json:"n_params"`
	NVocab    int    `json:"n_vocab"`
	Size      uint64 `json:"size"`
	VocabType bool   `json:"vocab_type"`
}

// modelStatusJS is a model's state in router mode.
type modelStatusJS struct {
	Failed bool   `json:"failed,omitempty"`
	Value  string `json:"value"`
}

// modelArch is a model's modalities in router mode.
type modelArch struct {
	InputModalities  []string `json:"input_modalities"`
	OutputModalities []string `json:"output_modalities"`
}

// modelsList is the answer of GET /v1/models: OpenAI's list, and
// Ollama's beside it out of router mode, as llama.cpp sends it.
type modelsList struct {
	Data   []modelCard   `json:"data"`
	Models []ollamaModel `json:"models,omitempty"`
	Object string        `json:"object"`
}

// ollamaModel is an entry of Ollama's model list.
type ollamaModel struct {
	Capabilities []string `json:"capabilities"`
	Description  string   `json:"description"`
	Details      struct {
		Families          []string `json:"families"`
		Family            string   `json:"family"`
		Format            string   `json:"format"`
		ParameterSize     string   `json:"parameter_size"`
		ParentModel       string   `json:"parent_model"`
		QuantizationLevel string   `json:"quantization_level"`
	} `json:"details"`
	Digest     string   `json:"digest"`
	Model      string   `json:"model"`
	ModifiedAt string   `json:"modified_at"`
	Name       string   `json:"name"`
	Parameters string   `json:"parameters"`
	Size       string   `json:"size"`
	Tags       []string `json:"tags"`
	Type       string   `json:"type"`
}

// modelCard is e's entry in /v1/models. s.mu must be held.
func (s *Server) modelCard(e *modelEntry) modelCard {
	c := modelCard{
		ID: e.name, Object: "model", Created: e.created, OwnedBy: "llamacpp",
		Aliases: nonNilStrings(e.aliases), Tags: nonNilStrings(e.opts.Tags),
	}
	if !s.router && len(e.aliases) == 0 {
		// As llama-server: without aliases, the model's name is its alias.
		c.Aliases = []string{e.name}
	}
	if e.info != nil {
		in := e.info.Info
		c.Meta = &modelMeta{
			VocabType: vocabTypeFlag(in.VocabType), NVocab: in.VocabSize, NCtx: e.info.NCtxSlot,
			NCtxTrain: in.TrainContext, NEmbd: in.EmbeddingSize, NParams: in.Params,
			Size: in.Size, FileType: in.FileType,
		}
	}
	if s.router {
		c.Path, c.InCache = new(e.path), new(false)
		c.Status = &modelStatusJS{Value: string(e.state), Failed: e.failed && e.state == stateUnloaded}
		c.Architecture = &modelArch{InputModalities: []string{"text"}, OutputModalities: []string{"text"}}
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
		resp := modelsList{Object: "list", Data: make([]modelCard, 0, len(s.models))}
		for _, e := range s.models {
			resp.Data = append(resp.Data, s.modelCard(e))
		}
		caps := []string{"completion"}
		if len(s.models) > 0 && s.models[0].info != nil && (s.models[0].info.Vision || s.models[0].info.Audio) {
			caps = append(caps, "multimodal")
		}
		s.mu.Unlock()
		if !s.router {
			// Ollama-style list, as llama.cpp also sends.
			m := ollamaModel{Name: resp.Data[0].ID, Model: resp.Data[0].ID, Tags: []string{""}, Capabilities: caps, Type: "model"}
			m.Details.Format, m.Details.Families = "gguf", []string{""}
			resp.Models = []ollamaModel{m}
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
