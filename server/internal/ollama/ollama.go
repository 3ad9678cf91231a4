// Package ollama is the server's dialect of Ollama's API, which many apps
// and libraries speak (Open WebUI, Continue, LangChain's ChatOllama, the
// ollama Python and JavaScript clients): its wire types, the translation
// of POST /api/chat and POST /api/generate into the internal wire.Chat
// (ToChat, GenerateChat) or a plain prompt's generation parameters
// (GenerateGen), and the answers, whole or as the lines of a stream
// (Stream). The server's handlers decode a body, run it and write what
// this package builds; errors of translation are *wire.Error (a 400).
//
// The model is the one the server was started with (or, in router mode,
// the one "model" names); the options that configure a model's load in
// Ollama (num_ctx, num_gpu, num_thread, use_mmap...) and keep_alive are
// accepted and ignored.
package ollama

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/x/llama/chat"
	"github.com/x/llama/engine"
	"github.com/x/llama/server/internal/wire"
)

// APIVersion is what GET /api/version reports: the version of Ollama
// whose API this dialect follows (its official Go client of that version
// is tested against it). Clients compare it to decide which fields they
// may send.
const APIVersion = "0.17.4"

// Wire types of the requests.
type (
	// ChatRequest is the body of POST /api/chat.
	ChatRequest struct {
		Base
		Messages []Message `json:"messages"`
		Tools    []Tool    `json:"tools"`
		// Format is "json" or a JSON Schema the answer must follow.
		Format json.RawMessage `json:"format"`
		// Options are the sampling options (Options).
		Options Options `json:"options"`
		// Stream is true unless false.
		Stream *bool `json:"stream"`
		// Think is true, false or a level ("low", "medium", "high").
		Think json.RawMessage `json:"think"`
		Logprobs
		TopLevel
	}
	// TopLevel are sampling settings some clients send beside "options"
	// rather than in it (the AI SDK's Ollama provider does): Ollama
	// ignores them, and here they count where "options" leaves them out,
	// so that what the client asked for is what it gets.
	TopLevel struct {
		Temperature     json.RawMessage `json:"temperature"`
		TopP            json.RawMessage `json:"top_p"`
		MaxOutputTokens json.RawMessage `json:"max_output_tokens"`
	}
	// Base are the fields of every request that runs a model: its name,
	// and how long to keep it loaded after (see UnloadAfter).
	Base struct {
		Model     string          `json:"model"`
		KeepAlive json.RawMessage `json:"keep_alive"`
	}
	// Logprobs asks for the log probability of each generated token, and
	// of the TopLogprobs most likely tokens at each place (0 to 20).
	Logprobs struct {
		Logprobs    bool `json:"logprobs"`
		TopLogprobs int  `json:"top_logprobs"`
	}
	// GenerateRequest is the body of POST /api/generate.
	GenerateRequest struct {
		Base
		Prompt string   `json:"prompt"`
		Suffix string   `json:"suffix"`
		System string   `json:"system"`
		Images []string `json:"images"`
		// Template is a Go template of Ollama's; the model's own chat
		// template is used here, so one given is refused.
		Template string          `json:"template"`
		Format   json.RawMessage `json:"format"`
		Options  Options         `json:"options"`
		Stream   *bool           `json:"stream"`
		Raw      bool            `json:"raw"`
		Think    json.RawMessage `json:"think"`
		// Context is the deprecated token list of an earlier answer,
		// which continues it; it is put before the prompt.
		Context []int `json:"context"`
		Logprobs
		TopLevel
	}
	// Message is a message of a chat, asked or answered.
	Message struct {
		Role     string `json:"role"`
		Content  string `json:"content"`
		Thinking string `json:"thinking,omitempty"`
		// Images are base64 images (no data: prefix).
		Images    []string   `json:"images,omitempty"`
		ToolCalls []ToolCall `json:"tool_calls,omitempty"`
		// ToolName names the tool whose result a tool message is, and
		// ToolCallID the call it answers.
		ToolName   string `json:"tool_name,omitempty"`
		ToolCallID string `json:"tool_call_id,omitempty"`
	}
	ToolCall struct {
		ID       string           `json:"id,omitempty"`
		Function ToolCallFunction `json:"function"`
	}
	ToolCallFunction struct {
		Index     int             `json:"index"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	// Tool is a function the model may call.
	Tool struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	// Options are the "options" object: numbers by name, and stop.
	Options map[string]json.RawMessage
	// EmbedRequest is the body of POST /api/embed.
	EmbedRequest struct {
		Base
		// Input is a string or an array of strings.
		Input    json.RawMessage `json:"input"`
		Truncate *bool           `json:"truncate"`
		// Dimensions keeps each vector's first values, normalized
		// again; nil keeps them all.
		Dimensions *int    `json:"dimensions"`
		Options    Options `json:"options"`
	}
	// EmbeddingsRequest is the body of the older POST /api/embeddings.
	EmbeddingsRequest struct {
		Base
		Prompt  string  `json:"prompt"`
		Options Options `json:"options"`
	}
	// ShowRequest is the body of POST /api/show.
	ShowRequest struct {
		Model string `json:"model"`
		// Name is the older name of Model.
		Name    string `json:"name"`
		Verbose bool   `json:"verbose"`
	}
)

// Wire types of the answers.
type (
	// Metrics are the counts and durations (nanoseconds) of a finished
	// generation.
	Metrics struct {
		TotalDuration      int64 `json:"total_duration,omitempty"`
		LoadDuration       int64 `json:"load_duration,omitempty"`
		PromptEvalCount    int   `json:"prompt_eval_count,omitempty"`
		PromptEvalDuration int64 `json:"prompt_eval_duration,omitempty"`
		EvalCount          int   `json:"eval_count,omitempty"`
		EvalDuration       int64 `json:"eval_duration,omitempty"`
	}
	// ChatResponse is an answer of /api/chat, or a line of its stream.
	ChatResponse struct {
		Model      string    `json:"model"`
		CreatedAt  time.Time `json:"created_at"`
		Message    Message   `json:"message"`
		Done       bool      `json:"done"`
		DoneReason string    `json:"done_reason,omitempty"`
		// Logprobs are those of the tokens of this answer or line.
		Logprobs []wire.Prob `json:"logprobs,omitempty"`
		Metrics
	}
	// GenerateResponse is an answer of /api/generate, or a line of its
	// stream.
	GenerateResponse struct {
		Model      string      `json:"model"`
		CreatedAt  time.Time   `json:"created_at"`
		Response   string      `json:"response"`
		Thinking   string      `json:"thinking,omitempty"`
		Done       bool        `json:"done"`
		DoneReason string      `json:"done_reason,omitempty"`
		Context    []int       `json:"context,omitempty"`
		Logprobs   []wire.Prob `json:"logprobs,omitempty"`
		Metrics
	}
	EmbedResponse struct {
		Model           string      `json:"model"`
		Embeddings      [][]float32 `json:"embeddings"`
		TotalDuration   int64       `json:"total_duration,omitempty"`
		LoadDuration    int64       `json:"load_duration,omitempty"`
		PromptEvalCount int         `json:"prompt_eval_count,omitempty"`
	}
	EmbeddingsResponse struct {
		Embedding []float32 `json:"embedding"`
	}
	// Details describe a model's file.
	Details struct {
		ParentModel       string   `json:"parent_model"`
		Format            string   `json:"format"`
		Family            string   `json:"family"`
		Families          []string `json:"families"`
		ParameterSize     string   `json:"parameter_size"`
		QuantizationLevel string   `json:"quantization_level"`
	}
	// ListModel is an entry of GET /api/tags and GET /api/ps.
	ListModel struct {
		Name       string    `json:"name"`
		Model      string    `json:"model"`
		ModifiedAt time.Time `json:"modified_at,omitzero"`
		Size       int64     `json:"size"`
		Digest     string    `json:"digest"`
		Details    Details   `json:"details"`
		// ExpiresAt, SizeVRAM and ContextLength are /api/ps's.
		ExpiresAt     *time.Time `json:"expires_at,omitempty"`
		SizeVRAM      *int64     `json:"size_vram,omitempty"`
		ContextLength int        `json:"context_length,omitempty"`
	}
	ListResponse struct {
		Models []ListModel `json:"models"`
	}
	ShowResponse struct {
		License      string         `json:"license,omitempty"`
		Modelfile    string         `json:"modelfile"`
		Parameters   string         `json:"parameters"`
		Template     string         `json:"template"`
		Details      Details        `json:"details"`
		ModelInfo    map[string]any `json:"model_info"`
		Capabilities []string       `json:"capabilities"`
		ModifiedAt   time.Time      `json:"modified_at,omitzero"`
	}
	VersionResponse struct {
		Version string `json:"version"`
	}
	// ErrorLine is an error, as a body or as a stream's last line.
	ErrorLine struct {
		Error string `json:"error"`
	}
)

// Head returns the request's Base, for code that takes any request.
func (b *Base) Head() *Base { return b }

// Streams reports whether a request streams: Ollama's default is true.
func Streams(stream *bool) bool { return stream == nil || *stream }

// samplingOption returns llama.cpp's name of an option passed on:
// num_predict and num_keep are n_predict and n_keep, the sampling options
// (temperature, top_k, top_p, min_p, typical_p, repeat_last_n,
// repeat_penalty, presence_penalty, frequency_penalty, mirostat,
// mirostat_tau, mirostat_eta) keep their names. The others configure a
// model's load or the runner in Ollama and are ignored here (ok false).
func samplingOption(name string) (string, bool) {
	switch name {
	case "num_predict":
		return "n_predict", true
	case "num_keep":
		return "n_keep", true
	case "temperature", "top_k", "top_p", "min_p", "typical_p", "repeat_last_n", "repeat_penalty",
		"presence_penalty", "frequency_penalty", "mirostat", "mirostat_tau", "mirostat_eta":
		return name, true
	}
	return "", false
}

// With returns opts with the top-level settings t added where opts has
// none of its own (max_output_tokens as num_predict); opts is left as it
// is.
func (t TopLevel) With(opts Options) Options {
	var out Options
	for name, raw := range map[string]json.RawMessage{"temperature": t.Temperature, "top_p": t.TopP, "num_predict": t.MaxOutputTokens} {
		if _, ok := opts[name]; ok || len(raw) == 0 {
			continue
		}
		if out == nil {
			out = Options{}
			maps.Copy(out, opts)
		}
		out[name] = raw
	}
	if out == nil {
		return opts
	}
	return out
}

// Gen maps the options onto llama.cpp's generation parameters.
func (o Options) Gen(g *wire.Gen) error {
	for name, raw := range o {
		if wire.IsNull(raw) {
			continue
		}
		switch {
		case name == "stop":
			stop, err := wire.DecodeStrings(raw, wire.MaxStrings)
			if err == wire.ErrTooMany {
				return wire.Errorf(`"options.stop" has more than %d strings`, wire.MaxStrings)
			} else if err != nil {
				return wire.Errorf(`"options.stop" must be an array of strings`)
			}
			g.Stop = wire.SomeStrs("stop", stop)
		case name == "seed":
			if err := g.Seed.UnmarshalJSON(raw); err != nil {
				return wire.Errorf(`"options.seed" must be a number`)
			}
			g.Seed.SetName("seed")
		default:
			to, ok := samplingOption(name)
			if !ok {
				continue
			}
			if wire.Kind(raw) != 'n' {
				return wire.Errorf(`"options.%s" must be a number`, name)
			}
			var n wire.Num
			_ = n.UnmarshalJSON(raw)
			if to == "n_predict" {
				// -2 fills the context in Ollama: here, as -1, until
				// the context ends.
				if v, err := n.Integer(); err == nil && v == -2 {
					n = wire.NumInt(to, -1)
				}
			}
			// Errors name the option as the client sent it.
			n.SetName("options." + name)
			if g.Params == nil {
				g.Params = wire.Params{}
			}
			g.Params[to] = n
		}
	}
	return nil
}

// format reads "format": "json" (any JSON object) or a JSON Schema.
func format(raw json.RawMessage) (json.RawMessage, error) {
	switch wire.Kind(raw) {
	case 0:
		return nil, nil
	case 's':
		var s string
		_ = json.Unmarshal(raw, &s)
		switch s {
		case "":
			return nil, nil
		case "json":
			return json.RawMessage(`{"type":"object"}`), nil
		}
		return nil, wire.Errorf(`"format" must be "json" or a JSON Schema object, got %q`, s)
	case 'o':
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			return nil, wire.Errorf(`"format": %v`, err)
		}
		return b.Bytes(), nil
	}
	return nil, wire.Errorf(`"format" must be "json" or a JSON Schema object`)
}

// think applies "think" to the template's variables: true or false turn
// thinking on or off, a level ("low", "medium", "high") turns it on with
// that reasoning effort. Absent, the template's default holds.
func think(raw json.RawMessage, c *wire.Chat) error {
	switch wire.Kind(raw) {
	case 0:
		return nil
	case 'b':
		var on bool
		_ = json.Unmarshal(raw, &on)
		c.Extra = map[string]any{"enable_thinking": on}
		return nil
	case 's':
		var level string
		_ = json.Unmarshal(raw, &level)
		switch level {
		case "low", "medium", "high":
			c.Extra = map[string]any{"enable_thinking": true, "reasoning_effort": level}
			return nil
		}
	}
	return wire.Errorf(`"think" must be true, false, "low", "medium" or "high"`)
}

// NProbs is the number of candidates to sample with for lp (0: none).
// The sampled token's probability comes with the candidates', so one is
// asked for when only that is.
func (lp Logprobs) NProbs() int {
	if !lp.Logprobs {
		return 0
	}
	return max(lp.TopLogprobs, 1)
}

// Check refuses a top_logprobs out of range.
func (lp Logprobs) Check() error {
	if lp.TopLogprobs < 0 || lp.TopLogprobs > 20 {
		return wire.Errorf(`"top_logprobs" must be between 0 and 20, got %d`, lp.TopLogprobs)
	}
	return nil
}

// Trim leaves out the alternatives of probs when none were asked for.
func (lp Logprobs) Trim(probs []wire.Prob) []wire.Prob {
	if lp.TopLogprobs == 0 {
		for i := range probs {
			probs[i].TopLogprobs = nil
		}
	}
	return probs
}

// newChat is the wire.Chat the chat and generate requests start from.
func newChat(model string, opts Options, formatRaw, thinkRaw json.RawMessage, stream bool, lp Logprobs) (*wire.Chat, error) {
	c := &wire.Chat{AddGenerationPrompt: true, N: 1, Model: model,
		ToolChoice: chat.ToolChoice{Mode: "auto"}, Messages: []chat.Message{}}
	if err := opts.Gen(&c.Gen); err != nil {
		return nil, err
	}
	if err := lp.Check(); err != nil {
		return nil, err
	}
	if n := lp.NProbs(); n > 0 {
		c.Opts.Logprobs = wire.Some("logprobs", true)
		c.Opts.TopLogprobs = wire.NumInt("top_logprobs", int64(n))
	}
	c.Gen.Stream = wire.Some("stream", stream)
	var err error
	if c.Schema, err = format(formatRaw); err != nil {
		return nil, err
	}
	if err := think(thinkRaw, c); err != nil {
		return nil, err
	}
	return c, nil
}

// imageURL makes a data: URL of an Ollama image (base64, or already a
// data: URL).
func imageURL(b64 string) string {
	if strings.HasPrefix(b64, "data:") {
		return b64
	}
	return "data:image/*;base64," + b64
}

// message converts a message with images into one whose content marks
// its media (the images follow the text, as Ollama places them).
func message(c *wire.Chat, role, content string, images []string, marker string) (chat.Message, error) {
	if len(images) == 0 {
		return chat.Message{Role: role, Content: content}, nil
	}
	parts := []wire.TextOrImage{{Text: content}}
	for _, img := range images {
		parts = append(parts, wire.TextOrImage{Image: true, URL: imageURL(img)})
	}
	return wire.MediaMessage(role, parts, len(c.Messages), &c.Media, marker)
}

// ToChat converts an /api/chat request to the internal chat request:
// the messages (with their images, thinking, tool calls and the tool
// messages' names), the tools, "format" as the answer's schema, "think"
// as the template's enable_thinking (and reasoning_effort for a level),
// and the options as llama.cpp's parameters.
func ToChat(req *ChatRequest, marker string) (*wire.Chat, error) {
	c, err := newChat(req.Model, req.TopLevel.With(req.Options), req.Format, req.Think, Streams(req.Stream), req.Logprobs)
	if err != nil {
		return nil, err
	}
	if req.Messages == nil {
		return nil, wire.Errorf(`"messages" is required`)
	}
	// Older clients' calls and tool messages carry no ids, which some
	// templates pair them by: the calls of an assistant message without
	// ids get some, and the tool messages after it without tool_call_id
	// take them in order (by name first).
	var open []chat.ToolCall
	for i, m := range req.Messages {
		m.Role = strings.ToLower(m.Role) // as Ollama reads it
		switch m.Role {
		case chat.RoleUser, chat.RoleAssistant, chat.RoleSystem, chat.RoleTool:
		case "":
			return nil, wire.Errorf("messages[%d] has no role", i)
		default:
			return nil, wire.Errorf("messages[%d] has an unknown role %q (want system, user, assistant or tool)", i, m.Role)
		}
		msg, err := message(c, m.Role, m.Content, m.Images, marker)
		if err != nil {
			return nil, err
		}
		msg.ReasoningContent = m.Thinking
		if m.Role == chat.RoleTool {
			msg.Name = m.ToolName
			at := slices.IndexFunc(open, func(c chat.ToolCall) bool { return c.Name == m.ToolName })
			if at < 0 && len(open) > 0 {
				at = 0
			}
			if m.ToolCallID != "" {
				msg.ToolCallID = m.ToolCallID
				at = slices.IndexFunc(open, func(c chat.ToolCall) bool { return c.ID == m.ToolCallID })
			}
			if at >= 0 {
				msg.ToolCallID = cmp.Or(msg.ToolCallID, open[at].ID)
				if msg.Name == "" {
					msg.Name = open[at].Name
				}
				open = slices.Delete(open, at, at+1)
			}
		}
		for j, tc := range m.ToolCalls {
			if tc.Function.Name == "" {
				return nil, wire.Errorf("messages[%d].tool_calls[%d] has no function name", i, j)
			}
			args := "{}"
			switch wire.Kind(tc.Function.Arguments) {
			case 0:
			case 'o':
				var b bytes.Buffer
				if err := json.Compact(&b, tc.Function.Arguments); err != nil {
					return nil, wire.Errorf("messages[%d].tool_calls[%d].function.arguments: %v", i, j, err)
				}
				args = b.String()
			default:
				return nil, wire.Errorf("messages[%d].tool_calls[%d].function.arguments must be an object", i, j)
			}
			id := cmp.Or(tc.ID, fmt.Sprintf("call_%d_%d", i, j))
			msg.ToolCalls = append(msg.ToolCalls, chat.ToolCall{ID: id, Name: tc.Function.Name, Arguments: args})
		}
		if len(msg.ToolCalls) > 0 {
			open = slices.Clone(msg.ToolCalls)
		}
		c.Messages = append(c.Messages, msg)
	}
	for i, t := range req.Tools {
		if t.Type != "" && t.Type != "function" {
			return nil, wire.Errorf(`tools[%d].type must be "function"`, i)
		}
		if t.Function.Name == "" {
			return nil, wire.Errorf("tools[%d] has no function name", i)
		}
		params := json.RawMessage(`{"type":"object"}`)
		if !wire.IsNull(t.Function.Parameters) && len(t.Function.Parameters) > 0 {
			if wire.Kind(t.Function.Parameters) != 'o' {
				return nil, wire.Errorf("tools[%d].function.parameters must be a JSON Schema object", i)
			}
			params = t.Function.Parameters
		}
		c.Tools = append(c.Tools, chat.Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: params})
	}
	return c, nil
}

// GenerateChat converts an /api/generate request that is neither raw nor
// a fill-in-the-middle (Suffix) into a chat of its system prompt and its
// prompt as the user's message, as Ollama renders it with the model's
// template.
func GenerateChat(req *GenerateRequest, marker string) (*wire.Chat, error) {
	if req.Template != "" {
		return nil, wire.Errorf(`"template" is not supported: the model's own chat template is used`)
	}
	c, err := newChat(req.Model, req.TopLevel.With(req.Options), req.Format, req.Think, Streams(req.Stream), req.Logprobs)
	if err != nil {
		return nil, err
	}
	if req.System != "" {
		c.Messages = append(c.Messages, chat.Message{Role: chat.RoleSystem, Content: req.System})
	}
	msg, err := message(c, chat.RoleUser, req.Prompt, req.Images, marker)
	if err != nil {
		return nil, err
	}
	c.Messages = append(c.Messages, msg)
	return c, nil
}

