package server

// GET /slots (what each engine slot is doing) and POST /slots/{id}
// (saving, restoring or erasing a slot's KV cache; the files are
// slotfiles.go's).

import (
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

func handleSlots(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if !s.opts.Slots {
			return notSupported("This server does not support slots endpoint. Start it with `--slots`")
		}
		inst, release, err := s.instanceFor(r, "")
		if err != nil {
			return err
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
				return unavailable("no slot available")
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
		return nil
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

func handleSlotAction(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if s.opts.SlotSavePath == "" {
			return notSupported("This server does not support slots action. Start it with `--slot-save-path`")
		}
		id, err := strconv.Atoi(r.PathValue("id"))
		if err != nil || id < 0 {
			return badRequest("Invalid slot ID")
		}
		action := r.URL.Query().Get("action")
		var req slotActionRequest
		switch action {
		case "save", "restore":
			if err := decodeJSON(r, &req); err != nil {
				return err
			}
			if err := slotNameError(req.Filename); err != nil {
				return err
			}
		case "erase":
		default:
			return badRequest("Invalid action")
		}
		inst, release, err := s.instanceFor(r, "")
		if err != nil {
			return err
		}
		defer release()
		if n := len(inst.Engine.SlotsInfo()); id >= n {
			return badRequest("Invalid slot ID: %d (the server has %d slots)", id, n)
		}
		path := filepath.Join(s.opts.SlotSavePath, req.Filename)
		start := time.Now()
		ms := func() float64 { return float64(time.Since(start).Microseconds()) / 1000 }
		switch action {
		case "save":
			nTok, nBytes, err := inst.Engine.SaveSlot(id, path)
			if err != nil {
				return slotError(err, req.Filename, action)
			}
			writeJSON(w, http.StatusOK, map[string]any{"id_slot": id, "filename": req.Filename,
				"n_saved": nTok, "n_written": nBytes, "timings": map[string]float64{"save_ms": ms()}})
		case "restore":
			nTok, nBytes, err := inst.Engine.RestoreSlot(id, path)
			if err != nil {
				return slotError(err, req.Filename, action)
			}
			writeJSON(w, http.StatusOK, map[string]any{"id_slot": id, "filename": req.Filename,
				"n_restored": nTok, "n_read": nBytes, "timings": map[string]float64{"restore_ms": ms()}})
		case "erase":
			n, err := inst.Engine.EraseSlot(id)
			if err != nil {
				return slotError(err, "", action)
			}
			writeJSON(w, http.StatusOK, map[string]any{"id_slot": id, "n_erased": n})
		}
		return nil
	}
}
