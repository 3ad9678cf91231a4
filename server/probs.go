package server

// Token probabilities (n_probs) in llama.cpp's JSON shape.

import (
	"math"
	"unicode/utf8"

	"github.com/x/llama/engine"

	"github.com/x/llama"
)

// probJSON is one token probability in llama.cpp's shape: logprob and
// top_logprobs, or with post_sampling_probs prob and top_probs.
type probJSON struct {
	ID          llama.Token `json:"id"`
	Token       string      `json:"token"`
	Bytes       []int       `json:"bytes"`
	Logprob     *float64    `json:"logprob,omitempty"`
	Prob        *float64    `json:"prob,omitempty"`
	TopLogprobs []probJSON  `json:"top_logprobs,omitempty"`
	TopProbs    []probJSON  `json:"top_probs,omitempty"`
}

// safeLog is log(x) with log(0) as the lowest float32 (JSON has no -inf).
func safeLog(x float32) float64 {
	if x <= 0 {
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

func tokenProbJSON(m *llama.Model, tp engine.TokenProb, post bool) probJSON {
	text := tp.Text
	if text == "" {
		text, _ = m.TokenPiece(tp.Token, true)
	}
	pj := probJSON{ID: tp.Token, Token: validPrefix(text), Bytes: byteInts(text)}
	if post {
		v := float64(tp.Prob)
		pj.Prob = &v
	} else {
		v := finiteLog(tp.Logprob)
		if tp.Logprob == 0 && tp.Prob != 0 && tp.Prob != 1 {
			v = safeLog(tp.Prob)
		}
		pj.Logprob = &v
	}
	return pj
}

// probsJSON converts steps to llama.cpp's completion_probabilities.
func probsJSON(m *llama.Model, steps []step, post bool) []probJSON {
	out := make([]probJSON, 0, len(steps))
	for _, s := range steps {
		sampled := engine.TokenProb{Token: s.Token}
		if s.Sampled != nil {
			sampled = *s.Sampled
		}
		sampled.Text = ""
		pj := tokenProbJSON(m, sampled, post)
		top := make([]probJSON, 0, len(s.Probs))
		for _, p := range s.Probs {
			// As llama-server: the alternatives' text is their piece as
			// generation renders it (control tokens such as <eos> are "").
			pj := probJSON{ID: p.Token, Token: validPrefix(p.Text), Bytes: byteInts(p.Text)}
			if post {
				v := float64(p.Prob)
				pj.Prob = &v
			} else {
				pj.Logprob = tokenProbJSON(m, p, post).Logprob
			}
			top = append(top, pj)
		}
		if post {
			pj.TopProbs = top
		} else {
			pj.TopLogprobs = top
		}
		out = append(out, pj)
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
