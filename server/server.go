// Package server is an HTTP server compatible with llama.cpp's
// llama-server: its native endpoints (/completion, /tokenize, /props,
// /slots, /metrics, ...), the OpenAI and Anthropic APIs, and its router
// mode serving several models loaded on demand.
package server

// Reading the code: Server.routes (routes.go) lists every endpoint with the
// file of its handler, and buildHandler wraps them in the middleware
// (middleware.go, cors.go). Handlers get a loaded model from
// Server.instanceFor (instance.go; internal/router lists the models and
// loads, sleeps and unloads them) and run their requests on its engine
// (package engine) through runTask (tasks.go).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/x/llama/engine"
	"github.com/x/llama/sampling"
	"github.com/x/llama/server/internal/corsproxy"
	"github.com/x/llama/server/internal/router"
	"github.com/x/llama/server/internal/tools"

	"github.com/x/llama"
)

// Options configure a Server: Model serves one model; without it the
// server is a router (of the models of ModelsDir and ModelsPreset, which
// may be none, as llama-server started without a model).
type Options struct {
	// Model is the GGUF file to serve (-m).
	Model string
	// Alias is the model's name in /v1/models (--alias; default: Model).
	// Several names may be given, comma-separated: as in llama-server the
	// model's id is then the first in alphabetical order and /v1/models
	// lists them all as "aliases".
	Alias string
	// Tags are informational tags of the model, listed in /v1/models
	// (--tags).
	Tags []string
	// ModelsDir is a folder of models for router mode (--models-dir): each
	// *.gguf file is a model named after the file without ".gguf"; each
	// sub-folder holding GGUF files is a model named after the folder.
	ModelsDir string
	// ModelsPreset is an INI file of models for router mode
	// (--models-preset): one section per model with keys named as the
	// command-line options (model, chat-template, ctx-size or c, parallel
	// or np, n-predict or n, chat-template-file, load-on-startup); a [*]
	// section applies to every model. Instead of model, hf-repo (with
	// hf-file, hf-token) names a Hugging Face repo "user/repo[:quant]"
	// pulled with hub.Pull into the shared hub cache when the model is
	// first loaded (offline with $HF_HUB_OFFLINE).
	ModelsPreset string
	// ModelsMax is the most models loaded at once in router mode
	// (--models-max; 0: no limit). The least recently used idle model is
	// unloaded to make room.
	ModelsMax int
	// NoModelsAutoload stops router mode from loading a model a request
	// names (--no-models-autoload): it must be loaded with POST
	// /models/load first (a request's ?autoload=true overrides).
	NoModelsAutoload bool

	// Engine configures each model's engine.
	Engine engine.Options
	// NPredict is the default n_predict (-n; -1: no limit).
	NPredict int
	// Sampling holds the sampling parameters of requests that do not set
	// them (llama-server's --temp, --top-k, --seed...; nil:
	// sampling.Defaults()).
	Sampling *sampling.Params
	// NKeep is the default n_keep (--keep; 0: none, -1: the whole prompt).
	NKeep int
	// Stop are the default stop strings (-r), used when a request gives none.
	Stop []string
	// NoCachePrompt makes cache_prompt default to false (--no-cache-prompt).
	NoCachePrompt bool
	// EmbdNormalize is the default embd_normalize of embedding requests
	// (--embd-normalize: -1 none, 0 max absolute int16, 1 taxicab, 2
	// euclidean, above 2 p-norm; nil: 2).
	EmbdNormalize *int
	// SPMInfill builds /infill prompts in suffix-prefix-middle order
	// (--spm-infill) instead of prefix-suffix-middle.
	SPMInfill bool
	// ChatTemplateKwargs are template variables every chat request gets
	// unless it sets them itself (--chat-template-kwargs, --reasoning,
	// --reasoning-effort).
	ChatTemplateKwargs map[string]any

	// APIKeys, when set, are required of every request except the public
	// ones, as llama-server's: GET /health, GET /v1/health, and the web
	// page ("/" and the built-in page's files; other files of UIPath are
	// keyed).
	APIKeys []string
	// CORSOrigins are the origins browsers may call from ("*": any;
	// "localhost": the loopback origins); none disables CORS. They also
	// decide which web pages may send state-changing requests (every
	// method but GET, HEAD and OPTIONS): a request carrying an Origin
	// that is neither the server's own nor allowed here, or marked
	// "Sec-Fetch-Site: cross-site" without an allowed Origin, gets a
	// 403, even the no-cors requests that CORS alone never stops.
	// Whatever they say, a POST from another origin whose body a page
	// can send without a CORS preflight (text/plain, a form, multipart,
	// no type) is a 403. Requests without Origin (curl, SDKs) are not
	// affected. "*" allows every web page the user visits to call the
	// API (New logs a warning); examples/server defaults to "localhost"
	// without an API key, and to "*" with one.
	CORSOrigins []string
	// AllowedHosts are the Host names the server answers besides its
	// own, against DNS rebinding (--allowed-hosts). Whatever the
	// connection, the Host must be localhost, a name under .localhost, a
	// loopback address, this machine's name (os.Hostname, with .local,
	// and its other names in /etc/hosts) or one of these; on a
	// connection received on an address other than loopback, any IP
	// address is answered too. Entries are host names without port;
	// "*.example.com" allows the names under example.com; "*" turns the
	// check off. A server reached by another name (a DNS name, a reverse
	// proxy forwarding its public Host) needs that name here.
	AllowedHosts []string
	// CORSMethods and CORSHeaders are what preflights allow (""
	// llama-server's defaults: "GET, POST, DELETE, OPTIONS" and "*").
	CORSMethods, CORSHeaders string
	// NoCORSCredentials stops allowing credentials (--no-cors-credentials).
	NoCORSCredentials bool
	// Metrics enables GET /metrics.
	Metrics bool
	// Slots enables GET /slots.
	Slots bool
	// SlotsDebug adds to each slot of GET /slots its prompt, the text
	// generated, and its request's full parameters, as llama-server with
	// LLAMA_SERVER_SLOTS_DEBUG set (default: the parameters it keeps for
	// metrics only).
	SlotsDebug bool
	// PropsEndpoint enables POST /props (changing global properties);
	// without it POST /props answers 501, as llama.cpp without --props.
	PropsEndpoint bool
	// SlotSavePath is the folder of POST /slots/{id}?action=save|restore
	// ("" disables them).
	SlotSavePath string

	// ChatTemplate is a built-in template name (see chat.BuiltinTemplateNames)
	// or Jinja source overriding the model's template.
	ChatTemplate string
	// ChatTemplateFile is a file holding the Jinja template.
	ChatTemplateFile string
	// Jinja is llama-server's --jinja (its default): a ChatTemplate that
	// is not a built-in name is then Jinja source even without tags
	// (rendered as is), and a chat's response_format or json_schema is
	// matched after optional whitespace or a ```json fence, the content
	// being the JSON alone (an empty schema asks for nothing). Without it
	// (--no-jinja) the schema's grammar is used alone and {} asks for an
	// object. Templates are rendered as Jinja either way.
	Jinja bool
	// ReasoningFormat is --reasoning-format ("none", "deepseek", "auto").
	ReasoningFormat string
	// SkipChatParsing renders chats with the template as it is and sends
	// the whole output as content: no tool calls or reasoning are parsed
	// out, and no tool-call grammar is imposed (--skip-chat-parsing).
	SkipChatParsing bool
	// NoPrefillAssistant renders a chat's trailing assistant message as a
	// whole message, answered in a new turn, instead of continuing it
	// (--no-prefill-assistant).
	NoPrefillAssistant bool
	// ReasoningBudget, when positive, is the most tokens a chat's thinking
	// block may take (--reasoning-budget): then the thinking is ended with
	// ReasoningBudgetMessage and the template's end-of-thinking tag, forced
	// token by token, and the answer follows. It applies to templates
	// with thinking tags (found as for continued messages); a request's
	// reasoning_budget_tokens or thinking_budget_tokens (0: end at once)
	// and reasoning_budget_message override them. 0: no budget.
	ReasoningBudget        int
	ReasoningBudgetMessage string
	// Reasoning is --reasoning: "on" or "off" turn the templates' thinking
	// on or off (enable_thinking) unless a request says otherwise;
	// "" or "auto" leave it to the template.
	Reasoning string

	// SleepIdleSeconds unloads a model after that long without requests
	// and reloads it on the next one (0: never).
	SleepIdleSeconds int
	// Timeout bounds each request (0: none).
	Timeout time.Duration
	// MediaPath is a folder whose files requests may name with file://
	// URLs (a path relative to it) in image_url and input_audio parts, as
	// llama-server's --media-path: only regular files inside it, of at
	// most MaxBodyBytes ("": file:// URLs are refused).
	MediaPath string
	// MaxBodyBytes bounds request bodies (0: 64 MiB).
	MaxBodyBytes int64
	// BodyBytesInFlight bounds the request body bytes held at once by
	// all the requests in flight; bytes count as they arrive, until
	// their request is answered, and a JSON body also counts what
	// decoding it builds (160 bytes an array or object, 24 any other
	// value or key; a body that alone would pass the bound is a 413). A
	// body that finds the budget full waits up to a second for room,
	// then its request is a 503. 0: four
	// largest bodies (4 × MaxBodyBytes), at least 256 MiB; negative: no
	// bound. It is never less than one largest body.
	BodyBytesInFlight int64
	// SSEPing is how long an event stream may stay silent before the
	// server sends a comment line (":"), as llama-server's
	// --sse-ping-interval: clients and proxies that give up on a silent
	// response (Node's fetch, after 300 s) keep it open through a long
	// prompt (0: 30 s; negative: none).
	SSEPing time.Duration
	// BodyReadTimeout is the longest wait for a request body's next
	// bytes, once a handler reads it; past it the connection is closed
	// (0: 60 s; negative: none, the http.Server's ReadTimeout alone).
	BodyReadTimeout time.Duration
	// WriteTimeout is the longest a response may wait for the client to
	// take its next bytes (a client that stops reading); past it the
	// write fails, the connection is closed and the request ends. It
	// bounds each write, not the response, as llama-server's write
	// timeout: a stream read as it comes runs as long as its generation,
	// where http.Server.WriteTimeout would cut it (0: 60 s; negative:
	// none).
	WriteTimeout time.Duration

	// LogPromptsDir, when set, is a folder where every completion
	// request's prompt is written as the model reads it (the chat
	// template applied, special tokens as text, media as <__media__>):
	// one file a request, named by the time in milliseconds, holding the
	// text, or a JSON array for several prompts (llama-server's
	// --log-prompts-dir). For debugging templates and clients: the files
	// hold the conversations, so New makes the folder 0700 and the files
	// are 0600. A file that cannot be written is logged, and the request
	// goes on.
	LogPromptsDir string

	// NoUI turns the web chat page off (--no-ui): GET / then answers 404
	// like any unknown path. The zero value serves the page at "/", as
	// llama-server does; the page needs no API key (the API calls it makes
	// do, and it asks the user for one).
	NoUI bool
	// UIPath is a folder of static files served at "/" instead of the
	// built-in page (--path); "/" serves its index.html, folders are not
	// listed, and, like the page, the files need no API key. New fails
	// when it is not a folder.
	UIPath string
	// UIConfig is a JSON object of default UI settings (--ui-config),
	// reported as "ui_settings" by GET /props. The built-in page reads
	// systemMessage, temperature, top_k, top_p, min_p, max_tokens, seed,
	// repeat_penalty, custom (extra request JSON) and theme ("light",
	// "dark"); the user's own settings override them.
	UIConfig string
	// UIConfigFile is a file holding UIConfig (--ui-config-file); New
	// reads it. UIConfig and UIConfigFile are exclusive.
	UIConfigFile string
	// Tools enables the built-in tools, MCP servers and CORS proxy (all
	// disabled by default).
	Tools ToolsOptions
	// GCP serves Vertex AI's prediction protocol (see GCPOptions and
	// GCPFromEnv), as llama-server does with AIP_MODE=PREDICTION.
	GCP GCPOptions

	// Offline keeps model downloads (POST /models in router mode) off the
	// network: they use the Hugging Face cache only (--offline).
	Offline bool

	// Verbose adds the __verbose debug object (the native /completion
	// result, prompt included) to OpenAI-shaped answers, as llama-server
	// does with --verbose; a request's "verbose" field overrides it.
	Verbose bool

	// ModelOptions are used to load every model.
	ModelOptions llama.ModelOptions
	// Multimodal gives the model a projector for image and audio input
	// (--mmproj and its options).
	Multimodal MultimodalOptions
	// Logger receives the server's logs (nil: slog.Default()).
	Logger *slog.Logger
}