// GenerateGen returns the generation parameters of a raw or
// fill-in-the-middle /api/generate request, whose prompt is not a chat.
func GenerateGen(req *GenerateRequest) (*wire.Gen, error) {
	if req.Template != "" {
		return nil, wire.Errorf(`"template" is not supported: the model's own chat template is used`)
	}
	if len(req.Images) > 0 {
		return nil, wire.Errorf(`"images" need a prompt the chat template renders: leave "raw" and "suffix" out`)
	}
	if wire.Kind(req.Format) != 0 {
		return nil, wire.Errorf(`"format" needs a prompt the chat template renders: leave "raw" and "suffix" out`)
	}
	var g wire.Gen
	if err := req.TopLevel.With(req.Options).Gen(&g); err != nil {
		return nil, err
	}
	if err := req.Logprobs.Check(); err != nil {
		return nil, err
	}
	if n := req.Logprobs.NProbs(); n > 0 {
		g.Params.SetInt("n_probs", int64(n))
	}
	g.Stream = wire.Some("stream", Streams(req.Stream))
	return &g, nil
}

// UnloadAfter reads "keep_alive" (seconds as a number or a string, or a
// duration such as "5m"; negative: forever) and reports whether it asks
// to unload the model once the request is answered (zero). Other values
// leave the server's own idle policy (--sleep-idle-seconds) in charge.
func UnloadAfter(raw json.RawMessage) (bool, error) {
	var secs float64
	switch wire.Kind(raw) {
	case 0:
		return false, nil
	case 'n':
		if json.Unmarshal(raw, &secs) != nil {
			return false, wire.Errorf(`"keep_alive" must be a number of seconds or a duration`)
		}
	case 's':
		var v string
		_ = json.Unmarshal(raw, &v)
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			secs = f
		} else if d, err := time.ParseDuration(v); err == nil {
			secs = d.Seconds()
		} else {
			return false, wire.Errorf(`"keep_alive" must be a number of seconds or a duration like "5m", got %q`, v)
		}
	default:
		return false, wire.Errorf(`"keep_alive" must be a number of seconds or a duration`)
	}
	return secs == 0, nil
}

