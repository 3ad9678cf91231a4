package server

// A loaded model as handlers use it (instance), how the router opens one
// (openInstance), and how a request finds its model (instanceFor). The
// model list and the loading, sleeping and unloading are the router's
// (internal/router).

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"github.com/x/llama/engine"
	"github.com/x/llama/server/internal/router"

	"github.com/x/llama"
	"github.com/x/llama/chat"
	"github.com/x/llama/mtmd"
)

// instance is one loaded model with its engine and chat template. Handlers
// get one from Server.instanceFor and must call the release function when
// done with it.
type instance struct {
	// Name is the model's name: the alias, the model path (single-model
	// mode) or its name in the models folder or preset (router mode).
	Name string
	// Path is the GGUF file.
	Path   string
	Model  *llama.Model
	Engine engineAPI
	// EmbedEngine runs the embeddings of a generative model served with
	// Embedding (llama-server's --embedding keeps completions on), in a
	// second context beside Engine; nil otherwise (Engine does both or
	// only embeddings).
	EmbedEngine engineAPI
	// Projector encodes media for Model (nil: text only); Model's Close
	// closes it.
	Projector *mtmd.Projector
	// Template renders chat prompts; never nil (falls back to "chatml").
	Template promptRenderer
	// templates are Template and ToolTemplate for package chat, made
	// once by chatTemplates.
	templatesOnce sync.Once
	templates     *chat.Templates
	// ToolTemplate renders prompts that offer tools when the model carries
	// a separate "tool_use" template (and no template was given in the
	// options); nil otherwise.
	ToolTemplate promptRenderer
	Server       *Server
	// Opts are the options this instance runs with (the server's, with the
	// preset's overrides in router mode).
	Opts Options

	eogOnce sync.Once
	eog     []llama.Token // end-of-generation tokens, see eogTokens

	maxPieceOnce sync.Once
	maxPiece     int // bytes of the longest token text, see maxPieceBytes

	once sync.Once
}

// modelEntry is one model of the server's list (see router.Model).
type modelEntry = router.Model[*instance]

// eogTokens returns the model's end-of-generation tokens.
func (inst *instance) eogTokens() []llama.Token {
	inst.eogOnce.Do(func() {
		for t := range inst.Model.VocabSize() {
			if inst.Model.IsEOG(llama.Token(t)) {
				inst.eog = append(inst.eog, llama.Token(t))
			}
		}
	})
	return inst.eog
}

// embedder returns the engine that runs embedding and rerank tasks.
func (inst *instance) embedder() engineAPI {
	if inst.EmbedEngine != nil {
		return inst.EmbedEngine
	}
	return inst.Engine
}

// close frees the engine and the model.
func (inst *instance) close() {
	inst.once.Do(func() {
		if inst.Engine != nil {
			_ = inst.Engine.Close()
		}
		if inst.EmbedEngine != nil {
			_ = inst.EmbedEngine.Close()
		}
		if inst.Model != nil {
			_ = inst.Model.Close()
		}
	})
}

// Close, Metrics and RPCErr make an instance a router.Instance.
func (inst *instance) Close()                  { inst.close() }
func (inst *instance) Metrics() engine.Metrics { return inst.Engine.Metrics() }
func (inst *instance) RPCErr() error           { return inst.Model.RPCErr() }

// lookup finds the model a request names. In single-model mode every name
// maps to the one model. In router mode an empty name is taken from the
// "model" query parameter, and may be omitted only when there is one model.
func (s *Server) lookup(r *http.Request, model string) (*modelEntry, string) {
	if model == "" && r != nil && s.router {
		model = r.URL.Query().Get("model")
	}
	return s.models.Lookup(model)
}

// peek finds the model a GET request names without loading or waking it.
// It fails with a 400.
func (s *Server) peek(r *http.Request) (*modelEntry, error) {
	e, msg := s.lookup(r, "")
	if e == nil {
		return nil, badRequest("%s", msg)
	}
	return e, nil
}

// instanceFor returns the instance that serves model (the request's "model"
// field; "" for the default), loading or waking it when needed. On failure
// it returns the error to answer. Otherwise release must be called once
// the request no longer uses inst.
func (s *Server) instanceFor(r *http.Request, model string) (inst *instance, release func(), err error) {
	e, msg := s.lookup(r, model)
	if e == nil {
		return nil, nil, badRequest("%s", msg)
	}
	autoload := true
	if s.router {
		autoload = !s.opts.NoModelsAutoload
		switch r.URL.Query().Get("autoload") {
		case "false", "0":
			autoload = false
		case "true", "1":
			autoload = true
		}
	}
	if autoload {
		inst, release, err = s.models.Acquire(r.Context(), e)
	} else {
		inst, release, err = s.models.AcquireLoaded(e)
	}
	if err != nil {
		switch {
		case errors.Is(err, router.ErrNotLoaded):
			return nil, nil, badRequest("model is not loaded")
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			return nil, nil, unavailable("request ended while the model was loading")
		case errors.Is(err, router.ErrClosed):
			return nil, nil, unavailable("server is shutting down")
		case errors.Is(err, llama.ErrRPC):
			return nil, nil, unavailable("failed to load model: %v", err)
		}
		return nil, nil, serverError("failed to load model: %v", err)
	}
	return inst, release, nil
}

