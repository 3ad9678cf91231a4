package server

// GET and POST /lora-adapters: the LoRA adapters loaded with the model and
// their scales.

import (
	"encoding/json"
	"math"
	"net/http"

	"github.com/x/llama/engine"
)

func handleGetLoRA(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		inst, release, err := s.instanceFor(r, "")
		if err != nil {
			return err
		}
		defer release()
		ad := []adapterJSON{}
		for _, a := range inst.Engine.Adapters() {
			ad = append(ad, adapterJSON(a))
		}
		writeJSON(w, http.StatusOK, ad)
		return nil
	}
}

type loraScaleRequest struct {
	ID    *int     `json:"id"`
	Scale *float32 `json:"scale"`
}

func handlePostLoRA(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var raw json.RawMessage
		if err := decodeJSON(r, &raw); err != nil {
			return err
		}
		var req []loraScaleRequest
		if err := json.Unmarshal(raw, &req); err != nil {
			return badRequest(`Request body must be an array of {"id", "scale"}`)
		}
		inst, release, err := s.instanceFor(r, "")
		if err != nil {
			return err
		}
		defer release()
		n := len(inst.Engine.Adapters())
		scales := make([]engine.LoRAScale, 0, len(req))
		for i, it := range req {
			if it.ID == nil || it.Scale == nil {
				return badRequest("entry %d: id and scale are required", i)
			}
			if *it.ID < 0 || *it.ID >= n {
				return badRequest("invalid adapter id %d (have %d adapters)", *it.ID, n)
			}
			if f := float64(*it.Scale); math.IsNaN(f) || math.IsInf(f, 0) {
				return badRequest("scale must be a finite number")
			}
			scales = append(scales, engine.LoRAScale{ID: *it.ID, Scale: *it.Scale})
		}
		if err := inst.Engine.SetAdapterScales(scales); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]bool{"success": true})
		return nil
	}
}
