package engine

// The contract between the HTTP layer (handlers, wire formats) and the
// engine (slots, continuous batching, prompt cache). Handlers build a
// Request from a request and read its Events; they never touch llama.Context.

import (
	"time"

	"github.com/x/llama"
	"github.com/x/llama/sampling"
)

// Kind says what a Request computes.
type Kind int

// Request kinds.
const (
	KindCompletion Kind = iota // generate text from Prompt
	KindEmbedding              // embeddings of Prompt
	KindRerank                 // relevance score of Prompt (query+document already joined)
)

// Bounds of a Request's stop strings, which the loop matches at every
// token while every slot waits.
const (
	MaxStopStrings = 64
	MaxStopBytes   = 4096
)

// Request is one unit of work for the engine. Build a completion with
// NewRequest: the zero value asks for slot 0, greedy sampling with no
// sampler (sampling.Params' zero value) and no generated token (NPredict 0
// only decodes the prompt).
type Request struct {
	Kind   Kind
	Prompt []llama.Token
	// Params are the sampling settings; Submit bounds them to the slot
	// context and the vocabulary (sampling.Params.Limit).
	Params sampling.Params
	// NPredict is the most tokens to generate (-1: until EOG or the context is full).
	NPredict int
	// Stop strings end generation (not included in the output): at most
	// MaxStopStrings of at most MaxStopBytes each.
	Stop []string
	// CachePrompt reuses the longest common prefix in a slot's KV cache.
	CachePrompt bool
	// WakeAtEnd is for a reader that wants the whole answer, not each
	// token as it comes (a non-streaming HTTP request): its Stream's Next
	// is woken by the last event (and by the context's end) only, the
	// events before it waiting in the queue, all delivered, in order. A
	// reader parked in Next is otherwise woken for every token, which
	// costs the loop a system call each time on its critical path, and
	// the woken reader a core the decode may want.
	WakeAtEnd bool
	// SampledProbs asks for the chosen token's probability entry in each
	// event (Event.Sampled) even when Params.NProbs is 0: OpenAI's
	// logprobs with no top alternatives.
	SampledProbs bool
	// PostSamplingProbs gives those entries (Event.Probs, Event.Sampled)
	// from the sampler chain's output instead of the model's: the
	// candidates its filters kept, with the probabilities its final
	// sampler drew from (temperature applied), the most likely first and
	// none of probability 0, as llama-server's post_sampling_probs. A
	// greedy chain (sampling.Params.Greedy) gives its token probability 1.
	// The row then goes through the whole chain (no top-k fast path, no
	// parallel or backend sampling).
	PostSamplingProbs bool
	// PromptProbs asks for the probability of each prompt token given the
	// ones before it, with the Params.NProbs most likely tokens in its
	// place (OpenAI's echo with logprobs; how evaluation harnesses score
	// a text). They come in the event after the prompt (the first
	// token's, or Done's with NPredict 0) as Event.PromptProbs. The whole
	// prompt is then decoded, the prompt cache unused. Not with Media.
	PromptProbs bool
	// ReturnProgress asks for Progress events while the prompt is
	// decoded: one when the request starts (after the cached prefix), then
	// one per decode holding its prompt tokens.
	ReturnProgress bool
	// CacheReuse is the smallest run of cached tokens after the common
	// prefix that, with CachePrompt, is shifted into place instead of being
	// decoded again (see Options.CacheReuse): 0 means the engine's
	// Options.CacheReuse, a negative value turns reuse off.
	CacheReuse int
	// UserStarts are the positions in Prompt where a chat's user messages
	// begin, ascending (llama-server's message spans): with a sliding
	// window, the prompt's batches break there for context checkpoints
	// (see checkpoint.go). Nil for a prompt that is not a chat.
	UserStarts []int
	// NKeep is how many prompt tokens to keep on a context shift (-1: all).
	NKeep int
	// TMaxPredictMs limits generation time once text has started (0: none).
	TMaxPredictMs int
	// SlotID asks for a specific slot (-1: any, best prompt-cache match).
	SlotID int
	// LoRA overrides the adapters' scales for this request (nil: the server's).
	LoRA []LoRAScale
	// Normalize is the embedding normalization (-1 none, 2 Euclidean, ...).
	Normalize int
	// PerToken asks for per-token embeddings (pooling none).
	PerToken bool
	// SpecNMax caps the tokens of one speculative draft and SpecNMin drops
	// shorter drafts (request fields speculative.n_max and
	// speculative.n_min; 0: the drafters' own limits).
	SpecNMax, SpecNMin int
	// SpecPMin, when not nil, is this request's draft-model p_min (request
	// field speculative.p_min, in [0, 1]; nil: SpeculativeOptions.PMin).
	SpecPMin *float32

	Media *Media // media of the prompt (see NewMedia); nil: none

	// Samplers are samplers of the caller's (llama.Custom: Go code) put in
	// the request's chain after those of Params, before the final pick.
	// The request's chain owns them: a request needs new ones, not those
	// of another. They run on the engine's loop; a panic in one ends this
	// request alone, with the panic as its error.
	Samplers []llama.Sampler
}

