package server

// GET /health (is the model loaded?) and GET /props (what the server and
// its model are: template, generation defaults, modalities, slots...);
// POST /props, which llama.cpp v0.4.0 accepts without changing anything.

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/x/llama"
	"github.com/x/llama/chat"
	"github.com/x/llama/server/internal/router"
)

// buildInfo is reported in /props.
// It starts with "b" as llama-server's (b<build>-<commit>) do, which clients check.
const buildInfo = "b0-go-llama (llama.cpp v0.4.0)"

func handleHealth(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		select {
		case <-s.done:
			// Draining: a load balancer's readiness check sends no more.
			return unavailable("server is shutting down")
		default:
		}
		if !s.router {
			e, _ := s.models.Lookup("")
			v := s.models.View(e)
			st, loadErr := v.State, v.LoadErr
			var rpcErr error
			if v.Inst != nil {
				rpcErr = v.Inst.Model.RPCErr()
			}
			if st == router.Loading {
				return unavailable("Loading model")
			}
			if rpcErr == nil && errors.Is(loadErr, llama.ErrRPC) {
				rpcErr = loadErr
			}
			if rpcErr != nil {
				// The next request loads the model again.
				return unavailable("%v", rpcErr)
			}
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		return nil
	}
}

// props builds the GET /props response from what is known of a model.
func (s *Server) props(e router.View[*instance]) map[string]any {
	info := e.Info
	if info == nil {
		info = &router.Info{}
	}
	opts := s.modelOptions(e.Settings)
	nCtx := info.NCtxSlot
	total := opts.Engine.Parallel
	if total <= 0 {
		total = 1
	}
	p := map[string]any{
		"default_generation_settings": map[string]any{
			"n_ctx":  nCtx,
			"params": defaultGenerationParams(opts),
		},
		"total_slots":        total,
		"model_alias":        e.Name,
		"model_path":         e.Path,
		"model_ftype":        info.Info.FileType,
		"modalities":         map[string]bool{"vision": info.Vision, "audio": info.Audio, "video": false},
		"media_marker":       s.mediaMarker,
		"endpoint_slots":     s.opts.Slots,
		"endpoint_props":     s.opts.PropsEndpoint,
		"endpoint_metrics":   s.opts.Metrics,
		"chat_template":      info.TemplateSource,
		"chat_template_caps": templateCapsJSON(info.Caps),
		"bos_token":          info.BOS,
		"eos_token":          info.EOS,
		"build_info":         buildInfo,
		"is_sleeping":        e.State == router.Sleeping,
		"ui":                 !s.opts.NoUI,
		"ui_settings":        s.uiSettings(),
		"cors_proxy_enabled": s.opts.Tools.CORSProxy,
	}
	if len(info.RPCDevices) > 0 {
		devs := make([]map[string]any, len(info.RPCDevices))
		for i, d := range info.RPCDevices {
			devs[i] = map[string]any{"name": d.Name, "endpoint": d.Description,
				"memory_total": d.TotalMemory, "memory_free": d.FreeMemory}
		}
		p["rpc_devices"] = devs
	}
	if s.opts.Jinja && info.ToolUseSource != "" {
		p["chat_template_tool_use"] = info.ToolUseSource
	}
	return p
}

// templateCapsJSON is "chat_template_caps" as llama.cpp v0.4.0 reports
// it: the nine capabilities its template analysis finds.
func templateCapsJSON(c chat.TemplateCaps) map[string]bool {
	return map[string]bool{
		"supports_string_content":      !c.RequiresTypedContent,
		"supports_typed_content":       c.RequiresTypedContent,
		"supports_tools":               c.SupportsTools,
		"supports_tool_calls":          c.SupportsToolCalls,
		"supports_parallel_tool_calls": c.SupportsParallelToolCalls,
		"supports_system_role":         c.SupportsSystemRole,
		"supports_preserve_reasoning":  c.SupportsPreserveReasoning,
		"supports_reasoning_effort":    c.SupportsReasoningEffort,
		"supports_object_arguments":    c.SupportsObjectArguments,
	}
}

func handleGetProps(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if s.router && r.URL.Query().Get("model") == "" {
			// The router itself: its role and the models' count, with the
			// placeholders of a model's fields llama-server v0.4.0 sends
			// so that its web UI reads them.
			writeJSON(w, http.StatusOK, map[string]any{
				"role": "router", "max_instances": s.opts.ModelsMax, "models_autoload": !s.opts.NoModelsAutoload,
				"model_alias": "llama-server", "model_path": "none",
				"default_generation_settings": map[string]any{"params": map[string]any{}, "n_ctx": 0},
				"ui_settings":                 s.uiSettings(), "build_info": buildInfo,
				"cors_proxy_enabled": s.opts.Tools.CORSProxy,
			})
			return nil
		}
		e, err := s.peek(r)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, s.props(s.models.View(e)))
		return nil
	}
}

func handlePostProps(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if !s.opts.PropsEndpoint {
			return notSupported("This server does not support changing global properties. Start it with `--props` (Options.PropsEndpoint)")
		}
		var body map[string]json.RawMessage
		if err := decodeJSON(r, &body); err != nil {
			return err
		}
		// llama.cpp v0.4.0 changes no property yet: any object is accepted
		// and nothing is applied.
		writeJSON(w, http.StatusOK, map[string]bool{"success": true})
		return nil
	}
}