// DoneReason is Ollama's done_reason for how a generation ended.
func DoneReason(ev engine.Event) string {
	if ev.Stop == engine.StopTypeLimit {
		return "length"
	}
	return "stop"
}

// MetricsOf are the counts and durations of a finished generation that
// started at start.
func MetricsOf(ev engine.Event, start time.Time) Metrics {
	return Metrics{
		TotalDuration:      int64(time.Since(start)),
		PromptEvalCount:    ev.PromptTokens,
		PromptEvalDuration: int64(ev.Timings.PromptMS * 1e6),
		EvalCount:          ev.Generated,
		EvalDuration:       int64(ev.Timings.PredictedMS * 1e6),
	}
}

// toolCalls converts parsed tool calls to Ollama's, their arguments as
// an object ({} when they do not parse as one).
func toolCalls(calls []chat.ToolCall) []ToolCall {
	var out []ToolCall
	for i, tc := range calls {
		args := json.RawMessage(strings.TrimSpace(tc.Arguments))
		if wire.Kind(args) != 'o' || !json.Valid(args) {
			args = json.RawMessage(`{}`)
		}
		out = append(out, ToolCall{ID: wire.IDOrNew(tc.ID, "call_"), Function: ToolCallFunction{Index: i, Name: tc.Name, Arguments: args}})
	}
	return out
}

