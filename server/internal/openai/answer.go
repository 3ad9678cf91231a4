package openai

import (
	"unicode/utf8"

	"github.com/x/llama/engine"
	"github.com/x/llama/server/internal/wire"

	"github.com/x/llama"
	"github.com/x/llama/chat"
)

// SystemFingerprint identifies the server build in OpenAI responses.
const SystemFingerprint = "b0.4.0-go-llama"

// Usage is OpenAI's token usage.
type Usage struct {
	PromptTokens        int                 `json:"prompt_tokens"`
	CompletionTokens    int                 `json:"completion_tokens"`
	TotalTokens         int                 `json:"total_tokens"`
	PromptTokensDetails PromptTokensDetails `json:"prompt_tokens_details"`
}

type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// Add counts the final event of a choice: its generated tokens, and its
// prompt's tokens when prompt is set. As OpenAI's, the n choices of one
// prompt count the prompt once: the caller sets prompt for the first.
func (u *Usage) Add(ev engine.Event, prompt bool) {
	if prompt {
		u.PromptTokens += ev.PromptTokens
		u.PromptTokensDetails.CachedTokens += ev.CachedTokens
	}
	u.CompletionTokens += ev.Generated
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
}

// Logprobs is the logprobs object of a choice: llama.cpp's probability
// entries under "content" (OpenAI's chat shape).
type Logprobs struct {
	Content []wire.Prob `json:"content"`
}

// Completion is a /v1/completions response or stream chunk.
type Completion struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	SystemFingerprint string             `json:"system_fingerprint"`
	Choices           []CompletionChoice `json:"choices"`
	Usage             *Usage             `json:"usage,omitempty"`
	Timings           *wire.Timings      `json:"timings,omitempty"`
	// Verbose is llama-server's __verbose debug object.
	Verbose any `json:"__verbose,omitempty"`
}

type CompletionChoice struct {
	Text         string          `json:"text"`
	Index        int             `json:"index"`
	Logprobs     *LegacyLogprobs `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

// LegacyLogprobs is the logprobs object of a /v1/completions choice in
// OpenAI's legacy shape: per generated token its text, log probability,
// the top alternatives by text, and its character offset in the choice's
// text.
type LegacyLogprobs struct {
	Tokens []string `json:"tokens"`
	// TokenLogprobs is null for an echoed prompt's first token, which
	// nothing comes before, as OpenAI sends it; its TopLogprobs entry is
	// empty rather than null, which OpenAI's Go SDK would drop the whole
	// list for.
	TokenLogprobs []*float64           `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// PromptLogprobs is the legacy logprobs of an echoed prompt: its tokens,
// the first with a null log probability and no top ones, each other with its own given
// the ones before (pp, engine.Request.PromptProbs) and the top ones in its
// place. offsets are the characters of the echoed text before each token.
func PromptLogprobs(m *llama.Model, prompt []llama.Token, pp []engine.PromptProb, offsets []int) *LegacyLogprobs {
	lp := &LegacyLogprobs{TokenLogprobs: make([]*float64, len(prompt)), TopLogprobs: make([]map[string]float64, len(prompt)), TextOffset: offsets}
	for i, tok := range prompt {
		lp.Tokens = append(lp.Tokens, wire.TokenProb(m, engine.TokenProb{Token: tok}, false).Token)
		if i == 0 || i > len(pp) {
			lp.TopLogprobs[i] = map[string]float64{}
			continue
		}
		v := float64(pp[i-1].Token.Logprob)
		lp.TokenLogprobs[i] = &v
		lp.TopLogprobs[i] = topMap(m, pp[i-1].Top)
	}
	return lp
}

// Append adds o's tokens after lp's.
func (lp *LegacyLogprobs) Append(o *LegacyLogprobs) {
	lp.Tokens = append(lp.Tokens, o.Tokens...)
	lp.TokenLogprobs = append(lp.TokenLogprobs, o.TokenLogprobs...)
	lp.TopLogprobs = append(lp.TopLogprobs, o.TopLogprobs...)
	lp.TextOffset = append(lp.TextOffset, o.TextOffset...)
}

// topMap is the legacy top_logprobs of one position: the log probability
// by token text (the first of tokens of the same text).
func topMap(m *llama.Model, probs []engine.TokenProb) map[string]float64 {
	top := make(map[string]float64, len(probs))
	for _, p := range probs {
		tj := wire.TokenProb(m, p, false)
		if _, dup := top[tj.Token]; !dup {
			top[tj.Token] = *tj.Logprob
		}
	}
	return top
}

// NewLegacyLogprobs converts steps to the legacy shape; offset is the number
// of characters of the choice's text before the first step. It returns the
// offset after the last step too, for the next stream chunk.
func NewLegacyLogprobs(m *llama.Model, steps []wire.Step, offset int) (*LegacyLogprobs, int) {
	lp := &LegacyLogprobs{
		Tokens: make([]string, 0, len(steps)), TokenLogprobs: make([]*float64, 0, len(steps)),
		TopLogprobs: make([]map[string]float64, 0, len(steps)), TextOffset: make([]int, 0, len(steps)),
	}
	for _, s := range steps {
		pj := wire.SampledProb(m, s, false)
		lp.Tokens = append(lp.Tokens, pj.Token)
		lp.TokenLogprobs = append(lp.TokenLogprobs, pj.Logprob)
		lp.TopLogprobs = append(lp.TopLogprobs, topMap(m, s.Probs))
		lp.TextOffset = append(lp.TextOffset, offset)
		offset += utf8.RuneCountInString(s.Text)
	}
	return lp, offset
}

// FinishReason maps a stop reason to OpenAI's.
func FinishReason(r engine.StopType, toolCalls bool) string {
	switch r {
	case engine.StopTypeEOS, engine.StopTypeWord:
		if toolCalls {
			return "tool_calls"
		}
		return "stop"
	}
	return "length"
}

// Wire types of chat completion responses.
type (
	ChatCompletion struct {
		ID                string        `json:"id"`
		Object            string        `json:"object"`
		Created           int64         `json:"created"`
		Model             string        `json:"model"`
		SystemFingerprint string        `json:"system_fingerprint"`
		Choices           []ChatChoice  `json:"choices"`
		Usage             *Usage        `json:"usage,omitempty"`
		Timings           *wire.Timings `json:"timings,omitempty"`
		// Verbose is llama-server's __verbose debug object (the native
		// /completion result), with "verbose" or --verbose.
		Verbose any `json:"__verbose,omitempty"`
		// engine.PromptProgress is set on the progress chunks of return_progress.
		PromptProgress *wire.Progress `json:"prompt_progress,omitempty"`
	}
	ChatChoice struct {
		Index        int            `json:"index"`
		Message      *AnswerMessage `json:"message,omitempty"`
		Delta        any            `json:"delta,omitempty"` // *ChatMessage or FirstDelta
		Logprobs     *Logprobs      `json:"logprobs,omitempty"`
		FinishReason *string        `json:"finish_reason"`
	}
	// FirstDelta is the first streamed delta, as llama-server (and
	// OpenAI) send it: the role, with content null.
	FirstDelta struct {
		Role    string  `json:"role"`
		Content *string `json:"content"`
	}
	// AnswerMessage is a whole answer's message. Its content is always
	// there, null beside tool calls when there is no text, as OpenAI
	// sends it (the API describes the field as required).
	AnswerMessage struct {
		Role             string     `json:"role"`
		Content          *string    `json:"content"`
		ReasoningContent string     `json:"reasoning_content,omitempty"`
		ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	}
	// ChatMessage is a streamed delta of an assistant message.
	ChatMessage struct {
		Role             string     `json:"role,omitempty"`
		Content          *string    `json:"content,omitempty"`
		ReasoningContent string     `json:"reasoning_content,omitempty"`
		ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	}
	ToolCall struct {
		Index    *int         `json:"index,omitempty"`
		ID       string       `json:"id,omitempty"`
		Type     string       `json:"type,omitempty"`
		Function ToolFunction `json:"function"`
	}
	ToolFunction struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	}
)

