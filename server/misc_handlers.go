package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/x/llama/engine"

	"github.com/x/llama"
	"github.com/x/llama/chat"
)

func init() {
	addRoute("GET /health", true, handleHealth)
	addRoute("GET /v1/health", true, handleHealth)
	addRoute("GET /props", false, handleGetProps)
	addRoute("POST /props", false, handlePostProps)
	addRoute("GET /v1/models", true, handleModels)
	addRoute("GET /models", true, handleModels)
	addRoute("GET /models/sse", false, handleModelsSSE)
	addRoute("POST /models/load", false, handleModelsLoad)
	addRoute("POST /models/unload", false, handleModelsUnload)
	addRoute("GET /metrics", false, handleMetrics)
	addRoute("GET /slots", false, handleSlots)
	addRoute("POST /slots/{id}", false, handleSlotAction)
	addRoute("POST /tokenize", false, handleTokenize)
	addRoute("POST /detokenize", false, handleDetokenize)
	addRoute("POST /apply-template", false, handleApplyTemplate)
	addRoute("GET /lora-adapters", false, handleGetLoRA)
	addRoute("POST /lora-adapters", false, handlePostLoRA)
}

// buildInfo is reported in /props.
// It starts with "b" as llama-server's (b<build>-<commit>) do, which clients check.
const buildInfo = "b0-go-llama (llama.cpp v0.4.0)"

// peek finds the model a GET request names without loading or waking it.
// On failure it writes a 400 and returns nil.
func (s *Server) peek(w http.ResponseWriter, r *http.Request) *modelEntry {
	e, msg := s.lookup(r, "")
	if e == nil {
		writeError(w, http.StatusBadRequest, errInvalidRequest, msg)
	}
	return e
}

func handleHealth(s *Server) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.router {
			s.mu.Lock()
			st := s.models[0].state
			s.mu.Unlock()
			if st == stateLoading {
				writeError(w, http.StatusServiceUnavailable, errUnavailable, "Loading model")
				return
			}
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}
}

// props builds the GET /props response from what is known of e.
func (s *Server) props(e *modelEntry) map[string]any {
	info := e.info
	if info == nil {
		info = &modelInfo{}
	}
	nCtx := info.NCtxSlot
	total := e.opts.Engine.Parallel
	if total <= 0 {
		total = 1
	}
	p := map[string]any{
		"default_generation_settings": map[string]any{
			"id": 0, "id_task": -1, "n_ctx": nCtx, "speculative": false, "is_processing": false,
			"params": defaultGenerationParams(e.opts), "prompt": "",
		},
		"total_slots":        total,
		"model_alias":        e.name,
		"model_path":         e.path,
		"model_ftype":        info.Info.FileType,
		"modalities":         map[string]bool{"vision": info.Vision, "audio": info.Audio, "video": false},
		"media_marker":       mediaMarker,
		"endpoint_slots":     s.opts.Slots,
		"endpoint_props":     true,
		"endpoint_metrics":   s.opts.Metrics,
		"chat_template":      info.TemplateSource,
		"chat_template_caps": templateCapsJSON(info.Caps),
		"bos_token":          info.BOS,
		"eos_token":          info.EOS,
		"build_info":         buildInfo,
		"is_sleeping":        e.state == stateSleeping,
		"ui":                 !s.opts.NoUI,
		"ui_settings":        s.uiSettings(),
	}
	if s.opts.Jinja && info.ToolUseSource != "" {
		p["chat_template_tool_use"] = info.ToolUseSource
	}
	return p
}

func templateCapsJSON(c chat.TemplateCaps) map[string]bool {
	return map[string]bool{
		"supports_system_role":          c.SupportsSystemRole,
		"supports_tools":                c.SupportsTools,
		"supports_tool_calls":           c.SupportsToolCalls,
		"supports_tool_responses":       c.SupportsToolResponses,
		"supports_parallel_tool_calls":  c.SupportsParallelToolCalls,
		"requires_typed_content":        c.RequiresTypedContent,
		"supports_thinking":             c.SupportsThinking,
		"supports_object_arguments":     c.SupportsObjectArguments,
		"supports_string_content":       !c.RequiresTypedContent,
		"supports_typed_content":        true,
		"supports_preserve_reasoning":   false,
		"supports_generation_prompt":    true,
		"supports_tool_call_id":         c.SupportsToolCalls,
		"supports_reasoning_content":    c.SupportsThinking,
		"supports_system_role_in_tools": c.SupportsSystemRole,
	}
}