// NewChatResponse is the answer msg of a finished chat (final is its last
// event) that started at start.
func NewChatResponse(model string, msg chat.Message, final engine.Event, start time.Time) ChatResponse {
	return ChatResponse{
		Model: model, CreatedAt: time.Now().UTC(), Done: true, DoneReason: DoneReason(final),
		Message: Message{Role: chat.RoleAssistant, Content: msg.Content, Thinking: msg.ReasoningContent, ToolCalls: toolCalls(msg.ToolCalls)},
		Metrics: MetricsOf(final, start),
	}
}

// Stream turns a chat's parsed deltas into the lines of Ollama's stream:
// one line per piece of content or thinking, the tool calls whole once
// their arguments are complete (at the end), and a last line with done,
// the reason and the metrics. Each line goes to send, which reports false
// when the client is gone; so do the methods.
type Stream struct {
	model string
	start time.Time
	send  func(v any) bool
	calls []chat.ToolCall
	// probs are the logprobs of the tokens not yet sent with a line.
	probs []wire.Prob
}

// AddLogprobs adds the logprobs of generated tokens, sent with the next
// line.
func (s *Stream) AddLogprobs(p []wire.Prob) { s.probs = append(s.probs, p...) }

// NewStream returns the stream of a chat with model that started at
// start.
func NewStream(model string, start time.Time, send func(v any) bool) *Stream {
	return &Stream{model: model, start: start, send: send}
}

