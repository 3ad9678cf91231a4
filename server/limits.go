package server

// Limits on the work and memory one request can ask for. A client sends
// numbers and lists; the server must never turn them into allocations or
// loops larger than the model and the context can use:
//
//   - window sizes (repeat_last_n, dry_penalty_last_n, dry_allowed_length,
//     n_keep) are clamped to the slot's context, top_k and n_probs to the
//     vocabulary, before any sampler is built (the clamps are in
//     sampling.Table, and the engine applies them too);
//   - lists (stop strings, DRY sequence breakers, logit_bias entries) have
//     a bounded count, and their strings a bounded length;
//   - a request holds at most as many prompts (or embedding inputs, or
//     rerank documents) as the engine can ever queue at once: more is a 413
//     naming the limit, not a retryable 503;
//   - a prompt text longer than any text that could fit the context is
//     refused before it is tokenized;
//   - JSON bodies and grammars have a bounded nesting depth, and a grammar
//     that allows no first token at all is a 400;
//   - after a large request the memory it used is given back to the OS.

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/x/llama/chat"
	"github.com/x/llama/engine"

	"github.com/x/llama"
	"github.com/x/llama/sampling"
	"github.com/x/llama/server/internal/wire"
)

// Limits of one request. They are far above what a real client sends.
const (
	// maxStopStrings is the most stop strings a request may give, and
	// maxStopBytes the longest one.
	maxStopStrings = engine.MaxStopStrings
	maxStopBytes   = engine.MaxStopBytes
	// maxDRYBreakerRunes is the longest DRY sequence breaker
	// (sampling.Params.Limit cuts longer ones).
	maxDRYBreakerRunes = sampling.MaxDRYBreakerRunes
	// maxJSONDepth is the deepest nesting of arrays and objects a request
	// body may have.
	maxJSONDepth = 128
	// promptBytesSlack multiplies the longest text that can fit a context
	// (its tokens times the longest token text) before a prompt is refused
	// untokenized: a wide margin, so that only hopeless prompts are.
	promptBytesSlack = 4
	// minPromptBytesLimit is the smallest bound on a prompt text.
	minPromptBytesLimit = 1 << 20
	// bigRequestBytes is the body size after which the memory the request
	// used is returned to the OS once it is answered.
	bigRequestBytes = 4 << 20
)

// maxAnswerProbs bounds the token probabilities a whole (not streamed)
// answer holds, over its tokens and prompts: rendered, each takes about
// 250 bytes, and 8 prompts of 2,000 tokens with n_probs 256 took 2 GB. A
// stream sends them as it goes and is not bounded.
const maxAnswerProbs = 1 << 19

// tooLarge is a 413 for a request that asks for more than the server can
// ever take (so retrying will not help).
func tooLarge(format string, args ...any) *httpError {
	he := badRequest(format, args...)
	he.Status = http.StatusRequestEntityTooLarge
	return he
}

// limitTask applies sampling's limits (sampling.Params.Limit, which the
// engine applies again) and the limits on stop strings to a completion
// task of inst.
func (inst *instance) limitTask(t *engine.Request) error {
	nCtx := max(inst.slotContext(), 1)
	if err := t.Params.Limit(nCtx, inst.Model.VocabSize()); err != nil {
		return samplingError(err)
	}
	t.NKeep = min(t.NKeep, nCtx)
	if len(t.Stop) > maxStopStrings {
		return badRequest(`"stop" has %d strings; at most %d are allowed`, len(t.Stop), maxStopStrings)
	}
	for _, s := range t.Stop {
		if len(s) > maxStopBytes {
			return badRequest(`a stop string has %d bytes; at most %d are allowed`, len(s), maxStopBytes)
		}
	}
	return nil
}

// taskLimit is the most tasks one request may submit: what the engine
// queues at once when it is idle (engine.Options.QueueSize plus a task per
// slot). A request with more can never be served.
func (inst *instance) taskLimit() int {
	o := inst.Opts.Engine
	p := max(o.Parallel, 1)
	q := o.QueueSize
	if q <= 0 {
		q = 4*p + 16
	}
	return q + p
}

// checkTaskCount refuses a request of n prompts (named what) that the
// engine could never queue at once.
func (inst *instance) checkTaskCount(n int, what string) error {
	if lim := inst.taskLimit(); n > lim {
		return tooLarge("the request has %d %s; this server takes at most %d in one request", n, what, lim)
	}
	return nil
}

