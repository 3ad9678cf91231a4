package wire

// The answer side: the wire forms of the engine's results under
// llama-server's JSON names, shared by the native endpoints and the
// dialects (the engine itself knows no JSON).

import (
	"encoding/json"
	"math"
	"unicode/utf8"

	"github.com/x/llama/engine"

	"github.com/x/llama"
)

// Timings is engine.Timings as llama-server sends it.
type Timings struct {
	CacheN              int     `json:"cache_n"`
	PromptN             int     `json:"prompt_n"`
	PromptMS            float64 `json:"prompt_ms"`
	PromptPerTokenMS    float64 `json:"prompt_per_token_ms"`
	PromptPerSecond     float64 `json:"prompt_per_second"`
	PredictedN          int     `json:"predicted_n"`
	PredictedMS         float64 `json:"predicted_ms"`
	PredictedPerTokenMS float64 `json:"predicted_per_token_ms"`
	PredictedPerSecond  float64 `json:"predicted_per_second"`
	DraftN              int     `json:"draft_n,omitempty"`
	DraftNAccepted      int     `json:"draft_n_accepted,omitempty"`
}

// NewTimings returns t's wire form.
func NewTimings(t engine.Timings) *Timings {
	w := Timings(t)
	return &w
}

// MarshalJSON writes the timings as llama-server: draft_n and
// draft_n_accepted only when something was drafted, and then both, even
// when nothing was accepted.
func (t Timings) MarshalJSON() ([]byte, error) {
	type plain Timings
	if t.DraftN == 0 {
		return json.Marshal(plain(t))
	}
	return json.Marshal(struct {
		plain
		DraftNAccepted int `json:"draft_n_accepted"`
	}{plain(t), t.DraftNAccepted})
}

// Progress is engine.PromptProgress as llama-server sends it.
type Progress struct {
	Total     int   `json:"total"`
	Cache     int   `json:"cache"`
	Processed int   `json:"processed"`
	TimeMS    int64 `json:"time_ms"`
}

// NewProgress returns p's wire form (nil for nil).
func NewProgress(p *engine.PromptProgress) *Progress {
	if p == nil {
		return nil
	}
	w := Progress(*p)
	return &w
}

// Step is one generated token and its probabilities.
type Step struct {
	Token   llama.Token
	Text    string
	Partial bool // engine.Event.Partial
	Sampled *engine.TokenProb
	Probs   []engine.TokenProb
}

// StepOf returns the step of a token event.
func StepOf(ev engine.Event) Step {
	return Step{Token: ev.Token, Text: ev.Text, Partial: ev.Partial, Sampled: ev.Sampled, Probs: ev.Probs}
}

// Prob is one token probability in llama.cpp's shape: logprob and
// top_logprobs, or with post_sampling_probs prob and top_probs.
type Prob struct {
	ID          llama.Token `json:"id"`
	Token       string      `json:"token"`
	Bytes       []int       `json:"bytes"`
	Logprob     *float64    `json:"logprob,omitempty"`
	Prob        *float64    `json:"prob,omitempty"`
	TopLogprobs []Prob      `json:"top_logprobs,omitzero"` // [] for a step with no alternatives asked
	TopProbs    []Prob      `json:"top_probs,omitzero"`
}

// safeLog is log(x) with log(0) as the lowest float32 (JSON has no -inf);
// a NaN is taken as 0.
func safeLog(x float32) float64 {
	if !(x > 0) {
		return -math.MaxFloat32
	}
	return math.Log(float64(x))
}

func finiteLog(l float32) float64 {
	if math.IsInf(float64(l), 0) || math.IsNaN(float64(l)) {
		return -math.MaxFloat32
	}
	return float64(l)
}

// finiteProb is p for JSON, which has no NaN or infinity: a probability
// that is not a number (the softmax of infinite logits: a logit_bias near
// the float32 maximum, or a model whose logits overflow) is given as 0.
// encoding/json refuses NaN, which made such a request a 500 and cut its
// stream before the first event; llama-server writes null there.
func finiteProb(p float32) float64 {
	if math.IsNaN(float64(p)) || math.IsInf(float64(p), 0) {
		return 0
	}
	return float64(p)
}