// NullableContent is OpenAI's content: "" becomes null when the message
// carries tool calls.
func NullableContent(s string, toolCalls bool) *string {
	if s == "" && toolCalls {
		return nil
	}
	return &s
}

// AssistantMessage is a chat's answer message: msg's content (null when
// empty beside tool calls), reasoning and tool calls, each call with its id
// or a new one.
func AssistantMessage(msg chat.Message) *AnswerMessage {
	out := &AnswerMessage{Role: chat.RoleAssistant, ReasoningContent: msg.ReasoningContent}
	for _, tc := range msg.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, ToolCall{ID: wire.IDOrNew(tc.ID, "call_"), Type: "function", Function: ToolFunction{Name: tc.Name, Arguments: tc.Arguments}})
	}
	out.Content = NullableContent(msg.Content, len(out.ToolCalls) > 0)
	return out
}

// Deltas writes the streamed deltas of one choice: a tool call's id and
// type go with its first delta only.
type Deltas struct {
	ids   map[int]string
	calls bool
}

// Message is d as a streamed delta.
func (s *Deltas) Message(d chat.Delta) *ChatMessage {
	m := &ChatMessage{ReasoningContent: d.ReasoningContent}
	if d.Content != "" {
		c := d.Content
		m.Content = &c
	}
	for _, tc := range d.ToolCalls {
		s.calls = true
		ti := tc.Index
		call := ToolCall{Index: &ti, Function: ToolFunction{Name: tc.Name, Arguments: tc.ArgumentsDelta}}
		if _, seen := s.ids[ti]; !seen {
			if s.ids == nil {
				s.ids = map[int]string{}
			}
			id := wire.IDOrNew(tc.ID, "call_")
			s.ids[ti] = id
			call.ID, call.Type = id, "function"
		}
		m.ToolCalls = append(m.ToolCalls, call)
	}
	return m
}

// ToolCalls reports whether a delta carried a tool call (the finish
// reason is then tool_calls).
func (s *Deltas) ToolCalls() bool { return s.calls }