// maxPieceBytes is the length of the model's longest token text (special
// tokens included, as prompts parse them), computed once.
func (inst *instance) maxPieceBytes() int {
	inst.maxPieceOnce.Do(func() {
		inst.maxPiece = 1
		for t := range inst.Model.VocabSize() {
			if s, err := inst.Model.TokenPiece(llama.Token(t), true); err == nil && len(s) > inst.maxPiece {
				inst.maxPiece = len(s)
			}
		}
	})
	return inst.maxPiece
}

// textLimit is the longest text that could tokenize to at most nTokens
// tokens of the model, with a wide margin: a text with more bytes cannot
// fit, so it is refused without being tokenized.
func (inst *instance) textLimit(nTokens int) int {
	return max(promptBytesSlack*nTokens*inst.maxPieceBytes(), minPromptBytesLimit)
}

// checkPromptText refuses a prompt text that can never fit inst's context.
func (inst *instance) checkPromptText(text string) error {
	return inst.checkPromptBytes(len(text))
}

// checkPromptBytes refuses a prompt of n bytes of text that can never fit
// inst's context.
func (inst *instance) checkPromptBytes(n int) error {
	if lim := inst.textLimit(inst.slotContext()); n > lim {
		return badRequest("the prompt has %d bytes of text and cannot fit the context of %d tokens (at most %d bytes are taken)",
			n, inst.slotContext(), lim)
	}
	return nil
}

// checkMessagesText refuses, before the chat template renders them,
// messages whose contents alone can never fit inst's context: rendering
// a conversation takes several times its size in memory (the template's
// values of every message, and the prompt), which a body of text that
// can only be refused need not cost. Templates render every message's
// content; the rendered prompt is checked again after.
func (inst *instance) checkMessagesText(msgs []chat.Message) error {
	n := 0
	for _, m := range msgs {
		n += len(m.Content)
	}
	return inst.checkPromptBytes(n)
}

// checkJSONShape refuses, before decoding, a JSON body nesting arrays and
// objects deeper than maxJSONDepth, or an object of more than
// wire.MaxFields fields (each costs a map entry and a copy when decoded).
func checkJSONShape(data []byte) (wire.Shape, error) {
	sh := wire.ShapeOf(data)
	if sh.Depth > maxJSONDepth {
		return sh, badRequest("the JSON body nests deeper than %d levels", maxJSONDepth)
	}
	if sh.Entries > wire.MaxFields && wire.Kind(data) == 'o' && json.Valid(data) {
		return sh, badRequest("the request body has %d fields; at most %d are read", sh.Entries, wire.MaxFields)
	}
	return sh, nil
}

// What a JSON value costs once decoded, beyond its bytes: an object or an
// array decoded into Go values (map[string]any, []any, the request's
// structs) takes 100–170 bytes even when empty, a number or a key about
// 24. A body of three-byte {} took 57 times its size; a body's bytes
// in flight (Options.BodyBytesInFlight) count this too once it is read.
const (
	decodedContainerBytes = 160
	decodedScalarBytes    = 24
)

// decodedCost is what decoding a body of shape sh adds to its bytes.
func decodedCost(sh wire.Shape) int64 {
	return int64(sh.Containers)*decodedContainerBytes + int64(sh.Scalars)*decodedScalarBytes
}

// Request preparation observes the client: between the stages of a
// request (reading, parsing, templating, tokenizing, building grammars)
// the handlers check the request's context, so a request whose client
// left stops at the next stage instead of keeping a core busy.

// stillWanted reports whether the client of ctx still waits for an answer.
func stillWanted(ctx context.Context) bool { return ctx.Err() == nil }

// checkPromptItems refuses, before decoding or tokenizing, a prompt array
// that can never be served: more prompts than taskLimit, or one prompt
// (an array with token ids, ids of them) with more token ids than the
// context holds. Decoded, a long array of ids takes about 50 times its
// bytes.
func (inst *instance) checkPromptItems(items, ids int) error {
	if ids == 0 {
		return inst.checkTaskCount(items, "prompts")
	}
	if n := inst.slotContext(); ids >= n {
		return exceedContext(ids, n)
	}
	return nil
}

// encoderBatch is the most tokens one embedding or rerank input may have
// under o (see checkEncoderInput).
func encoderBatch(o engine.Options) int {
	ub := o.Context.UBatchSize
	if ub <= 0 {
		ub = 512
	}
	if b := o.Context.BatchSize; b > 0 && b < ub {
		ub = b
	}
	return ub
}

