package engine

import (
	"context"
	"iter"
	"sync"
)

// Stream is the events of one submitted request, read like sql.Rows:
//
//	st, err := eng.Submit(ctx, req)
//	if err != nil { ... }
//	defer st.Close()
//	for st.Next() {
//		ev := st.Event()
//		...
//	}
//
// A completion sends an Event per generated token and a last one with Done
// set (and Err when it failed); embeddings and reranks send one Event with
// Done set. The engine queues events for a slow reader without stalling the
// other requests, so a Stream holds no goroutine and a reader that stops
// early loses nothing but must Close (or cancel the context given to
// Submit) to free the slot. A Stream is not safe for concurrent use, except
// for Close, which may be called from any goroutine, any number of times.
type Stream struct {
	ctx    context.Context
	cancel context.CancelFunc
	ob     *outbox
	ev     Event
	err    error
}

// Next waits for the next event and reports whether there is one: false
// after the last event, or when the request's context is done (Err then
// says so).
func (s *Stream) Next() bool {
	for {
		if ev, ok, fin := s.ob.pop(); ok {
			s.ev = ev
			return true
		} else if fin {
			s.ev = Event{}
			return false
		}
		select {
		case <-s.ob.sig:
		case <-s.ctx.Done():
			// The loop may have pushed the last events before it saw the
			// cancellation: they are still delivered.
			if ev, ok, _ := s.ob.pop(); ok {
				s.ev = ev
				return true
			}
			s.err = s.ctx.Err()
			s.ev = Event{}
			return false
		}
	}
}

// Event returns the event Next moved to.
func (s *Stream) Event() Event { return s.ev }

// Err returns the context's error when Next stopped because the request's
// context was done before its last event, else nil. A request that failed
// says so in its last Event's Err.
func (s *Stream) Err() error { return s.err }

// Close stops the request if it is still queued or running, frees its slot
// and drops the events not read yet.
func (s *Stream) Close() error {
	s.cancel()
	s.ob.drop()
	return nil
}

// All returns an iterator over the stream's events, the error of each
// being its Err (the last event's, for a failed request) or the context's
// error when it ended early. Breaking out of the loop closes the Stream.
func (s *Stream) All() iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		defer s.Close()
		for s.Next() {
			ev := s.Event()
			if !yield(ev, ev.Err) || ev.Done {
				return
			}
		}
		if err := s.Err(); err != nil {
			yield(Event{Done: true, SlotID: -1, Err: err}, err)
		}
	}
}

// Generate submits req and returns its events as an iterator (see
// Stream.All). A request the engine refuses (see Submit) yields one Event
// holding the error. Many goroutines may Generate on one Engine at once;
// their requests share its slots and are decoded in the same batches.
func (e *Engine) Generate(ctx context.Context, req *Request) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		st, err := e.Submit(ctx, req)
		if err != nil {
			yield(Event{Done: true, SlotID: -1, Err: err}, err)
			return
		}
		st.All()(yield)
	}
}

// outbox is an unbounded event queue between the loop and a Stream, so that
// a slow reader never stalls the other slots.
type outbox struct {
	sig chan struct{} // a push happened since the reader last looked

	mu   sync.Mutex
	q    []Event
	head int  // q[head:] are unread
	fin  bool // no more events: the last was pushed or the reader left
}

func newOutbox() *outbox { return &outbox{sig: make(chan struct{}, 1)} }

// push queues ev (if not nil); fin marks the last push. Pushes after the
// last are dropped.
func (o *outbox) push(ev *Event, fin bool) {
	o.mu.Lock()
	if o.fin {
		o.mu.Unlock()
		return
	}
	if ev != nil {
		o.q = append(o.q, *ev)
	}
	o.fin = fin
	o.mu.Unlock()
	select {
	case o.sig <- struct{}{}:
	default:
	}
}

// drop ends the queue and forgets the unread events: the reader left.
func (o *outbox) drop() {
	o.mu.Lock()
	clear(o.q)
	o.q, o.head, o.fin = nil, 0, true
	o.mu.Unlock()
	select {
	case o.sig <- struct{}{}:
	default:
	}
}

// pop takes the next unread event (ok), and reports whether no more will
// come (fin) when there is none.
func (o *outbox) pop() (ev Event, ok, fin bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.head < len(o.q) {
		ev = o.q[o.head]
		o.q[o.head] = Event{}
		o.head++
		if o.head == len(o.q) {
			o.q, o.head = o.q[:0], 0
		}
		return ev, true, false
	}
	return Event{}, false, o.fin
}
