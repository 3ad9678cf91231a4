package server

// GET and POST /lora-adapters: the LoRA adapters loaded with the model and
// their scales.

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"

	"github.com/x/llama/engine"
)

func handleGetLoRA(s *Server) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		inst, release, ok := s.instanceFor(w, r, "")
		if !ok {
			return
		}
		defer release()
		ad := inst.Engine.Adapters()
		if ad == nil {
			ad = []engine.AdapterInfo{}
		}
		writeJSON(w, http.StatusOK, ad)
	}
}

type loraScaleRequest struct {
	ID    *int     `json:"id"`
	Scale *float32 `json:"scale"`
}

func handlePostLoRA(s *Server) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var raw json.RawMessage
		if !decodeJSON(w, r, &raw) {
			return
		}
		var req []loraScaleRequest
		if err := json.Unmarshal(raw, &req); err != nil {
			writeError(w, http.StatusBadRequest, errInvalidRequest, "Request body must be an array of {\"id\", \"scale\"}")
			return
		}
		inst, release, ok := s.instanceFor(w, r, "")
		if !ok {
			return
		}
		defer release()
		n := len(inst.Engine.Adapters())
		scales := make([]engine.LoRAScale, 0, len(req))
		for i, it := range req {
			if it.ID == nil || it.Scale == nil {
				writeError(w, http.StatusBadRequest, errInvalidRequest, fmt.Sprintf("entry %d: id and scale are required", i))
				return
			}
			if *it.ID < 0 || *it.ID >= n {
				writeError(w, http.StatusBadRequest, errInvalidRequest, fmt.Sprintf("invalid adapter id %d (have %d adapters)", *it.ID, n))
				return
			}
			if f := float64(*it.Scale); math.IsNaN(f) || math.IsInf(f, 0) {
				writeError(w, http.StatusBadRequest, errInvalidRequest, "scale must be a finite number")
				return
			}
			scales = append(scales, engine.LoRAScale{ID: *it.ID, Scale: *it.Scale})
		}
		if err := inst.Engine.SetAdapterScales(scales); err != nil {
			writeEngineError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]bool{"success": true})
	}
}