// checkEncoderText refuses, before tokenizing, texts of an embedding or
// rerank input that can never fit one physical batch.
func (inst *instance) checkEncoderText(texts ...string) error {
	ub := encoderBatch(inst.Opts.Engine)
	lim := inst.textLimit(ub)
	n := 0
	for _, s := range texts {
		n += len(s)
	}
	if n > lim {
		return badRequest("an input has %d bytes of text and cannot fit the batch of %d tokens (at most %d bytes are taken)", n, ub, lim)
	}
	return nil
}

// texts returns the text pieces of p.
func (p embdPrompt) texts() []string {
	var out []string
	for _, pc := range p {
		if !pc.IsToken {
			out = append(out, pc.Text)
		}
	}
	return out
}

// tokenizeText is m.Tokenize, which also cuts the long runs of characters
// without white space that crash llama.cpp's BPE pre-tokenizer.
func tokenizeText(m *llama.Model, text string, o llama.TokenizeOptions) ([]llama.Token, error) {
	return m.Tokenize(text, o)
}

// Limits of a JSON Schema turned into a grammar: converting an object
// schema costs time quadratic in its property count (1000 optional
// properties take seconds), so larger schemas are refused.
const (
	maxSchemaObjectProperties = 256
	maxSchemaProperties       = 2048
)

// Limits of a chat request's tools, whose parameter schemas all go into
// one grammar: at most maxTools tools, whose parameters hold at most
// maxToolSchemaBytes of JSON and maxSchemaProperties properties in all
// (as one schema may). Within them a tool grammar is built in well under
// a second; past them the request is a 400. (OpenAI's API takes at most
// 128 tools.)
const (
	maxTools           = 512
	maxToolSchemaBytes = 1 << 20
)

// checkToolsSize refuses tools past the limits above.
func checkToolsSize(tools []chat.Tool) error {
	if len(tools) > maxTools {
		return badRequest("the request has %d tools; at most %d are allowed", len(tools), maxTools)
	}
	size, props := 0, 0
	for _, t := range tools {
		size += len(t.Parameters)
		if size > maxToolSchemaBytes {
			return badRequest("the tools' parameters have more than %d bytes in all", maxToolSchemaBytes)
		}
		n, err := schemaProperties(t.Parameters, maxSchemaProperties-props)
		if err != nil {
			return err
		}
		props += n
	}
	return nil
}

// checkSchemaSize refuses a JSON Schema whose objects have more
// properties than the limits above.
func checkSchemaSize(schema json.RawMessage) error {
	_, err := schemaProperties(schema, maxSchemaProperties)
	return err
}

// schemaProperties counts the properties of schema's objects, refusing
// an object with more than maxSchemaObjectProperties and a schema with
// more than budget in all.
func schemaProperties(schema json.RawMessage, budget int) (int, error) {
	var v any
	if err := json.Unmarshal(schema, &v); err != nil {
		return 0, nil // the converter reports malformed schemas
	}
	total := 0
	var walk func(any) error
	walk = func(v any) error {
		switch x := v.(type) {
		case map[string]any:
			if props, ok := x["properties"].(map[string]any); ok {
				if len(props) > maxSchemaObjectProperties {
					return badRequest("invalid json_schema: an object has %d properties; at most %d are allowed", len(props), maxSchemaObjectProperties)
				}
				total += len(props)
				if total > budget {
					return badRequest("invalid json_schema: the schemas have more than %d properties in all", maxSchemaProperties)
				}
			}
			for _, c := range x {
				if err := walk(c); err != nil {
					return err
				}
			}
		case []any:
			for _, c := range x {
				if err := walk(c); err != nil {
					return err
				}
			}
		}
		return nil
	}
	err := walk(v)
	return total, err
}

// Limits of /tokenize and /detokenize, which have no context to bound
// them: an 8 MB text tokenized with pieces took 850 MB and 15 s.
const (
	// maxTokenizeBytes bounds the text (JSON) of one /tokenize request.
	maxTokenizeBytes = 4 << 20
	// maxTokenizePieces bounds the tokens answered with their pieces.
	maxTokenizePieces = 1 << 18
	// maxDetokenizeTokens bounds the tokens of one /detokenize request,
	// and maxDetokenizeBytes the text it answers (a token's text may be
	// dozens of bytes, and the answer's JSON escapes it: 4M tokens of 31
	// newlines took 1.6 GB).
	maxDetokenizeTokens = 1 << 22
	maxDetokenizeBytes  = 16 << 20
)

// checkTokenizeContent refuses /tokenize content beyond maxTokenizeBytes.
func checkTokenizeContent(raw json.RawMessage) error {
	if len(raw) > maxTokenizeBytes {
		return tooLarge(`"content" has %d bytes; /tokenize takes at most %d`, len(raw), maxTokenizeBytes)
	}
	return nil
}
