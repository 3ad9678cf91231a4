// Package wire holds the internal request of the server's chat-shaped
// endpoints and the decoding of request bodies. Each dialect (OpenAI,
// Anthropic, Responses, the native API) decodes its body once into a typed
// struct built of this package's field types (Decode) and translates it
// into a Chat, which the server turns into an engine request. Errors of
// decoding and translating are *Error, which the server answers as 400
// invalid_request_error with the error's text.
package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"github.com/x/llama/chat"
)

// Error is a client's mistake in a request: the server answers it with
// status 400, type invalid_request_error and Msg as the message.
type Error struct {
	Msg string
}

func (e *Error) Error() string { return e.Msg }

// Errorf returns an *Error with a formatted message.
func Errorf(format string, args ...any) *Error {
	return &Error{Msg: fmt.Sprintf(format, args...)}
}

// Chat is the internal chat request every chat-shaped dialect translates
// to, in package chat's types; the server turns it into a task and a plan
// to read its output with.
type Chat struct {
	Messages []chat.Message
	Tools    []chat.Tool
	// ToolChoice is auto (the default), none, required or function.
	ToolChoice chat.ToolChoice
	// Parallel allows several tool calls (nil: when the template can).
	Parallel *bool
	// AddGenerationPrompt opens the assistant turn (the default).
	AddGenerationPrompt bool
	// Extra are template variables (chat_template_kwargs, enable_thinking).
	Extra map[string]any
	// Reasoning is the reasoning format ("" for the server's).
	Reasoning string
	// Schema is a JSON Schema the answer must follow (response_format).
	Schema json.RawMessage
	// Media are the images and audio of the messages, in order; their
	// places in the text are marked with the server's media marker.
	Media []Media
	// Continue continues the last message (continue_final_message):
	// "auto", "content" or "reasoning_content"; "" does not, except that
	// a conversation ending with an assistant message is continued.
	Continue string
	// AllowEmpty accepts no messages at all.
	AllowEmpty bool
	// ReasoningEffort is OpenAI's reasoning_effort: "none" turns thinking
	// off, another value is passed to the template ("": not given).
	ReasoningEffort string
	// Model is the model name the answer reports ("": the instance's).
	Model string
	// N is the number of choices (OpenAI's "n"; 0 means 1).
	N int
	// Gen holds the generation parameters: llama.cpp's fields, as the
	// body gave them or as a dialect's converter maps its own onto them
	// (with --jinja, Gen.JSONSchema is the answer's schema).
	Gen Gen
	// Opts are the OpenAI chat settings beyond generation.
	Opts ChatFields
}

// Media is one medium of a request, still encoded.
type Media struct {
	Data []byte
	Kind string // "image" or "audio", as the request said
	// File is the path of a file:// URL, read from the server's media
	// folder when the prompt is tokenized (Data is then nil).
	File string
}

// ChatFields are the chat settings of OpenAI's chat completions (and of
// the bodies that embed them) beyond the conversation and generation.
type ChatFields struct {
	MaxCompletionTokens Num                `json:"max_completion_tokens"`
	Logprobs            Opt[bool]          `json:"logprobs"`
	TopLogprobs         Num                `json:"top_logprobs"`
	StreamOptions       Opt[StreamOptions] `json:"stream_options"`
	// The thinking budget.
	ReasoningBudgetTokens  Num         `json:"reasoning_budget_tokens"`
	ThinkingBudgetTokens   Num         `json:"thinking_budget_tokens"`
	ReasoningBudgetMessage Opt[string] `json:"reasoning_budget_message"`
	// ReasoningControl lets POST /v1/chat/completions/control end the
	// thinking of this chat.
	ReasoningControl Opt[bool] `json:"reasoning_control"`
}