// ReportsSampled reports whether r's events carry the chosen token's
// probability entry (Event.Sampled): with top alternatives asked
// (Params.NProbs) or without them (SampledProbs).
func (r *Request) ReportsSampled() bool { return r.Params.NProbs > 0 || r.SampledProbs }

// reportsChain reports whether r's probability entries come from the
// sampler chain's output (PostSamplingProbs).
func (r *Request) reportsChain() bool { return r.PostSamplingProbs && r.ReportsSampled() }

// NewRequest returns a completion request for prompt with llama-server's
// defaults: sampling.Defaults, generation until end of generation or a
// full context (NPredict -1), any slot (SlotID -1), the prompt cache on.
func NewRequest(prompt []llama.Token) *Request {
	return &Request{Kind: KindCompletion, Prompt: prompt, Params: sampling.Defaults(), NPredict: -1, SlotID: -1, CachePrompt: true}
}

// LoRAScale is an adapter id (index in the server's list) and its scale.
type LoRAScale struct {
	ID    int
	Scale float32
}

// TokenProb is a token and its probability (or log-probability).
type TokenProb struct {
	Token   llama.Token
	Text    string
	Prob    float32 // probability: the model's (softmax of the row), or the chain's (Request.PostSamplingProbs)
	Logprob float32 // log of Prob
}

// PromptProb is a prompt token's probability entry given the tokens
// before it, and the most likely tokens in its place (Request.PromptProbs).
type PromptProb struct {
	Token TokenProb
	Top   []TokenProb
}

// StopType says why a request ended, as llama-server's stop_type: its
// value is the wire string ("eos", "limit", "word"; "" for none). It is
// not llama.StopReason, Context.Generate's reason: StopTypeLimit stands
// for n_predict, a full context and t_max_predict_ms alike.
type StopType string

// Stop types.
const (
	StopTypeEOS   StopType = "eos"   // end of generation token
	StopTypeLimit StopType = "limit" // n_predict, context or t_max_predict_ms reached
	StopTypeWord  StopType = "word"  // a stop string
	StopTypeNone  StopType = ""      // not finished / canceled
)

// Timings are llama.cpp's per-request timings.
type Timings struct {
	CacheN              int
	PromptN             int
	PromptMS            float64
	PromptPerTokenMS    float64
	PromptPerSecond     float64
	PredictedN          int
	PredictedMS         float64
	PredictedPerTokenMS float64
	PredictedPerSecond  float64
	// DraftN and DraftNAccepted count the tokens drafted and accepted by
	// speculative decoding; present only when something was drafted.
	DraftN         int
	DraftNAccepted int
}

// PromptProgress is how far a request's prompt has been decoded: Processed
// of Total tokens, Cache of them reused from the cache, after TimeMS.
type PromptProgress struct {
	Total     int
	Cache     int
	Processed int
	TimeMS    int64
}

