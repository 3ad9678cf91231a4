package server

// GET /slots (what each engine slot is doing) and POST /slots/{id}
// (saving, restoring or erasing a slot's KV cache; the files are
// slotfiles.go's).

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

func handleSlots(s *Server) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.opts.Slots {
			writeError(w, http.StatusNotImplemented, errNotSupported,
				"This server does not support slots endpoint. Start it with `--slots`")
			return
		}
		inst, release, ok := s.instanceFor(w, r, "")
		if !ok {
			return
		}
		defer release()
		slots := inst.Engine.SlotsInfo()
		if r.URL.Query().Get("fail_on_no_slot") != "" {
			idle := 0
			for _, sl := range slots {
				if !sl.IsProcessing {
					idle++
				}
			}
			if idle == 0 {
				writeError(w, http.StatusServiceUnavailable, errUnavailable, "no slot available")
				return
			}
		}
		params := defaultGenerationParams(inst.Opts)
		out := make([]map[string]any, len(slots))
		for i, sl := range slots {
			o := map[string]any{
				"id": sl.ID, "n_ctx": sl.NCtx, "speculative": sl.Speculative, "is_processing": sl.IsProcessing,
				"n_past": sl.NPast, "n_decoded": sl.NDecoded,
			}
			// As llama-server: the task fields only once the slot has run
			// one; an idle slot shows no remaining budget.
			if sl.HasTask {
				o["id_task"], o["params"], o["prompt"], o["generated"] = sl.TaskID, params, sl.Prompt, ""
				o["next_token"] = []map[string]any{{"has_next_token": sl.IsProcessing, "has_new_line": false,
					"n_remain": -1, "n_decoded": sl.NDecoded}}
			}
			out[i] = o
		}
		writeJSON(w, http.StatusOK, out)
	}
}

// validSlotFilename reports whether name is a plain file name that stays
// inside the slot save folder.
func validSlotFilename(name string) bool {
	if name == "" || len(name) > 255 || !utf8.ValidString(name) || name == "." || name == ".." {
		return false
	}
	if strings.ContainsAny(name, "/\\:\x00") || strings.Contains(name, "..") || filepath.IsAbs(name) {
		return false
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return name == filepath.Base(name)
}

type slotActionRequest struct {
	Filename string `json:"filename"`
}

func handleSlotAction(s *Server) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.opts.SlotSavePath == "" {
			writeError(w, http.StatusNotImplemented, errNotSupported,
				"This server does not support slots action. Start it with `--slot-save-path`")
			return
		}
		id, err := strconv.Atoi(r.PathValue("id"))
		if err != nil || id < 0 {
			writeError(w, http.StatusBadRequest, errInvalidRequest, "Invalid slot ID")
			return
		}
		action := r.URL.Query().Get("action")
		var req slotActionRequest
		switch action {
		case "save", "restore":
			if !decodeJSON(w, r, &req) {
				return
			}
			if err := slotNameError(req.Filename); err != nil {
				writeHTTPError(w, err)
				return
			}
		case "erase":
		default:
			writeError(w, http.StatusBadRequest, errInvalidRequest, "Invalid action")
			return
		}
		inst, release, ok := s.instanceFor(w, r, "")
		if !ok {
			return
		}
		defer release()
		if n := len(inst.Engine.SlotsInfo()); id >= n {
			writeError(w, http.StatusBadRequest, errInvalidRequest, fmt.Sprintf("Invalid slot ID: %d (the server has %d slots)", id, n))
			return
		}
		path := filepath.Join(s.opts.SlotSavePath, req.Filename)
		start := time.Now()
		ms := func() float64 { return float64(time.Since(start).Microseconds()) / 1000 }
		switch action {
		case "save":
			nTok, nBytes, err := inst.Engine.SaveSlot(id, path)
			if err != nil {
				writeSlotError(w, err, req.Filename, action)
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{"id_slot": id, "filename": req.Filename,
				"n_saved": nTok, "n_written": nBytes, "timings": map[string]float64{"save_ms": ms()}})
		case "restore":
			nTok, nBytes, err := inst.Engine.RestoreSlot(id, path)
			if err != nil {
				writeSlotError(w, err, req.Filename, action)
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{"id_slot": id, "filename": req.Filename,
				"n_restored": nTok, "n_read": nBytes, "timings": map[string]float64{"restore_ms": ms()}})
		case "erase":
			n, err := inst.Engine.EraseSlot(id)
			if err != nil {
				writeSlotError(w, err, "", action)
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{"id_slot": id, "n_erased": n})
		}
	}
}