func handleGetProps(s *Server) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.router && r.URL.Query().Get("model") == "" {
			// The router itself: its role and the models' count.
			writeJSON(w, http.StatusOK, map[string]any{
				"role": "router", "build_info": buildInfo, "max_instances": s.opts.ModelsMax,
				"models_autoload": !s.opts.NoModelsAutoload, "endpoint_metrics": s.opts.Metrics, "endpoint_slots": s.opts.Slots,
				"ui": !s.opts.NoUI, "ui_settings": s.uiSettings(),
			})
			return
		}
		e := s.peek(w, r)
		if e == nil {
			return
		}
		s.mu.Lock()
		p := s.props(e)
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, p)
	}
}

func handlePostProps(s *Server) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.opts.PropsEndpoint {
			writeError(w, http.StatusNotImplemented, errNotSupported,
				"This server does not support changing global properties. Start it with `--props`")
			return
		}
		var body map[string]json.RawMessage
		if !decodeJSON(w, r, &body) {
			return
		}
		// llama.cpp v0.4.0 changes no property yet: any object is accepted
		// and nothing is applied.
		writeJSON(w, http.StatusOK, map[string]bool{"success": true})
	}
}

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

func handleMetrics(s *Server) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.opts.Metrics {
			writeError(w, http.StatusNotImplemented, errNotSupported,
				"This server does not support metrics endpoint. Start it with `--metrics`")
			return
		}
		e := s.peek(w, r)
		if e == nil {
			return
		}
		// The throughput gauges are averaged over the window since the
		// previous scrape, as llama-server's.
		s.mu.Lock()
		m := e.metricsLocked()
		prev := e.scraped
		e.scraped = m
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Header().Set("Process-Start-Time-Unix", strconv.FormatInt(s.started.Unix(), 10))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(metricsText(m, prev)))
	}
}

// metricsText renders m in Prometheus text format with llama.cpp's names;
// the throughput gauges cover the window since the counters prev.
func metricsText(m, prev engine.Metrics) string {
	perSecond := func(n int64, secs float64) float64 {
		if secs <= 0 {
			return 0
		}
		return float64(n) / secs
	}
	type item struct {
		name, help string
		v          float64
	}
	counters := []item{
		{"prompt_tokens_total", "Number of prompt tokens decoded, without those reused from the cache.", float64(m.PromptTokensTotal)},
		{"prompt_tokens_cached_total", "Number of prompt tokens reused from the cache.", float64(m.PromptTokensCachedTotal)},
		{"prompt_seconds_total", "Time spent on prompts.", m.PromptSecondsTotal},
		{"tokens_predicted_total", "Number of tokens generated.", float64(m.TokensPredictedTotal)},
		{"tokens_predicted_seconds_total", "Time spent generating.", m.TokensPredictedSeconds},
		{"n_decode_total", "Number of llama_decode() calls.", float64(m.DecodeTotal)},
		{"n_tokens_max", "Longest sequence seen (prompt and generation).", float64(m.NTokensMax)},
		{"spec_decode_num_draft_tokens_total", "Speculative decoding: draft tokens.", float64(m.DraftTokensTotal)},
		{"spec_decode_num_accepted_tokens_total", "Speculative decoding: draft tokens accepted.", float64(m.DraftAcceptedTotal)},
		{"spec_decode_num_drafts_total", "Speculative decoding: verification steps.", float64(m.DraftsTotal)},
	}
	gauges := []item{
		{"prompt_tokens_seconds", "Prompt throughput in tokens/s since the previous scrape.",
			perSecond(m.PromptTokensTotal-prev.PromptTokensTotal, m.PromptSecondsTotal-prev.PromptSecondsTotal)},
		{"predicted_tokens_seconds", "Generation throughput in tokens/s since the previous scrape.",
			perSecond(m.TokensPredictedSteps-prev.TokensPredictedSteps, m.TokensPredictedSeconds-prev.TokensPredictedSeconds)},
		{"requests_processing", "Number of requests processing.", float64(m.RequestsProcessing)},
		{"requests_deferred", "Number of requests deferred.", float64(m.RequestsDeferred)},
		{"n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call.", m.BusySlotsPerDecode},
		{"kv_cache_usage_ratio", "KV-cache usage. 1 means 100 percent usage.", m.KVCacheUsageRatio},
		{"kv_cache_tokens", "KV-cache tokens.", float64(m.KVCacheTokens)},
	}
	var sb strings.Builder
	write := func(kind string, items []item) {
		for _, it := range items {
			v := it.v
			if math.IsNaN(v) || math.IsInf(v, 0) {
				v = 0
			}
			fmt.Fprintf(&sb, "# HELP llamacpp:%s %s\n# TYPE llamacpp:%s %s\nllamacpp:%s %s\n",
				it.name, it.help, it.name, kind, it.name, strconv.FormatFloat(v, 'g', -1, 64))
		}
	}
	write("counter", counters)
	write("gauge", gauges)
	writeSpecPerPos(&sb, m)
	writeGatewayMetrics(&sb, m, m.AdaptersChanged)
	return sb.String()
}

