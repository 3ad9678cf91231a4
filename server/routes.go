package server

import "net/http"

// route is one endpoint: a Go 1.22 mux pattern ("POST /v1/chat/completions"),
// whether it needs the API key, the shape of its errors, and its handler.
type route struct {
	Pattern string
	Access  access
	Errors  dialect
	Handler handlerFunc
}

// access says whether a route needs one of Options.APIKeys. As
// llama-server's, only liveness and the web page are public: model
// listings and everything else need the key.
type access int

const (
	keyed  access = iota // needs an API key when the server has some
	public               // reachable without a key
	page                 // public for the web page's own files (pagePublic), keyed otherwise
)

// routes is the server's API map: every endpoint, grouped by the API it
// belongs to, with the file that holds its handler. The order matters only
// to GCP predictions (gcp.go), whose "@requestFormat" picks the first route
// of an alias: native /completions and /embeddings come before their
// OpenAI /v1/ forms, and a path's GET before its POST or DELETE.
func (s *Server) routes() []route {
	return []route{
		// Liveness (props.go), and the web UI (ui.go), which asks the user
		// for the API key that its own calls need: its page is public,
		// other files of Options.UIPath are keyed.
		{"GET /health", public, llamaErrors, handleHealth(s)},
		{"GET /v1/health", public, llamaErrors, handleHealth(s)},
		{"GET /", page, llamaErrors, handleUI(s)},

		// llama-server's native API: generation (completion.go, infill.go),
		// embeddings (embeddings.go), reranking, also under /v1/ for Jina's
		// and TEI's clients (rerank.go), the tokenizer (tokenize.go) and
		// the chat template (apply_template.go).
		{"POST /completion", keyed, llamaErrors, generationHandler(parseCompletionRequest, answerCompletion)(s)},
		{"POST /completions", keyed, llamaErrors, generationHandler(parseCompletionRequest, answerCompletion)(s)},
		{"POST /infill", keyed, llamaErrors, handleInfill(s)},
		{"POST /embedding", keyed, llamaErrors, embeddingsHandler(false)(s)},
		{"POST /embeddings", keyed, llamaErrors, embeddingsHandler(false)(s)},
		{"POST /rerank", keyed, llamaErrors, handleRerank(s)},
		{"POST /reranking", keyed, llamaErrors, handleRerank(s)},
		{"POST /v1/rerank", keyed, llamaErrors, handleRerank(s)},
		{"POST /v1/reranking", keyed, llamaErrors, handleRerank(s)},
		{"POST /tokenize", keyed, llamaErrors, handleTokenize(s)},
		{"POST /detokenize", keyed, llamaErrors, handleDetokenize(s)},
		{"POST /apply-template", keyed, llamaErrors, handleApplyTemplate(s)},

		// llama-server's view of the running server: properties (props.go),
		// slots and their files (slots.go), Prometheus metrics (metrics.go)
		// and LoRA adapters (lora.go).
		{"GET /props", keyed, llamaErrors, handleGetProps(s)},
		{"POST /props", keyed, llamaErrors, handlePostProps(s)},
		{"GET /slots", keyed, llamaErrors, handleSlots(s)},
		{"POST /slots/{id}", keyed, llamaErrors, handleSlotAction(s)},
		{"GET /metrics", keyed, llamaErrors, handleMetrics(s)},
		{"GET /lora-adapters", keyed, llamaErrors, handleGetLoRA(s)},
		{"POST /lora-adapters", keyed, llamaErrors, handlePostLoRA(s)},

		// Models: the OpenAI list and retrieval (models.go), keyed as in llama-server
		// (in router mode it names model files and ?reload=1 rescans
		// them), and router mode's loading, unloading, events
		// (models.go), and downloads and removals (models_admin.go):
		// thin handlers over internal/router.
		{"GET /v1/models", keyed, llamaErrors, handleModels(s)},
		{"GET /v1/models/{model...}", keyed, openAIErrors, handleModel(s)},
		{"GET /models", keyed, llamaErrors, handleModels(s)},
		{"GET /models/sse", keyed, llamaErrors, handleModelsSSE(s)},
		{"POST /models/load", keyed, llamaErrors, handleModelsLoad(s)},
		{"POST /models/unload", keyed, llamaErrors, handleModelsUnload(s)},
		{"POST /models", keyed, llamaErrors, handleModelsAdd(s)},
		{"DELETE /models", keyed, llamaErrors, handleModelsRemove(s)},

		// OpenAI API: chat completions (chat_handlers.go, chat_stream.go)
		// with llama-server's prompt counting (input_tokens.go) and
		// in-flight control (control.go), completions (openai.go),
		// embeddings (embeddings.go) and audio transcriptions
		// (transcriptions.go).
		{"POST /v1/chat/completions", keyed, openAIErrors, handleChatCompletion(s)},
		{"POST /chat/completions", keyed, openAIErrors, handleChatCompletion(s)},
		{"POST /v1/chat/completions/input_tokens", keyed, openAIErrors, handleChatInputTokens(s)},
		{"POST /chat/completions/input_tokens", keyed, openAIErrors, handleChatInputTokens(s)},
		{"POST /v1/chat/completions/control", keyed, openAIErrors, handleCompletionControl(s)},
		{"POST /v1/completions", keyed, openAIErrors, generationHandler(parseOAICompletion, answerOAICompletion)(s)},
		{"POST /v1/embeddings", keyed, openAIErrors, embeddingsHandler(true)(s)},
		{"POST /v1/audio/transcriptions", keyed, openAIErrors, handleTranscriptions(s)},
		{"POST /audio/transcriptions", keyed, openAIErrors, handleTranscriptions(s)},

		// OpenAI Responses API (responses_handlers.go, internal/responses).
		{"POST /v1/responses", keyed, responsesErrors, handleResponses(s)},
		{"POST /v1/responses/input_tokens", keyed, responsesErrors, handleResponsesInputTokens(s)},
		{"POST /responses", keyed, responsesErrors, handleResponses(s)},
		{"POST /responses/input_tokens", keyed, responsesErrors, handleResponsesInputTokens(s)},

		// Anthropic Messages API (anthropic_handlers.go, internal/anthropic).
		{"POST /v1/messages", keyed, anthropicErrors, handleAnthropicMessages(s)},
		{"POST /v1/messages/count_tokens", keyed, anthropicErrors, handleAnthropicCountTokens(s)},

		// Ollama's API (ollama_handlers.go), for the apps and libraries
		// that speak it.
		{"POST /api/chat", keyed, ollamaErrors, handleOllamaChat(s)},
		{"POST /api/generate", keyed, ollamaErrors, handleOllamaGenerate(s)},
		{"POST /api/embed", keyed, ollamaErrors, handleOllamaEmbed(s)},
		{"POST /api/embeddings", keyed, ollamaErrors, handleOllamaEmbeddings(s)},
		{"GET /api/tags", keyed, ollamaErrors, handleOllamaTags(s)},
		{"GET /api/ps", keyed, ollamaErrors, handleOllamaPs(s)},
		{"POST /api/show", keyed, ollamaErrors, handleOllamaShow(s)},
		{"GET /api/version", keyed, ollamaErrors, handleOllamaVersion(s)},
		{"POST /api/pull", keyed, ollamaErrors, handleOllamaPull(s)},
		{"POST /api/push", keyed, ollamaErrors, handleOllamaManage(s)},
		{"POST /api/create", keyed, ollamaErrors, handleOllamaManage(s)},
		{"POST /api/copy", keyed, ollamaErrors, handleOllamaManage(s)},
		{"DELETE /api/delete", keyed, ollamaErrors, handleOllamaManage(s)},
		{"POST /api/blobs/{digest}", keyed, ollamaErrors, handleOllamaManage(s)},

		// Resumable streams of generations sent with X-Conversation-Id
		// (stream_resume.go).
		{"GET /v1/stream", keyed, llamaErrors, handleStreamGet(s)},
		{"DELETE /v1/stream", keyed, llamaErrors, handleStreamDelete(s)},
		{"POST /v1/streams/lookup", keyed, llamaErrors, handleStreamsLookup(s)},

		// Agent features, off unless Options.Tools enables them: built-in
		// tools and MCP servers (tools.go over internal/tools), and the
		// CORS proxy of the web UI's MCP client (proxy.go over
		// internal/corsproxy).
		{"GET /tools", keyed, llamaErrors, handleToolsList(s)},
		{"POST /tools", keyed, toolErrors, handleToolsCall(s)},
		{"GET /cors-proxy", keyed, llamaErrors, corsProxyHandler(s)},
		{"POST /cors-proxy", keyed, llamaErrors, corsProxyHandler(s)},

		// Vertex AI's prediction route, when Options.GCP enables it, is
		// added beside these by addGCPRoutes (gcp.go).
	}
}