// TokenProb is tp in llama.cpp's shape: its probability when post (after
// sampling), else its log probability; a token without text is given its
// piece in m.
func TokenProb(m *llama.Model, tp engine.TokenProb, post bool) Prob {
	text := tp.Text
	if text == "" {
		text, _ = m.TokenPiece(tp.Token, true)
	}
	return probWithText(tp, text, post)
}

// probWithText is tp's entry with the text given.
func probWithText(tp engine.TokenProb, text string, post bool) Prob {
	pj := Prob{ID: tp.Token, Token: validPrefix(text), Bytes: byteInts(text)}
	if post {
		v := finiteProb(tp.Prob)
		pj.Prob = &v
	} else {
		v := logprob(tp)
		pj.Logprob = &v
	}
	return pj
}

// logprob is tp's log probability as llama-server gives it: finite, and
// from its probability where only that was kept.
func logprob(tp engine.TokenProb) float64 {
	if tp.Logprob == 0 && tp.Prob != 0 && tp.Prob != 1 {
		return safeLog(tp.Prob)
	}
	return finiteLog(tp.Logprob)
}

// SampledProb is the probability of the token a step sampled, its text
// its piece in m.
func SampledProb(m *llama.Model, s Step, post bool) Prob {
	sampled := sampledOf(s)
	sampled.Text = ""
	return TokenProb(m, sampled, post)
}

// sampledOf is the entry of the token s sampled (only its id when the
// step kept none).
func sampledOf(s Step) engine.TokenProb {
	if s.Sampled != nil {
		return *s.Sampled
	}
	return engine.TokenProb{Token: s.Token}
}

// Probs converts steps to probability entries, one per token, each
// token's text its piece (Ollama's logprobs).
func Probs(m *llama.Model, steps []Step, post bool) []Prob {
	out := make([]Prob, 0, len(steps))
	for _, s := range steps {
		out = append(out, stepProb(s, post, SampledProb(m, s, post)))
	}
	return out
}

// stepProb is pj, the entry of the token s sampled, with s's alternatives.
func stepProb(s Step, post bool, pj Prob) Prob {
	top := make([]Prob, 0, len(s.Probs))
	for _, p := range s.Probs {
		// As llama-server: the alternatives' text is their piece as
		// generation renders it (control tokens such as <eos> are "").
		top = append(top, probWithText(p, p.Text, post))
	}
	if post {
		pj.TopProbs = top
	} else {
		pj.TopLogprobs = top
	}
	return pj
}

// CharProb is the entry of step s in llama.cpp's completion_probabilities
// (and OpenAI chat's logprobs) as llama-server makes them: its token is
// the text the step sent (a control token such as </s> sends none), and a
// token that leaves the text's last character incomplete (a byte of a
// multi-byte UTF-8 character, see Step.Partial) has no entry (false): the
// token that completes the character has it, with all the text sent since
// the last entry (held: the text of the steps without one, such as the
// space a token put before the character's first byte). Clients that build
// the text from the entries (Mikupad) read it whole.
func CharProb(s Step, held string, post bool) (Prob, bool) {
	if s.Partial {
		return Prob{}, false
	}
	return stepProb(s, post, probWithText(sampledOf(s), held+s.Text, post)), true
}

// CharProbs returns the entries of steps (CharProb of each).
func CharProbs(steps []Step, post bool) []Prob {
	out := make([]Prob, 0, len(steps))
	held := ""
	for _, s := range steps {
		if pj, ok := CharProb(s, held, post); ok {
			out = append(out, pj)
			held = ""
		} else {
			held += s.Text
		}
	}
	return out
}

func byteInts(s string) []int {
	b := make([]int, len(s))
	for i := 0; i < len(s); i++ {
		b[i] = int(s[i])
	}
	return b
}

// validPrefix cuts s to its longest valid UTF-8 prefix.
func validPrefix(s string) string {
	for !utf8.ValidString(s) && s != "" {
		s = s[:len(s)-1]
	}
	return s
}