func handleSlots(s *Server) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.opts.Slots {
			writeError(w, http.StatusNotImplemented, errNotSupported,
				"This server does not support slots endpoint. Start it with `--slots`")
			return
		}
		inst, release, ok := s.instanceFor(w, r, "")
		if !ok {
			return
		}
		defer release()
		slots := inst.Engine.SlotsInfo()
		if r.URL.Query().Get("fail_on_no_slot") != "" {
			idle := 0
			for _, sl := range slots {
				if !sl.IsProcessing {
					idle++
				}
			}
			if idle == 0 {
				writeError(w, http.StatusServiceUnavailable, errUnavailable, "no slot available")
				return
			}
		}
		params := defaultGenerationParams(inst.Opts)
		out := make([]map[string]any, len(slots))
		for i, sl := range slots {
			o := map[string]any{
				"id": sl.ID, "n_ctx": sl.NCtx, "speculative": sl.Speculative, "is_processing": sl.IsProcessing,
				"n_past": sl.NPast, "n_decoded": sl.NDecoded,
			}
			// As llama-server: the task fields only once the slot has run
			// one; an idle slot shows no remaining budget.
			if sl.HasTask {
				o["id_task"], o["params"], o["prompt"], o["generated"] = sl.TaskID, params, sl.Prompt, ""
				o["next_token"] = []map[string]any{{"has_next_token": sl.IsProcessing, "has_new_line": false,
					"n_remain": -1, "n_decoded": sl.NDecoded}}
			}
			out[i] = o
		}
		writeJSON(w, http.StatusOK, out)
	}
}