// StreamOptions is OpenAI's stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Gen are the generation parameters of a request, llama.cpp's /completion
// fields, as decoded by Decode: the native, OpenAI and Responses bodies
// embed them, and the other dialects' converters set them from typed
// fields of their own (Anthropic's temperature, a transcription form's
// max_tokens), which are then checked as the same field in JSON would be.
type Gen struct {
	// Params are the body's plain numbers by name; the server reads those
	// of its table of numeric generation parameters.
	Params Params

	Seed                Num             `json:"seed"`
	DRYSequenceBreakers Strs            `json:"dry_sequence_breakers"`
	IgnoreEOS           Opt[bool]       `json:"ignore_eos"`
	BackendSampling     Opt[bool]       `json:"backend_sampling"`
	CachePrompt         Opt[bool]       `json:"cache_prompt"`
	NCacheReuse         Num             `json:"n_cache_reuse"`
	Stop                Strs            `json:"stop"`
	Stream              Opt[bool]       `json:"stream"`
	ReturnTokens        Opt[bool]       `json:"return_tokens"`
	TimingsPerToken     Opt[bool]       `json:"timings_per_token"`
	PostSamplingProbs   Opt[bool]       `json:"post_sampling_probs"`
	Verbose             Opt[bool]       `json:"verbose"`
	ReturnProgress      Opt[bool]       `json:"return_progress"`
	ResponseFields      Opt[StringList] `json:"response_fields"`
	Samplers            json.RawMessage `json:"samplers"`   // an array of names or a string of letters
	LogitBias           json.RawMessage `json:"logit_bias"` // pairs or an object
	LoRA                Opt[[]LoraItem] `json:"lora"`
	Grammar             Opt[string]     `json:"grammar"`
	JSONSchema          json.RawMessage `json:"json_schema"`
	GrammarLazy         Opt[bool]       `json:"grammar_lazy"`
	GrammarTriggers     Opt[[]Trigger]  `json:"grammar_triggers"`
	PreservedTokens     Opt[[]string]   `json:"preserved_tokens"`
	SpecNMax            Num             `json:"speculative.n_max"`
	SpecNMin            Num             `json:"speculative.n_min"`
	SpecPMin            Num             `json:"speculative.p_min"`
}

// Trigger is an entry of grammar_triggers, in llama.cpp's shape: type 0
// a token (its id in token), 1 a word, 2 a pattern that may match
// anywhere, 3 one that must match the whole text.
type Trigger struct {
	Type  *int    `json:"type"`
	Value *string `json:"value"`
	Token *int    `json:"token"`
}

// LoraItem is an entry of lora.
type LoraItem struct {
	ID    *int     `json:"id"`
	Scale *float32 `json:"scale"`
}

// Params are a request's numeric values by name. Decode fills a field of
// this type with every non-null value of the body (a value that is not a
// number reports its error when read as one).
type Params map[string]Num

// decodeParams reads the values of f.
func decodeParams(f Fields) Params {
	out := Params{}
	for name, raw := range f {
		if IsNull(raw) {
			continue
		}
		var o Num
		_ = o.UnmarshalJSON(raw)
		o.SetName(name)
		out[name] = o
	}
	return out
}

// SetInt and SetFloat give the parameter name the value n or v, as a
// dialect's converter maps a typed field of its own onto it.
func (pv *Params) SetInt(name string, n int64) { pv.put(NumInt(name, n)) }

// SetFloat: see SetInt.
func (pv *Params) SetFloat(name string, v float64) { pv.put(NumFloat(name, v)) }

// Has reports whether the parameter name is given.
func (pv Params) Has(name string) bool { return pv[name].Set }

func (pv *Params) put(o Num) {
	if *pv == nil {
		*pv = Params{}
	}
	(*pv)[o.name] = o
}

// Fields is a JSON object body as Decode first reads it: its values by
// key, undecoded.
type Fields map[string]json.RawMessage

// ParseFields decodes a JSON object body.
func ParseFields(body []byte) (Fields, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, Errorf("the request body is empty")
	}
	if body[0] != '{' {
		return nil, Errorf("the request body must be a JSON object")
	}
	var f Fields
	if err := json.Unmarshal(body, &f); err != nil {
		return nil, Errorf("malformed JSON: %v", err)
	}
	if f == nil {
		f = Fields{}
	}
	return f, nil
}

