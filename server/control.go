package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"sync"
)

// completionControls are the chat completions in flight, by id, that
// POST /v1/chat/completions/control can act on. The zero value is ready.
type completionControls struct {
	mu     sync.Mutex
	active map[string]*completionControl
}

// completionControl is one chat completion in flight.
type completionControl struct {
	reasoningControl bool // the request armed it ("reasoning_control": true)
}

// track registers a completion until the returned func is called.
func (cc *completionControls) track(id string, reasoningControl bool) func() {
	c := &completionControl{reasoningControl: reasoningControl}
	cc.mu.Lock()
	if cc.active == nil {
		cc.active = map[string]*completionControl{}
	}
	cc.active[id] = c
	cc.mu.Unlock()
	return func() {
		cc.mu.Lock()
		if cc.active[id] == c {
			delete(cc.active, id)
		}
		cc.mu.Unlock()
	}
}

func (cc *completionControls) get(id string) *completionControl {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.active[id]
}

// handleCompletionControl acts on a chat completion in flight, named by
// its id: {"id": "chatcmpl-...", "action": "reasoning_end"}. The answer is
// {"success": bool, "message": "..."} (message only on failure).
//
// reasoning_end (end the reasoning block now) needs the engine to insert
// the reasoning end tokens mid-generation, which it cannot do yet: for a
// completion that armed reasoning control the answer says so, with
// success false; the others get llama-server's answers.
func handleCompletionControl(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var body struct {
			ID     any `json:"id"`
			Action any `json:"action"`
		}
		data, err := readJSONBody(r)
		if he := (*httpError)(nil); errors.As(err, &he) {
			return he
		}
		if err == nil {
			err = json.Unmarshal(data, &body)
		}
		if err != nil {
			return badRequest("invalid JSON body: %v", err)
		}
		id, _ := body.ID.(string)
		action, _ := body.Action.(string)
		if id == "" {
			return badRequest("missing completion id")
		}
		if action != "reasoning_end" {
			return badRequest("unknown control action")
		}
		c := s.controls.get(id)
		switch {
		case c == nil:
			s.log.Warn("control on an unknown completion", "action", action, "id", id)
			writeJSON(w, http.StatusOK, controlAnswer{Message: "no active completion for this id"})
		case !c.reasoningControl:
			writeJSON(w, http.StatusOK, controlAnswer{Message: "reasoning control not enabled for this completion"})
		default:
			writeJSON(w, http.StatusOK, controlAnswer{Message: "reasoning_end is not supported by this server yet"})
		}
		return nil
	}
}

// controlAnswer answers a control action.
type controlAnswer struct {
	Message string `json:"message"`
	Success bool   `json:"success"`
}