// Server serves models over HTTP. Create it with New, mount Handler in an
// http.Server (or any mux) and Close it when done.
type Server struct {
	opts    Options
	log     *slog.Logger
	router  bool
	handler http.Handler
	started time.Time

	done chan struct{} // closed by Close

	// models is the model list and its lifecycle (loads, sleeps,
	// unloads, downloads).
	models *router.Router[*instance]

	tools    *tools.Set         // nil: /tools answers 403
	proxy    *corsproxy.Proxy   // the client of /cors-proxy
	streams  streamStore        // resumable streams (X-Conversation-Id)
	controls completionControls // chat completions in flight

	// mediaMarker marks a medium's place in prompt text (see
	// newMediaMarker); fixed by New.
	mediaMarker string
	// bodies counts the request body bytes in flight (see
	// Options.BodyBytesInFlight).
	bodies bodyBudget
	// freeing is set while a give-back of memory to the OS runs (see
	// giveBackMemory).
	freeing atomic.Bool
}

// New creates a Server. In single-model mode it loads the model before
// returning; in router mode it lists the models and starts loading those
// marked load-on-startup.
func New(ctx context.Context, o Options) (*Server, error) {
	if ctx == nil {
		return nil, errors.New("server: nil context.Context")
	}
	if o.Model != "" && (o.ModelsDir != "" || o.ModelsPreset != "") {
		return nil, errors.New("server: Model and ModelsDir/ModelsPreset are exclusive")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = defaultMaxBodySize
	}
	if o.NPredict == 0 {
		o.NPredict = -1
	}
	if o.SleepIdleSeconds < 0 || o.ModelsMax < 0 {
		return nil, errors.New("server: SleepIdleSeconds and ModelsMax must not be negative")
	}
	if o.ReasoningFormat == "" {
		o.ReasoningFormat = "auto"
	}
	switch o.Reasoning {
	case "", "auto", "on", "off":
	default:
		return nil, fmt.Errorf("server: Reasoning must be on, off or auto, not %q", o.Reasoning)
	}
	if o.SlotSavePath != "" {
		abs, err := filepath.Abs(o.SlotSavePath)
		if err != nil {
			return nil, fmt.Errorf("server: slot save path: %w", err)
		}
		// Slot files hold conversations: a folder made here is the
		// owner's only (0700), and the files are written 0600. An
		// existing folder keeps the permissions it has.
		if err := os.MkdirAll(abs, 0o700); err != nil {
			return nil, fmt.Errorf("server: slot save path: %w", err)
		}
		o.SlotSavePath = abs
	}
	if o.LogPromptsDir != "" {
		if err := os.MkdirAll(o.LogPromptsDir, 0o700); err != nil {
			return nil, fmt.Errorf("server: log prompts dir: %w", err)
		}
	}
	if o.MediaPath != "" {
		if st, err := os.Stat(o.MediaPath); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("server: media path %s is not a folder", o.MediaPath)
		}
	}
	if err := prepareUI(&o); err != nil {
		return nil, err
	}

	s := &Server{
		opts: o, log: o.Logger, started: time.Now(), router: o.Model == "",
		done: make(chan struct{}), mediaMarker: newMediaMarker(),
	}
	s.bodies.limit = bodyBudgetBytes(o)
	models, err := router.New(ctx, router.Config[*instance]{
		Model: o.Model, Aliases: splitAliases(o.Alias), Dir: o.ModelsDir, Preset: o.ModelsPreset,
		Max: o.ModelsMax, SleepIdleSeconds: o.SleepIdleSeconds, Offline: o.Offline, Jinja: o.Jinja,
		Tags: o.Tags, Open: s.openInstance, Log: o.Logger,
	})
	if err != nil {
		return nil, err
	}
	s.models = models
	toolSet, err := tools.New(ctx, tools.Options(o.Tools), o.Logger)
	if err != nil {
		models.Stop()
		models.Drain(ctx)
		return nil, err
	}
	s.tools = toolSet
	s.proxy = corsproxy.New(o.Tools.CORSProxyAllowPrivate, o.Logger)
	s.handler = s.buildHandler()
	s.warnExposure()

	if !s.router {
		e, _ := models.Lookup("")
		if err := models.Load(ctx, e); err != nil {
			_ = s.Close()
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("server: load %s: %w", o.Model, err)
		}
		return s, nil
	}
	models.Start()
	return s, nil
}