// modelOptions are the options a model runs with: the server's, with the
// settings of its preset section in router mode.
func (s *Server) modelOptions(st router.Settings) Options {
	o := s.opts
	o.ModelsDir, o.ModelsPreset = "", ""
	set := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	if st.ChatTemplate != nil {
		o.ChatTemplate = *st.ChatTemplate
	}
	if st.ChatTemplateFile != nil {
		o.ChatTemplateFile = *st.ChatTemplateFile
	}
	set(&o.Engine.Context.ContextSize, st.ContextSize)
	set(&o.Engine.Parallel, st.Parallel)
	set(&o.NPredict, st.NPredict)
	set(&o.Engine.Context.Threads, st.Threads)
	set(&o.ModelOptions.GPULayers, st.GPULayers)
	if st.Embedding != nil {
		o.Engine.Embedding = *st.Embedding
	}
	return o
}

// openInstance loads a model, its engine and chat template: the router's
// Config.Open. ctx is the router's, cancelled when the server shuts down.
func (s *Server) openInstance(ctx context.Context, sp router.Spec) (*instance, *router.Info, error) {
	path, opts := sp.Path, s.modelOptions(sp.Settings)
	opts.Engine.Speculative.InferTypes()
	if slices.Contains(opts.Engine.Speculative.Types, engine.SpecDraftMTP) {
		opts.ModelOptions.MTP = true // the head's blocks, for the engine's drafter
	}
	m, err := llama.LoadModel(ctx, path, opts.ModelOptions)
	if err != nil {
		return nil, nil, err
	}
	tmpl, err := resolveTemplate(opts, m, s.log)
	if err != nil {
		_ = m.Close()
		return nil, nil, err
	}
	toolTmpl := toolUseRenderer(opts, m, s.log)
	proj, err := loadProjector(ctx, m, opts.Multimodal, s.mediaMarker)
	if err != nil {
		_ = m.Close()
		return nil, nil, err
	}
	mi, _ := m.Info()
	eo := opts.Engine
	if eo.Logger == nil {
		eo.Logger = s.log
	}
	var embedEng engineAPI
	if eo.Embedding && !eo.Reranking && mi.HasDecoder {
		// A generative model with --embedding serves completions too, as
		// llama-server does: embeddings get a context of their own.
		emb := eo
		emb.Parallel = 1
		if embedEng, err = newEngine(m, emb); err != nil {
			_ = m.Close()
			return nil, nil, fmt.Errorf("start embedding engine: %w", err)
		}
		eo.Embedding = false
	}
	eng, err := newEngine(m, eo)
	if err != nil {
		if embedEng != nil {
			_ = embedEng.Close()
		}
		_ = m.Close()
		return nil, nil, fmt.Errorf("start engine: %w", err)
	}
	inst := &instance{
		Name: sp.Name, Path: path, Model: m, Engine: eng, EmbedEngine: embedEng, Template: tmpl, ToolTemplate: toolTmpl,
		Server: s, Opts: opts, Projector: proj,
	}
	info := &router.Info{TemplateSource: tmpl.Source(), Caps: tmpl.Caps(), RPCDevices: m.RPCDevices()}
	for _, d := range info.RPCDevices {
		s.log.Info("RPC device", "model", sp.Name, "device", d.Name, "worker", d.Description,
			"total_mib", d.TotalMemory>>20, "free_mib", d.FreeMemory>>20)
	}
	if toolTmpl != nil {
		// As llama.cpp reports them: the tool_use template's, the more
		// expressive one, when the model has it.
		info.Caps = toolTmpl.Caps()
	}
	if proj != nil {
		info.Vision, info.Audio = proj.SupportsVision(), proj.SupportsAudio()
	}
	info.Info = mi
	if tu, ok := m.ChatTemplate("tool_use"); ok {
		info.ToolUseSource = tu
	}
	special := m.SpecialTokens()
	if special.BOS != llama.NoToken {
		info.BOS, _ = m.TokenPiece(special.BOS, true)
	}
	if special.EOS != llama.NoToken {
		info.EOS, _ = m.TokenPiece(special.EOS, true)
	}
	info.NCtxSlot = slotContext(opts.Engine, info.Info.TrainContext)
	if n := eng.SlotContext(); n > 0 {
		info.NCtxSlot = n
	}
	return inst, info, nil
}

// slotContext is each slot's context size under o.
func slotContext(o engine.Options, train int) int {
	n := o.Context.ContextSize
	if n <= 0 {
		n = train
	}
	p := o.Parallel
	if p <= 0 {
		p = 1
	}
	return n / p
}
