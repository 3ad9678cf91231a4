package engine

import (
	"context"
	"fmt"
	"iter"
	"sync"

	"github.com/x/llama"
)

// Stream is the events of one submitted request (or of several, from
// SubmitAll), read like sql.Rows:
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
	ob     *outbox   // the request's; with SubmitAll, the first one's
	obs    []*outbox // with SubmitAll, every request's, in order (they share ob's sig)
	turn   int       // the request whose outbox Next looks at first
	ev     Event
	idx    int
	err    error
}

// Next waits for the next event and reports whether there is one: false
// after the last event (of every request, with SubmitAll), or when the
// request's context is done (Err then says so).
func (s *Stream) Next() bool {
	for {
		if ok, fin := s.take(); ok {
			return true
		} else if fin {
			s.ev = Event{}
			if s.cut() {
				// Ended without its last event: the loop dropped it
				// because its context ended, before this saw ctx.Done.
				s.err = s.ctx.Err()
			}
			return false
		}
		select {
		case <-s.ob.sig:
		case <-s.ctx.Done():
			// The loop may have pushed the last events before it saw the
			// cancellation: they are still delivered.
			if ok, _ := s.take(); ok {
				return true
			}
			s.err = s.ctx.Err()
			s.ev = Event{}
			return false
		}
	}
}

// take moves to the next unread event (ok), looking at the requests in
// turn from s.turn so that none waits behind another's backlog, and reports
// whether every request has sent its last event (fin) when there is none.
func (s *Stream) take() (ok, fin bool) {
	n := max(len(s.obs), 1)
	fin = true
	for k := range n {
		i := (s.turn + k) % n
		ev, ok, last := s.box(i).pop()
		if ok {
			s.ev, s.idx, s.turn = ev, i, (i+1)%n
			return true, false
		}
		fin = fin && last
	}
	return false, fin
}

// cut reports whether a request ended without its Done event.
func (s *Stream) cut() bool {
	for i := range max(len(s.obs), 1) {
		o := s.box(i)
		o.mu.Lock()
		done := o.done
		o.mu.Unlock()
		if !done {
			return true
		}
	}
	return false
}

// box returns the outbox of request i.
func (s *Stream) box(i int) *outbox {
	if s.obs == nil {
		return s.ob
	}
	return s.obs[i]
}

// Event returns the event Next moved to.
func (s *Stream) Event() Event { return s.ev }

// Index returns the index, among the requests given to SubmitAll, of the
// request whose event Next moved to; it is 0 for a Stream from Submit.
func (s *Stream) Index() int { return s.idx }

// Err returns the context's error when Next stopped because the request's
// context was done before its last event, else nil. A request that failed
// says so in its last Event's Err.
func (s *Stream) Err() error { return s.err }

// Close stops the request (every request, with SubmitAll) if it is still
// queued or running, frees its slot and drops the events not read yet.
func (s *Stream) Close() error {
	s.cancel()
	for i := range max(len(s.obs), 1) {
		s.box(i).drop()
	}
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
			if !yield(ev, ev.Err) {
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

// SubmitAll submits reqs, in order, and returns one Stream of the events of
// them all, Index telling which request an event is of: the several
// choices of one prompt, or several prompts, read as they are generated
// with no goroutine per request. Next takes turns among the requests whose
// events are waiting, keeps each request's events in order, and reports
// false once every request has sent its last event. Cancelling ctx or
// closing the Stream stops them all. When Submit refuses a request, the
// ones before it are stopped and SubmitAll returns that error.
func (e *Engine) SubmitAll(ctx context.Context, reqs []*Request) (*Stream, error) {
	if len(reqs) == 0 {
		return nil, fmt.Errorf("engine: no requests: %w", llama.ErrInvalid)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithCancel(ctx)
	obs := make([]*outbox, len(reqs))
	for i, r := range reqs {
		st, err := e.Submit(ctx, r)
		if err != nil {
			cancel()
			for _, o := range obs[:i] {
				o.drop()
			}
			return nil, err
		}
		obs[i] = st.ob
	}
	// One signal for all: a push to any request wakes the reader. Pushes
	// before the switch are found by Next, which looks before it waits.
	for _, o := range obs[1:] {
		o.mu.Lock()
		o.sig = obs[0].sig
		o.mu.Unlock()
	}
	return &Stream{ctx: ctx, cancel: cancel, ob: obs[0], obs: obs}, nil
}

// outbox is an unbounded event queue between the loop and a Stream, so that
// a slow reader never stalls the other slots.
type outbox struct {
	mu   sync.Mutex
	sig  chan struct{} // a push happened since the reader last looked
	q    []Event
	head int  // q[head:] are unread
	fin  bool // no more events: the last was pushed or the reader left
	// quiet: only the last push signals (Request.WakeAtEnd).
	quiet bool
	done  bool // an event with Done was pushed
}

func newOutbox() *outbox { return &outbox{sig: make(chan struct{}, 1)} }

// push queues ev (if not nil); fin marks the last push. Pushes after the
// last are dropped. It reports whether it woke the reader.
func (o *outbox) push(ev *Event, fin bool) (woke bool) {
	o.mu.Lock()
	if o.fin {
		o.mu.Unlock()
		return false
	}
	if ev != nil {
		o.q = append(o.q, *ev)
		o.done = o.done || ev.Done
	}
	o.fin = fin
	sig, quiet := o.sig, o.quiet && !fin
	o.mu.Unlock()
	return !quiet && notify(sig)
}

// unread reports whether events wait for the reader.
func (o *outbox) unread() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.head < len(o.q)
}

// drop ends the queue and forgets the unread events: the reader left.
func (o *outbox) drop() {
	o.mu.Lock()
	clear(o.q)
	o.q, o.head, o.fin = nil, 0, true
	sig := o.sig
	o.mu.Unlock()
	notify(sig)
}

// notify wakes the reader waiting on sig, if it is not already woken,
// and reports whether it did.
func notify(sig chan struct{}) bool {
	select {
	case sig <- struct{}{}:
		return true
	default:
		return false
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