// validSlotFilename reports whether name is a plain file name that stays
// inside the slot save folder.
func validSlotFilename(name string) bool {
	if name == "" || len(name) > 255 || !utf8.ValidString(name) || name == "." || name == ".." {
		return false
	}
	if strings.ContainsAny(name, "/\\:\x00") || strings.Contains(name, "..") || filepath.IsAbs(name) {
		return false
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return name == filepath.Base(name)
}

type slotActionRequest struct {
	Filename string `json:"filename"`
}

func handleSlotAction(s *Server) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.opts.SlotSavePath == "" {
			writeError(w, http.StatusNotImplemented, errNotSupported,
				"This server does not support slots action. Start it with `--slot-save-path`")
			return
		}
		id, err := strconv.Atoi(r.PathValue("id"))
		if err != nil || id < 0 {
			writeError(w, http.StatusBadRequest, errInvalidRequest, "Invalid slot ID")
			return
		}
		action := r.URL.Query().Get("action")
		var req slotActionRequest
		switch action {
		case "save", "restore":
			if !decodeJSON(w, r, &req) {
				return
			}
			if err := slotNameError(req.Filename); err != nil {
				writeHTTPError(w, err)
				return
			}
		case "erase":
		default:
			writeError(w, http.StatusBadRequest, errInvalidRequest, "Invalid action")
			return
		}
		inst, release, ok := s.instanceFor(w, r, "")
		if !ok {
			return
		}
		defer release()
		if n := len(inst.Engine.SlotsInfo()); id >= n {
			writeError(w, http.StatusBadRequest, errInvalidRequest, fmt.Sprintf("Invalid slot ID: %d (the server has %d slots)", id, n))
			return
		}
		path := filepath.Join(s.opts.SlotSavePath, req.Filename)
		start := time.Now()
		ms := func() float64 { return float64(time.Since(start).Microseconds()) / 1000 }
		switch action {
		case "save":
			nTok, nBytes, err := inst.Engine.SaveSlot(id, path)
			if err != nil {
				writeSlotError(w, err, req.Filename, action)
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{"id_slot": id, "filename": req.Filename,
				"n_saved": nTok, "n_written": nBytes, "timings": map[string]float64{"save_ms": ms()}})
		case "restore":
			nTok, nBytes, err := inst.Engine.RestoreSlot(id, path)
			if err != nil {
				writeSlotError(w, err, req.Filename, action)
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{"id_slot": id, "filename": req.Filename,
				"n_restored": nTok, "n_read": nBytes, "timings": map[string]float64{"restore_ms": ms()}})
		case "erase":
			n, err := inst.Engine.EraseSlot(id)
			if err != nil {
				writeSlotError(w, err, "", action)
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{"id_slot": id, "n_erased": n})
		}
	}
}

// writeEngineError maps an engine error to a response by its type (see
// errorObject): a busy queue is a 503, invalid input, a grammar error or a
// prompt too long for the context a 400, the rest a 500.
func writeEngineError(w http.ResponseWriter, err error) {
	writeHTTPError(w, err)
}

type tokenizeRequest struct {
	Model        string          `json:"model"`
	Content      json.RawMessage `json:"content"`
	AddSpecial   bool            `json:"add_special"`
	ParseSpecial *bool           `json:"parse_special"`
	WithPieces   bool            `json:"with_pieces"`
}

type tokenPiece struct {
	ID    llama.Token `json:"id"`
	Piece any         `json:"piece"`
}

// tokenizeMixed tokenizes a string, or an array mixing strings and token
// ids (ids are checked against the vocabulary).
func tokenizeMixed(m *llama.Model, raw json.RawMessage, addSpecial, parseSpecial bool) ([]llama.Token, error) {
	opts := llama.TokenizeOptions{AddSpecial: addSpecial, ParseSpecial: parseSpecial}
	var text string
	if err := json.Unmarshal(raw, &text); err == nil {
		return tokenizeText(m, text, opts)
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, errors.New(`"content" must be a string or an array of strings and token ids`)
	}
	var out []llama.Token
	for i, p := range parts {
		var s string
		if err := json.Unmarshal(p, &s); err == nil {
			o := opts
			o.AddSpecial = addSpecial && i == 0
			toks, err := tokenizeText(m, s, o)
			if err != nil {
				return nil, err
			}
			out = append(out, toks...)
			continue
		}
		var id int64
		if err := json.Unmarshal(p, &id); err != nil {
			return nil, fmt.Errorf(`"content"[%d] must be a string or a token id`, i)
		}
		if id < 0 || id >= int64(m.VocabSize()) {
			return nil, fmt.Errorf("token id %d out of range [0, %d)", id, m.VocabSize())
		}
		out = append(out, llama.Token(id))
	}
	return out, nil
}

