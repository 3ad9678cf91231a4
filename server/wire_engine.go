package server

// The wire forms of the engine's results, under llama-server's JSON names:
// the engine itself knows no JSON.

import (
	"encoding/json"

	"github.com/x/llama/engine"
)

// timingsJSON is engine.Timings as llama-server sends it.
type timingsJSON struct {
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

// wireTimings returns t's wire form.
func wireTimings(t engine.Timings) *timingsJSON {
	w := timingsJSON(t)
	return &w
}

// MarshalJSON writes the timings as llama-server: draft_n and
// draft_n_accepted only when something was drafted, and then both, even
// when nothing was accepted.
func (t timingsJSON) MarshalJSON() ([]byte, error) {
	type plain timingsJSON
	if t.DraftN == 0 {
		return json.Marshal(plain(t))
	}
	return json.Marshal(struct {
		plain
		DraftNAccepted int `json:"draft_n_accepted"`
	}{plain(t), t.DraftNAccepted})
}

// progressJSON is engine.PromptProgress as llama-server sends it.
type progressJSON struct {
	Total     int   `json:"total"`
	Cache     int   `json:"cache"`
	Processed int   `json:"processed"`
	TimeMS    int64 `json:"time_ms"`
}

// wireProgress returns p's wire form (nil for nil).
func wireProgress(p *engine.PromptProgress) *progressJSON {
	if p == nil {
		return nil
	}
	w := progressJSON(*p)
	return &w
}

// adapterJSON is engine.AdapterInfo as GET /lora-adapters lists it.
type adapterJSON struct {
	ID    int     `json:"id"`
	Path  string  `json:"path"`
	Scale float32 `json:"scale"`
}