// MaxFields is the most fields a request body may have: each costs a
// map entry and a copy of its value, about 250 bytes for a one-letter
// field, and no request has more than a hundred.
const MaxFields = 4096

// Shape is what one pass over a JSON text's bytes tells before it is
// decoded: how deep its arrays and objects nest, and how many entries the
// outer array or object has (and among an array's entries the numbers),
// the size of what decoding it would build.
type Shape struct {
	Depth, Entries, Numbers int
	// Containers counts the arrays and objects at every depth, Scalars
	// the other values and the keys.
	Containers, Scalars int
}

// ShapeOf reads the shape of raw. Only its brackets, commas and strings
// are read: the counts are exact for valid JSON, and raw is not otherwise
// validated.
func ShapeOf(raw []byte) Shape {
	var sh Shape
	depth, inString, escaped, start := 0, false, false, true
	bare := false // inside a number, true, false or null
	for _, c := range raw {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		first := depth == 1 && start
		switch c {
		case ' ', '\t', '\n', '\r', ':':
			bare = false
			continue
		case ',':
			start, bare = depth == 1, false
			continue
		case ']', '}':
			depth--
			bare = false
			continue
		case '"':
			inString = true
			sh.Scalars++
		case '[', '{':
			depth++
			sh.Depth = max(sh.Depth, depth)
			sh.Containers++
		default:
			if !bare {
				bare = true
				sh.Scalars++
			}
			if first && (c == '-' || c >= '0' && c <= '9') {
				sh.Numbers++
			}
		}
		if first {
			sh.Entries++
			start = false
		}
	}
	return sh
}

// IsNull reports whether v is JSON null.
func IsNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }

// IsEmptyObject reports whether v is the JSON object {}.
func IsEmptyObject(v json.RawMessage) bool {
	var m map[string]json.RawMessage
	return Kind(v) == 'o' && json.Unmarshal(v, &m) == nil && len(m) == 0
}

// Kind returns the JSON kind of a value: 'o', 'a', 's', 'n', 'b' or 0
// when empty or null.
func Kind(v json.RawMessage) byte {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return 0
	}
	switch v[0] {
	case '{':
		return 'o'
	case '[':
		return 'a'
	case '"':
		return 's'
	case 't', 'f':
		return 'b'
	case 'n':
		return 0
	}
	return 'n'
}

// CheckFloat stores v in dst if it fits a float32.
func CheckFloat(key string, v float64, dst *float32) error {
	if math.IsNaN(v) || math.Abs(v) > math.MaxFloat32 {
		return Errorf("%q is out of range", key)
	}
	*dst = float32(v)
	return nil
}

// CheckInt stores n in dst if it is in [lo, hi].
func CheckInt(key string, n int64, dst *int, lo, hi int64) error {
	if n < lo || n > hi {
		return Errorf("%q must be between %d and %d, got %d", key, lo, hi, n)
	}
	*dst = int(n)
	return nil
}

// ModelField is llama-server's optional "model" field, which names the
// instance that serves a request.
type ModelField struct {
	Model Opt[string] `json:"model"`
}

// ModelName reads the field ("" when absent).
func (m *ModelField) ModelName() (string, error) {
	var model string
	err := m.Model.Read(&model, "a string")
	return model, err
}

// AllowedToolChoice is an allowed_tools tool choice (OpenAI's, in the
// chat and Responses shapes alike): mode (auto or required) among the
// tools of names. An empty list allows none: auto then answers in text,
// as "none" does, and required is refused.
func AllowedToolChoice(mode string, names []string) (chat.ToolChoice, error) {
	switch {
	case mode != "auto" && mode != "required":
		return chat.ToolChoice{}, Errorf(`"tool_choice" allowed_tools mode must be "auto" or "required", got %q`, mode)
	case len(names) > 0:
		return chat.ToolChoice{Mode: mode, Allowed: names}, nil
	case mode == "auto":
		return chat.ToolChoice{Mode: "none"}, nil
	}
	return chat.ToolChoice{}, Errorf(`"tool_choice" allowed_tools with mode "required" must list a function`)
}