func handleTokenize(s *Server) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req tokenizeRequest
		inst, release, ok := s.decodeAndAcquire(w, r, &req, &req.Model)
		if !ok {
			return
		}
		defer release()
		if len(req.Content) == 0 || string(req.Content) == "null" {
			writeJSON(w, http.StatusOK, map[string]any{"tokens": []int{}})
			return
		}
		if err := checkTokenizeContent(req.Content); err != nil {
			writeHTTPError(w, err)
			return
		}
		parse := req.ParseSpecial == nil || *req.ParseSpecial
		toks, err := tokenizeMixed(inst.Model, req.Content, req.AddSpecial, parse)
		if err != nil {
			writeError(w, http.StatusBadRequest, errInvalidRequest, err.Error())
			return
		}
		if req.WithPieces && len(toks) > maxTokenizePieces {
			writeHTTPError(w, tooLarge("the content has %d tokens; /tokenize answers at most %d with pieces", len(toks), maxTokenizePieces))
			return
		}
		if !req.WithPieces {
			if toks == nil {
				toks = []llama.Token{}
			}
			writeJSON(w, http.StatusOK, map[string]any{"tokens": toks})
			return
		}
		out := make([]tokenPiece, len(toks))
		for i, t := range toks {
			piece, err := inst.Model.TokenPiece(t, true)
			if err != nil {
				writeEngineError(w, err)
				return
			}
			out[i] = tokenPiece{ID: t, Piece: piece}
			if !utf8.ValidString(piece) {
				b := make([]int, len(piece))
				for j := 0; j < len(piece); j++ {
					b[j] = int(piece[j])
				}
				out[i].Piece = b
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"tokens": out})
	}
}

type detokenizeRequest struct {
	Model  string  `json:"model"`
	Tokens []int64 `json:"tokens"`
}

func handleDetokenize(s *Server) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req detokenizeRequest
		inst, release, ok := s.decodeAndAcquire(w, r, &req, &req.Model)
		if !ok {
			return
		}
		defer release()
		if len(req.Tokens) > maxDetokenizeTokens {
			writeHTTPError(w, tooLarge(`"tokens" has %d entries; /detokenize takes at most %d`, len(req.Tokens), maxDetokenizeTokens))
			return
		}
		n := int64(inst.Model.VocabSize())
		toks := make([]llama.Token, len(req.Tokens))
		for i, t := range req.Tokens {
			if t < 0 || t >= n {
				writeError(w, http.StatusBadRequest, errInvalidRequest,
					fmt.Sprintf("token id %d at index %d out of range [0, %d)", t, i, n))
				return
			}
			toks[i] = llama.Token(t)
		}
		text, err := inst.Model.Detokenize(toks, llama.DetokenizeOptions{})
		if err != nil {
			writeEngineError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"content": text})
	}
}

// templateMessage is a chat message as /apply-template receives it
// (OpenAI's shape: content is a string or a list of parts).
type templateMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ReasoningContent string          `json:"reasoning_content"`
	Name             string          `json:"name"`
	ToolCallID       string          `json:"tool_call_id"`
	ToolCalls        []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

type applyTemplateRequest struct {
	Model               string            `json:"model"`
	Messages            []templateMessage `json:"messages"`
	AddGenerationPrompt *bool             `json:"add_generation_prompt"`
	ChatTemplateKwargs  map[string]any    `json:"chat_template_kwargs"`
}

// toChatMessage converts a wire message to chat.Message.
func (m templateMessage) toChatMessage(i int) (chat.Message, error) {
	if m.Role == "" {
		return chat.Message{}, fmt.Errorf("messages[%d]: missing role", i)
	}
	out := chat.Message{Role: m.Role, ReasoningContent: m.ReasoningContent, Name: m.Name, ToolCallID: m.ToolCallID}
	if len(m.Content) > 0 && string(m.Content) != "null" {
		if err := json.Unmarshal(m.Content, &out.Content); err != nil {
			var parts []chat.ContentPart
			if err := json.Unmarshal(m.Content, &parts); err != nil {
				return chat.Message{}, fmt.Errorf("messages[%d]: content must be a string or an array of parts", i)
			}
			var sb strings.Builder
			textOnly := true
			for _, p := range parts {
				if p.Type == "text" {
					sb.WriteString(p.Text)
				} else {
					textOnly = false
				}
			}
			// Text-only parts are joined into plain content, as llama.cpp
			// does for templates that read content as a string.
			out.Content = sb.String()
			if !textOnly {
				out.Parts = parts
			}
		}
	}
	for _, tc := range m.ToolCalls {
		args := string(tc.Function.Arguments)
		var s string
		if json.Unmarshal(tc.Function.Arguments, &s) == nil {
			args = s
		}
		out.ToolCalls = append(out.ToolCalls, chat.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args})
	}
	return out, nil
}