// buildHandler makes the server's http.Handler: the routes behind panic
// recovery, CORS, the body limit and the request timeout, then, route by
// route in its error dialect, the Host check against DNS rebinding, the
// refusal of cross-site state-changing requests (crossorigin.go) and the
// API key check (for keyed routes). Resumable streams are recorded behind
// the key check, so that a session is the key's (stream_resume.go).
func (s *Server) buildHandler() http.Handler {
	rs := s.routes()
	auths := map[dialect]func(http.Handler) http.Handler{}
	auth := func(d dialect) func(http.Handler) http.Handler {
		d = d.keyRefusal()
		if auths[d] == nil {
			auths[d] = requireAPIKey(s.opts.APIKeys, d)
		}
		return auths[d]
	}
	resumable := resumableStreams(&s.streams)
	pagePublic := s.pagePublic()
	hosts, origins := newHostPolicy(s.opts.AllowedHosts), newOriginPolicy(s.opts.CORSOrigins)
	guard := func(d dialect, a access, h http.Handler) http.Handler {
		switch a {
		case keyed:
			h = auth(d)(resumable(h))
		case page:
			h = publicIf(pagePublic, h, auth(d)(h))
		}
		return chain(h, checkHost(hosts, d), refuseCrossSite(origins, d))
	}
	mux := http.NewServeMux()
	for _, rt := range rs {
		mux.Handle(rt.Pattern, guard(rt.Errors, rt.Access, sseScoped(s.ssePing(), rt.Errors.serve(rt.Handler))))
	}
	if err := s.addGCPRoutes(mux, rs, guard); err != nil {
		s.log.Error("GCP compat disabled", "err", err)
	}
	// A path no route has is a 404, behind the key as every route but the
	// public ones (as llama-server's, whose key check runs before routing).
	missing := auth(llamaErrors)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		llamaErrors.write(w, errFileNotFound())
	}))
	notFound := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The mux's own 404 and 405 are plain text; answer in JSON.
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		missing.ServeHTTP(w, r)
	})
	return chain(notFound,
		writeDeadlines(timeoutOption(s.opts.WriteTimeout, defaultWriteTimeout)),
		recoverPanics(s.log),
		giveBackMemory(&s.freeing),
		cors(s.opts),
		limitBody(bodyLimits{max: s.opts.MaxBodyBytes, budget: &s.bodies, idle: timeoutOption(s.opts.BodyReadTimeout, defaultBodyReadTimeout)}),
		withTimeout(s.opts.Timeout),
	)
}

// publicIf routes the requests whose path isPublic to open and the others
// to keyed.
func publicIf(isPublic func(path string) bool, open, keyed http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isPublic(r.URL.Path) {
			open.ServeHTTP(w, r)
			return
		}
		keyed.ServeHTTP(w, r)
	})
}
