package router

// The model list of GET /v1/models and GET /models: a card per model, in
// OpenAI's list, with Ollama's beside it out of router mode.

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

// Card is a model's entry in /v1/models. Its fields, and those of the
// objects below, are in the order of their names, as llama-server's JSON
// objects are.
type Card struct {
	Aliases      []string    `json:"aliases"`
	Architecture *cardArch   `json:"architecture,omitempty"` // router mode
	Created      int64       `json:"created"`
	ID           string      `json:"id"`
	InCache      *bool       `json:"in_cache,omitempty"` // router mode
	Meta         *cardMeta   `json:"meta"`               // null until loaded
	Object       string      `json:"object"`
	OwnedBy      string      `json:"owned_by"`
	Path         *string     `json:"path,omitempty"`   // router mode
	Status       *cardStatus `json:"status,omitempty"` // router mode
	Tags         []string    `json:"tags"`
}

// cardMeta is what /v1/models tells of a loaded model.
type cardMeta struct {
	FileType  string `json:"ftype"`
	NCtx      int    `json:"n_ctx"`
	NCtxTrain int    `json:"n_ctx_train"`
	NEmbd     int    `json:"n_embd"`
	NParams   uint64 `json:"n_params"`
	NVocab    int    `json:"n_vocab"`
	Size      uint64 `json:"size"`
	VocabType bool   `json:"vocab_type"`
}

// cardStatus is a model's state in router mode.
type cardStatus struct {
	Failed bool   `json:"failed,omitempty"`
	Value  string `json:"value"`
}

// cardArch is a model's modalities in router mode.
type cardArch struct {
	InputModalities  []string `json:"input_modalities"`
	OutputModalities []string `json:"output_modalities"`
}

// List is the answer of GET /v1/models: OpenAI's list, and Ollama's
// beside it out of router mode, as llama.cpp sends it.
type List struct {
	Data   []Card        `json:"data"`
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

// nonNilStrings returns s, or an empty slice for nil (JSON [] not null).
func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// cardLocked is e's entry in /v1/models.
func (r *Router[I]) cardLocked(e *Model[I]) Card {
	c := Card{
		ID: e.name, Object: "model", Created: e.created, OwnedBy: "llamacpp",
		Aliases: nonNilStrings(e.aliases), Tags: nonNilStrings(r.cfg.Tags),
	}
	if !r.Multi() && len(e.aliases) == 0 {
		// As llama-server: without aliases, the model's name is its alias.
		c.Aliases = []string{e.name}
	}
	if e.info != nil {
		in := e.info.Info
		c.Meta = &cardMeta{
			VocabType: vocabTypeFlag(in.VocabType), NVocab: in.VocabSize, NCtx: e.info.NCtxSlot,
			NCtxTrain: in.TrainContext, NEmbd: in.EmbeddingSize, NParams: in.Params,
			Size: in.Size, FileType: in.FileType,
		}
	}
	if r.Multi() {
		c.Path, c.InCache = new(e.path), new(false)
		c.Status = &cardStatus{Value: string(e.state), Failed: e.failed && e.state == Unloaded}
		c.Architecture = &cardArch{InputModalities: []string{"text"}, OutputModalities: []string{"text"}}
	}
	return c
}

// Card returns e's entry in /v1/models.
func (r *Router[I]) Card(e *Model[I]) Card {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cardLocked(e)
}

// List returns the model list of GET /v1/models.
func (r *Router[I]) List() List {
	r.mu.Lock()
	resp := List{Object: "list", Data: make([]Card, 0, len(r.models))}
	for _, e := range r.models {
		resp.Data = append(resp.Data, r.cardLocked(e))
	}
	caps := []string{"completion"}
	if len(r.models) > 0 && r.models[0].info != nil && (r.models[0].info.Vision || r.models[0].info.Audio) {
		caps = append(caps, "multimodal")
	}
	r.mu.Unlock()
	if !r.Multi() {
		// Ollama-style list, as llama.cpp also sends.
		m := ollamaModel{Name: resp.Data[0].ID, Model: resp.Data[0].ID, Tags: []string{""}, Capabilities: caps, Type: "model"}
		m.Details.Format, m.Details.Families = "gguf", []string{""}
		resp.Models = []ollamaModel{m}
	}
	return resp
}
