package wire

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/engine"
)

// TestAnswerShapes checks the JSON of the shared answer shapes as
// llama-server writes them: draft_n and draft_n_accepted only when
// something was drafted (and then both), progress absent for none, and a
// token's text cut to valid UTF-8 with its bytes kept.
func TestAnswerShapes(t *testing.T) {
	for _, c := range []struct {
		name string
		v    any
		want string
	}{
		{"timings without drafts", NewTimings(engine.Timings{PromptN: 3, PredictedN: 2, PredictedMS: 1.5}),
			`{"cache_n":0,"prompt_n":3,"prompt_ms":0,"prompt_per_token_ms":0,"prompt_per_second":0,"predicted_n":2,"predicted_ms":1.5,"predicted_per_token_ms":0,"predicted_per_second":0}`},
		{"timings with drafts none accepted", NewTimings(engine.Timings{DraftN: 4}),
			`{"cache_n":0,"prompt_n":0,"prompt_ms":0,"prompt_per_token_ms":0,"prompt_per_second":0,"predicted_n":0,"predicted_ms":0,"predicted_per_token_ms":0,"predicted_per_second":0,"draft_n":4,"draft_n_accepted":0}`},
		{"progress", NewProgress(&engine.PromptProgress{Total: 5, Cache: 1, Processed: 2, TimeMS: 7}),
			`{"total":5,"cache":1,"processed":2,"time_ms":7}`},
		{"no progress", struct {
			P *Progress `json:"p,omitempty"`
		}{NewProgress(nil)}, `{}`},
		{"post-sampling prob of a cut character", TokenProb(nil, engine.TokenProb{Token: 9, Text: "a\xe2\x82", Prob: 0.5}, true),
			`{"id":9,"token":"a","bytes":[97,226,130],"prob":0.5}`},
		{"post-sampling prob that is not a number", TokenProb(nil, engine.TokenProb{Token: 1, Text: "x", Prob: float32(math.NaN()), Logprob: float32(math.Inf(-1))}, true),
			`{"id":1,"token":"x","bytes":[120],"prob":0}`},
		{"log prob of a NaN probability", TokenProb(nil, engine.TokenProb{Token: 1, Text: "x", Prob: float32(math.NaN())}, false),
			`{"id":1,"token":"x","bytes":[120],"logprob":-3.4028234663852886e+38}`},
		{"log prob of zero", TokenProb(nil, engine.TokenProb{Token: 1, Text: "x", Logprob: 0, Prob: 0.5}, false),
			`{"id":1,"token":"x","bytes":[120],"logprob":-0.6931471805599453}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := json.Marshal(c.v)
			require.NoError(t, err)
			assert.JSONEq(t, c.want, string(b))
		})
	}
}

// TestCharProbs checks the entries of completion_probabilities as
// llama-server makes them: a token that leaves a character incomplete has
// none, and the one that completes it carries all the text sent since the
// last entry, the space the first token put before the character's bytes
// included; concatenated, the entries' texts are the content.
func TestCharProbs(t *testing.T) {
	for _, c := range []struct {
		name  string
		steps []Step
		want  []string
	}{
		{"whole tokens", []Step{{Token: 1, Text: "a"}, {Token: 2, Text: " b"}}, []string{"a", " b"}},
		{"a character over two tokens", []Step{{Token: 1, Text: "", Partial: true}, {Token: 2, Text: "中"}}, []string{"中"}},
		{"a space before the first byte", []Step{{Token: 1, Text: "a"}, {Token: 2, Text: " ", Partial: true}, {Token: 3, Text: "中"}}, []string{"a", " 中"}},
		{"three tokens", []Step{{Token: 1, Text: "x", Partial: true}, {Token: 2, Text: "", Partial: true}, {Token: 3, Text: "中!"}}, []string{"x中!"}},
		{"the end flushes", []Step{{Token: 1, Text: " ", Partial: true}, {Token: 2, Text: "\uFFFD"}}, []string{" \uFFFD"}},
		{"cut at the end", []Step{{Token: 1, Text: "a"}, {Token: 2, Text: "", Partial: true}}, []string{"a"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for i, p := range CharProbs(c.steps, false) {
				got = append(got, p.Token)
				assert.Equal(t, []byte(p.Token), intBytes(p.Bytes), "entry %d's bytes", i)
			}
			assert.Equal(t, c.want, got)
		})
	}
}

func intBytes(v []int) []byte {
	b := make([]byte, len(v))
	for i, x := range v {
		b[i] = byte(x)
	}
	return b
}
