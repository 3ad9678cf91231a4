package router

// The events of GET /models/sse: a model's status changes and the steps
// of a download.

// Event is one event of GET /models/sse.
type Event struct {
	Model string `json:"model"`
	Event string `json:"event"`
	Data  any    `json:"data,omitempty"`
}

// EventStatus and EventError are the data of a download's events.
type (
	EventStatus struct {
		Status string `json:"status"`
	}
	EventError struct {
		Error string `json:"error"`
	}
)

// Subscribe registers a listener of the router's events until cancel. A
// listener that falls behind misses events rather than blocking the
// router.
func (r *Router[I]) Subscribe() (events <-chan Event, cancel func()) {
	ch := make(chan Event, 64)
	r.mu.Lock()
	r.subs[ch] = struct{}{}
	r.mu.Unlock()
	return ch, func() {
		r.mu.Lock()
		delete(r.subs, ch)
		r.mu.Unlock()
	}
}

// notifyLocked broadcasts e's status, with extra data.
func (r *Router[I]) notifyLocked(e *Model[I], extra map[string]any) {
	data := map[string]any{"status": string(e.state)}
	for k, v := range extra {
		data[k] = v
	}
	r.broadcastLocked(Event{Model: e.name, Event: "model_status", Data: data})
}

// broadcastLocked sends ev to the listeners.
func (r *Router[I]) broadcastLocked(ev Event) {
	for ch := range r.subs {
		select {
		case ch <- ev:
		default: // a slow listener misses events rather than blocking loads
		}
	}
}
