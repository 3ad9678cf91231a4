package server

// GET /slots (what each engine slot is doing) and POST /slots/{id}
// (saving, restoring or erasing a slot's KV cache; the files are
// slotfiles.go's).

import (
	"math"
	"net/http"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/x/llama"
	"github.com/x/llama/engine"
)

func handleSlots(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if !s.opts.Slots {
			return notSupported("This server does not support slots endpoint. Start it with `--slots` (Options.Slots)")
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
		out := make([]slotJSON, len(slots))
		for i, sl := range slots {
			o := slotJSON{ID: sl.ID, NCtx: sl.NCtx, Speculative: sl.Speculative, IsProcessing: sl.IsProcessing}
			// As llama-server: the task fields only once the slot has run
			// one; n_prompt_tokens is what its cache holds, the prompt
			// and generation counts those of the running request.
			if sl.HasTask {
				o.IDTask, o.Params = new(sl.TaskID), slotParams(inst.Opts, sl.Request, s.opts.SlotsDebug)
				if s.opts.SlotsDebug {
					// The engine keeps no generated text past the events
					// it sent: "generated" stays empty.
					o.Prompt, o.Generated = new(sl.Prompt), new("")
				}
				o.NPromptTokens, o.NPromptTokensProcessed, o.NPromptTokensCache = new(sl.NPast), new(sl.PromptProcessed), new(sl.PromptCached)
				remain := -1
				if sl.IsProcessing && sl.Request != nil && sl.Request.NPredict >= 0 {
					remain = max(0, sl.Request.NPredict-sl.NDecoded)
				}
				o.NextToken = []slotNextToken{{HasNextToken: sl.IsProcessing, NRemain: remain, NDecoded: sl.NDecoded}}
			}
			out[i] = o
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	}
}

// slotJSON is a slot in GET /slots. Its fields are in the order of their
// names, as llama-server's JSON objects are; the pointers are those of a
// slot that has run a task.
type slotJSON struct {
	Generated              *string         `json:"generated,omitempty"`
	ID                     int             `json:"id"`
	IDTask                 *int64          `json:"id_task,omitempty"`
	IsProcessing           bool            `json:"is_processing"`
	NCtx                   int             `json:"n_ctx"`
	NPromptTokens          *int            `json:"n_prompt_tokens,omitempty"`
	NPromptTokensCache     *int            `json:"n_prompt_tokens_cache,omitempty"`
	NPromptTokensProcessed *int            `json:"n_prompt_tokens_processed,omitempty"`
	NextToken              []slotNextToken `json:"next_token,omitempty"`
	Params                 map[string]any  `json:"params,omitempty"`
	Prompt                 *string         `json:"prompt,omitempty"`
	Speculative            bool            `json:"speculative"`
}

// slotNextToken is the generation state of a slot's running task.
type slotNextToken struct {
	HasNewLine   bool `json:"has_new_line"`
	HasNextToken bool `json:"has_next_token"`
	NDecoded     int  `json:"n_decoded"`
	NRemain      int  `json:"n_remain"`
}

// slotSaved, slotRestored and slotErased answer POST /slots/{id}.
type (
	slotSaved struct {
		Filename string `json:"filename"`
		IDSlot   int    `json:"id_slot"`
		NSaved   int    `json:"n_saved"`
		NWritten int    `json:"n_written"`
		Timings  struct {
			SaveMS float64 `json:"save_ms"`
		} `json:"timings"`
	}
	slotRestored struct {
		Filename  string `json:"filename"`
		IDSlot    int    `json:"id_slot"`
		NRead     int    `json:"n_read"`
		NRestored int    `json:"n_restored"`
		Timings   struct {
			RestoreMS float64 `json:"restore_ms"`
		} `json:"timings"`
	}
	slotErased struct {
		IDSlot  int `json:"id_slot"`
		NErased int `json:"n_erased"`
	}
)

// defaultGenerationParams is default_generation_settings.params of GET
// /props. llama-server v0.4.0 reports there a fresh task's parameters
// holding only the server's sampling settings: n_predict -1, n_keep 0, no
// streaming, the content-only chat format, reasoning format "none" and
// no speculative decoding, whatever the server's flags.
func defaultGenerationParams(o Options) map[string]any {
	t := engine.NewRequest(nil)
	t.Params = o.defaultSampling()
	return taskParams(t, false)
}

// slotParams is a slot's params in GET /slots: the settings of its
// current or last request t, as taskParams reports them. What the engine does not keep of a request
// (whether it streamed, its chat format) shows a fresh task's values, the
// reasoning format and speculative types the server's.
func slotParams(o Options, t *engine.Request, full bool) map[string]any {
	out := taskParams(t, full)
	out["reasoning_format"], out["speculative.types"] = o.ReasoningFormat, o.Engine.Speculative.TypesString()
	return out
}

// taskParams is t as llama-server v0.4.0 reports a task's parameters
// "for metrics" and, with full, also its lists (stop, logit_bias, the
// grammar and its triggers). The numeric settings come from the parameter
// table (genParams, over sampling.Table).
func taskParams(t *engine.Request, full bool) map[string]any {
	out := map[string]any{}
	for i := range genParams {
		if genParams[i].Props {
			genParams[i].echo(t, out)
		}
	}
	p := t.Params
	lora := []map[string]any{}
	for _, l := range t.LoRA {
		lora = append(lora, map[string]any{"id": l.ID, "scale": l.Scale})
	}
	out["n_predict"], out["max_tokens"], out["n_keep"], out["n_discard"] = t.NPredict, t.NPredict, t.NKeep, 0
	out["seed"], out["ignore_eos"], out["samplers"], out["backend_sampling"] = p.Seed, p.IgnoreEOS, nonNilStrings(p.Samplers), p.BackendSampling
	out["n_probs"], out["min_keep"], out["lora"] = p.NProbs, p.MinKeep, lora
	out["stream"], out["timings_per_token"], out["post_sampling_probs"] = false, false, false
	out["chat_format"], out["reasoning_format"], out["reasoning_in_content"], out["generation_prompt"] = "Content-only", "none", false, ""
	out["speculative.types"] = "none"
	if full {
		bias := []map[string]any{}
		for tok, b := range p.LogitBias {
			e := map[string]any{"token": tok, "bias": nil}
			if !math.IsInf(float64(b), -1) {
				e["bias"] = b
			}
			bias = append(bias, e)
		}
		sort.Slice(bias, func(i, j int) bool { return bias[i]["token"].(llama.Token) < bias[j]["token"].(llama.Token) })
		triggers := []map[string]any{}
		for _, tr := range p.GrammarTriggers {
			// llama.cpp's trigger types: 0 token, 1 word, 2 pattern, 3 full pattern.
			switch {
			case tr.Token != llama.NoToken:
				triggers = append(triggers, map[string]any{"type": 0, "value": tr.Word, "token": tr.Token})
			case tr.Word != "":
				triggers = append(triggers, map[string]any{"type": 1, "value": tr.Word})
			case tr.PatternFull:
				triggers = append(triggers, map[string]any{"type": 3, "value": tr.Pattern})
			default:
				triggers = append(triggers, map[string]any{"type": 2, "value": tr.Pattern})
			}
		}
		out["dry_sequence_breakers"], out["stop"], out["logit_bias"] = nonNilStrings(p.DRYSequenceBreakers), nonNilStrings(t.Stop), bias
		out["grammar"], out["grammar_lazy"], out["grammar_triggers"], out["preserved_tokens"] = p.Grammar, p.GrammarLazy, triggers, nonNilStrings(p.PreservedTokens)
	}
	return out
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
			return notSupported("This server does not support slots action. Start it with `--slot-save-path` (Options.SlotSavePath)")
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
		if n := inst.Engine.Slots(); id >= n {
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
			out := slotSaved{Filename: req.Filename, IDSlot: id, NSaved: nTok, NWritten: nBytes}
			out.Timings.SaveMS = ms()
			writeJSON(w, http.StatusOK, out)
		case "restore":
			nTok, nBytes, err := inst.Engine.RestoreSlot(id, path)
			if err != nil {
				return slotError(err, req.Filename, action)
			}
			out := slotRestored{Filename: req.Filename, IDSlot: id, NRestored: nTok, NRead: nBytes}
			out.Timings.RestoreMS = ms()
			writeJSON(w, http.StatusOK, out)
		case "erase":
			n, err := inst.Engine.EraseSlot(id)
			if err != nil {
				return slotError(err, "", action)
			}
			writeJSON(w, http.StatusOK, slotErased{IDSlot: id, NErased: n})
		}
		return nil
	}
}