func (s *Stream) line(m Message) bool {
	m.Role = chat.RoleAssistant
	probs := s.probs
	s.probs = nil
	return s.send(ChatResponse{Model: s.model, CreatedAt: time.Now().UTC(), Message: m, Logprobs: probs})
}

// Delta sends a parsed piece of the answer.
func (s *Stream) Delta(d chat.Delta) bool {
	for _, tc := range d.ToolCalls {
		for len(s.calls) <= tc.Index {
			s.calls = append(s.calls, chat.ToolCall{})
		}
		c := &s.calls[tc.Index]
		if tc.Name != "" {
			c.Name = tc.Name
		}
		if tc.ID != "" {
			c.ID = tc.ID
		}
		c.Arguments += tc.ArgumentsDelta
	}
	if d.Content == "" && d.ReasoningContent == "" {
		return true
	}
	return s.line(Message{Content: d.Content, Thinking: d.ReasoningContent})
}

// Finish sends the last delta d, the tool calls, and the last line with
// the reason and metrics of the final event ev.
func (s *Stream) Finish(ev engine.Event, d chat.Delta) bool {
	if !s.Delta(d) {
		return false
	}
	if len(s.calls) > 0 && !s.line(Message{ToolCalls: toolCalls(s.calls)}) {
		return false
	}
	return s.send(ChatResponse{Model: s.model, CreatedAt: time.Now().UTC(), Message: Message{Role: chat.RoleAssistant},
		Done: true, DoneReason: DoneReason(ev), Metrics: MetricsOf(ev, s.start), Logprobs: s.probs})
}