// splitAliases returns the comma-separated names of an alias, trimmed,
// without duplicates, in alphabetical order.
func splitAliases(a string) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range strings.Split(a, ",") {
		if n = strings.TrimSpace(n); n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Options returns the options the server runs with (defaults filled in).
func (s *Server) Options() Options { return s.opts }

// Handler returns the server's HTTP handler. It can be mounted under a
// prefix with http.StripPrefix.
func (s *Server) Handler() http.Handler { return s.handler }

// Close shuts the server down gracefully: new requests get 503, requests
// in flight run to completion (for up to 30 seconds, after which they are
// cancelled), then every model is unloaded. It is safe to call more than
// once. Use Shutdown for another grace period.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s.Shutdown(ctx)
}

// Shutdown is Close with the grace period of ctx: it waits for requests in
// flight until they finish or ctx is done, then cancels what still runs,
// aborts loads in progress and unloads every model. Later calls return at
// once.
func (s *Server) Shutdown(ctx context.Context) error {
	if !s.models.Stop() {
		return nil
	}
	close(s.done)
	if s.tools != nil {
		s.tools.Abort()
	}
	s.streams.closeAll()
	// Drain: each instance closes itself when its last request releases
	// it, or once ctx is done.
	s.models.Drain(ctx)
	if s.tools != nil {
		s.tools.Close()
	}
	return nil
}

// AbortToolCalls cancels the /tools calls in flight (built-in tools and
// MCP servers) and refuses new ones, as llama-server does first when it
// shuts down: call it before draining the HTTP server (for example with
// http.Server.RegisterOnShutdown) so that a slow tool does not hold the
// drain. Close and Shutdown call it too.
func (s *Server) AbortToolCalls() {
	if s.tools != nil {
		s.tools.Abort()
	}
}

// warnExposure logs, at start, the settings that let web pages the user
// visits reach the server: CORS allowing every origin, and the CORS
// proxy.
func (s *Server) warnExposure() {
	if newOriginPolicy(s.opts.CORSOrigins).any {
		msg := "CORS allows every origin ('*'): any web page the user visits can call this server's API"
		if len(s.opts.APIKeys) == 0 {
			msg += ", and no API key is set"
		}
		s.log.Warn(msg)
	}
	if s.opts.Tools.CORSProxy {
		msg := "the CORS proxy (/cors-proxy) is on: the server fetches URLs for its web page"
		if s.opts.Tools.CORSProxyAllowPrivate {
			msg += ", loopback, private and link-local addresses included (cloud metadata too)"
		}
		s.log.Warn(msg)
	}
}