func handleApplyTemplate(s *Server) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var raw json.RawMessage
		if !decodeJSON(w, r, &raw) {
			return
		}
		// As llama-server: the prompt a chat completion of this body would
		// use (tools, assistant prefill, template kwargs and reasoning
		// settings applied, the BOS text the tokenizer adds left out).
		if f, err := parseFields(raw); err == nil && f.has("messages") {
			var model string
			_ = f.str("model", &model)
			inst, release, ok := s.instanceFor(w, r, model)
			if !ok {
				return
			}
			defer release()
			_, plan, _, err := parseChatRequestWith(f, inst, true, nil)
			if err != nil {
				writeHTTPError(w, err)
				return
			}
			writeJSON(w, http.StatusOK, map[string]string{"prompt": plan.Prompt})
			return
		}
		var req applyTemplateRequest
		if err := json.Unmarshal(raw, &req); err != nil {
			writeError(w, http.StatusBadRequest, errInvalidRequest, "malformed JSON: "+err.Error())
			return
		}
		if req.Messages == nil {
			writeError(w, http.StatusBadRequest, errInvalidRequest, "'messages' is required")
			return
		}
		msgs := make([]chat.Message, len(req.Messages))
		for i, m := range req.Messages {
			cm, err := m.toChatMessage(i)
			if err != nil {
				writeError(w, http.StatusBadRequest, errInvalidRequest, err.Error())
				return
			}
			msgs[i] = cm
		}
		inst, release, ok := s.instanceFor(w, r, req.Model)
		if !ok {
			return
		}
		defer release()
		in := chat.TemplateInput{Messages: msgs, AddGenerationPrompt: req.AddGenerationPrompt == nil || *req.AddGenerationPrompt,
			Extra: inst.templateKwargs(inst.Template, req.ChatTemplateKwargs)}
		sp := inst.Model.SpecialTokens()
		if sp.BOS != llama.NoToken {
			in.BOSToken, _ = inst.Model.TokenPiece(sp.BOS, true)
		}
		if sp.EOS != llama.NoToken {
			in.EOSToken, _ = inst.Model.TokenPiece(sp.EOS, true)
		}
		prompt, err := inst.Template.Render(in)
		if err != nil {
			writeError(w, http.StatusBadRequest, errInvalidRequest, "apply chat template: "+err.Error())
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"prompt": prompt})
	}
}

func handleGetLoRA(s *Server) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		inst, release, ok := s.instanceFor(w, r, "")
		if !ok {
			return
		}
		defer release()
		ad := inst.Engine.Adapters()
		if ad == nil {
			ad = []engine.AdapterInfo{}
		}
		writeJSON(w, http.StatusOK, ad)
	}
}

type loraScaleRequest struct {
	ID    *int     `json:"id"`
	Scale *float32 `json:"scale"`
}

func handlePostLoRA(s *Server) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var raw json.RawMessage
		if !decodeJSON(w, r, &raw) {
			return
		}
		var req []loraScaleRequest
		if err := json.Unmarshal(raw, &req); err != nil {
			writeError(w, http.StatusBadRequest, errInvalidRequest, "Request body must be an array of {\"id\", \"scale\"}")
			return
		}
		inst, release, ok := s.instanceFor(w, r, "")
		if !ok {
			return
		}
		defer release()
		n := len(inst.Engine.Adapters())
		scales := make([]engine.LoRAScale, 0, len(req))
		for i, it := range req {
			if it.ID == nil || it.Scale == nil {
				writeError(w, http.StatusBadRequest, errInvalidRequest, fmt.Sprintf("entry %d: id and scale are required", i))
				return
			}
			if *it.ID < 0 || *it.ID >= n {
				writeError(w, http.StatusBadRequest, errInvalidRequest, fmt.Sprintf("invalid adapter id %d (have %d adapters)", *it.ID, n))
				return
			}
			if f := float64(*it.Scale); math.IsNaN(f) || math.IsInf(f, 0) {
				writeError(w, http.StatusBadRequest, errInvalidRequest, "scale must be a finite number")
				return
			}
			scales = append(scales, engine.LoRAScale{ID: *it.ID, Scale: *it.Scale})
		}
		if err := inst.Engine.SetAdapterScales(scales); err != nil {
			writeEngineError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]bool{"success": true})
	}
}