// Event is one step of a request's result stream. Completion requests send one
// Event per generated token (Text may be empty while a UTF-8 character or a
// possible stop string is incomplete) and a last Event with Done set.
// Embedding and rerank requests send one Event with Done set.
type Event struct {
	// Progress, when set, makes this a prompt progress event (see
	// Request.ReturnProgress): no token, Timings cover the prompt so far.
	Progress *PromptProgress
	Token    llama.Token
	Text     string
	// Partial says the text generated so far ends inside a UTF-8
	// character: this token began or continued a multi-byte character
	// that a later token completes (llama-server gives such a token no
	// probability entry of its own). A request's last token is never
	// Partial: when it stops inside a character, its Text ends with the
	// character's bytes as U+FFFD.
	Partial bool
	// Probs are the top NProbs candidates of this step (when asked).
	Probs []TokenProb
	// Sampled is the probability entry of the chosen token (when NProbs > 0
	// or Request.SampledProbs).
	Sampled *TokenProb
	// PromptProbs are the prompt's tokens after the first, each with its
	// probability given the ones before it (Request.PromptProbs), in the
	// request's first event after its prompt.
	PromptProbs []PromptProb

	Done         bool
	Stop         StopType
	StoppingWord string
	Truncated    bool
	SlotID       int
	PromptTokens int // tokens of the prompt
	CachedTokens int // of which were reused from the cache
	Generated    int // tokens generated
	// SlotTokens are the tokens in the slot's memory when the request
	// ended (Done events): llama-server's tokens_cached.
	SlotTokens int
	Timings    Timings

	Embedding [][]float32 // one pooled vector, or one per token with PerToken
	Score     float32     // rerank score

	Err error // a failure (the last Event)
}

// SlotInfo is one slot's state.
type SlotInfo struct {
	ID           int
	NCtx         int
	IsProcessing bool
	Prompt       string // the current or last request's prompt, detokenized
	NPast        int
	NDecoded     int
	TaskID       int64
	// HasTask says whether the slot has run a request; TaskID is then the
	// current or last one.
	HasTask bool
	// Speculative says whether the slot drafts (speculative decoding on).
	Speculative bool
	// PromptProcessed and PromptCached are the prompt tokens the running
	// request decoded and reused from the cache (0 once it ended, as
	// llama-server's).
	PromptProcessed, PromptCached int
	// Request is the current or last request's settings (its Params,
	// NPredict, NKeep, Stop, LoRA and SlotID; no prompt), nil before any.
	Request *Request
}

// Metrics are the engine's counters (llama.cpp's metric names in /metrics).
type Metrics struct {
	// PromptTokensTotal counts the prompt tokens decoded, without those
	// reused from the cache (PromptTokensCachedTotal).
	PromptTokensTotal       int64
	PromptTokensCachedTotal int64
	PromptSecondsTotal      float64
	TokensPredictedTotal    int64
	// TokensPredictedSteps counts the decode steps of generation: a request's
	// first token comes from its prompt's logits, so it takes none.
	TokensPredictedSteps   int64
	TokensPredictedSeconds float64
	DecodeTotal            int64
	// BusySlotsTotal sums the busy slots over the decodes;
	// BusySlotsPerDecode is their average.
	BusySlotsTotal     int64
	BusySlotsPerDecode float64
	NTokensMax         int64
	// RequestsProcessing counts the requests in slots and those the loop
	// starts at its next turn; RequestsDeferred the queued ones that wait
	// for a slot (or for the running requests' LoRA scales).
	RequestsProcessing int
	RequestsDeferred   int
	// RequestsPreempted counts the requests of RequestsProcessing that
	// are preempted, waiting for the shared KV memory (see
	// Options.Context).
	RequestsPreempted int
	KVCacheUsageRatio float64
	KVCacheTokens     int64
	// KVCacheCapacity is the context size in tokens (all slots together).
	KVCacheCapacity int64
	// MaxAdapters is how many LoRA adapters a batch can use at once: every
	// loaded adapter, since all of them stay in memory.
	MaxAdapters int
	// RunningAdapters are the file names (without .gguf) of the adapters
	// with a non-zero scale in the running requests; WaitingAdapters those
	// that queued requests ask for and running ones do not use.
	RunningAdapters, WaitingAdapters []string
	// AdaptersChanged is when RunningAdapters or WaitingAdapters last
	// changed (the engine's start at first).
	AdaptersChanged time.Time
	// DraftTokensTotal, DraftAcceptedTotal and DraftsTotal count
	// speculative decoding's drafted tokens, accepted tokens and checked
	// drafts; DraftAcceptedPerPos the accepted tokens by draft position.
	DraftTokensTotal, DraftAcceptedTotal, DraftsTotal int64
	DraftAcceptedPerPos                               []int64
	// PreemptionsTotal counts the requests preempted because the KV
	// memory the slots share (Context.KVUnified) was full: their memory
	// was given up and decoded again later (see Options.Context).
	PreemptionsTotal int64
	// Steps is the loop's time by phase (see StepTimes).
	Steps StepTimes
}

// AdapterInfo describes a loaded LoRA adapter.
type AdapterInfo struct {
	ID    int
	Path  string
	Scale float32
}
