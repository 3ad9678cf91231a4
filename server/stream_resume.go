package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Resumable streams, as llama-server's: a streamed generation request
// carrying an X-Conversation-Id header keeps its server-sent events in a
// session of that id, and keeps generating when the client goes away.
// GET /v1/stream?conv_id=ID&from=N replays the events from byte N and
// follows them live; POST /v1/streams/lookup tells which of the ids a
// client names have a session; DELETE /v1/stream?conv_id=ID stops the
// generation and forgets the session.
//
// Sessions belong to the API key that started them (keyScope): the id is
// looked up among that key's sessions only, so a request with another key
// cannot replay, list, stop or replace them, whatever ids it names. The
// middleware runs behind the key check, so a request without a valid key
// never reaches a session. (llama-server's sessions are shared by all
// keys.) A server without keys has one scope.
//
// Each session keeps up to streamSessionMaxBytes, so their number is
// capped, per key and in all (llama-server has no cap): a new session
// past a cap drops the oldest finished one, and when every session is
// still generating, the request is served without one (it is not
// resumable and ends with its connection).
const (
	streamSessionTTL      = 300 * time.Second // a finished session is kept that long
	streamSessionMaxBytes = 4 << 20           // older bytes are dropped past this
	streamSessionsPerKey  = 16                // sessions of one key scope
	streamSessionsMax     = 64                // sessions of all scopes
)

// resumableRoute reports whether path is a generation endpoint whose
// streams can be resumed.
func resumableRoute(path string) bool {
	switch path {
	case "/completion", "/completions", "/v1/completions",
		"/chat/completions", "/v1/chat/completions",
		"/responses", "/v1/responses", "/v1/messages", "/infill":
		return true
	}
	return false
}

// streamKey names a session: the key scope and the conversation id.
type streamKey struct{ scope, id string }

// streamSession is the buffered output of one generation.
type streamSession struct {
	key     streamKey
	started time.Time
	cancel  context.CancelFunc // stops the generation

	mu        sync.Mutex
	buf       []byte
	dropped   int // bytes dropped from the front
	done      bool
	completed time.Time
	wake      chan struct{} // closed and replaced on every change
}

func newStreamSession(key streamKey, cancel context.CancelFunc) *streamSession {
	return &streamSession{key: key, started: time.Now(), cancel: cancel, wake: make(chan struct{})}
}

func (ss *streamSession) signalLocked() {
	close(ss.wake)
	ss.wake = make(chan struct{})
}

// append adds p, dropping the oldest bytes past the size cap.
func (ss *streamSession) append(p []byte) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.done || len(p) == 0 {
		return
	}
	if len(p) >= streamSessionMaxBytes {
		skip := len(p) - streamSessionMaxBytes
		ss.dropped += len(ss.buf) + skip
		ss.buf = append(ss.buf[:0], p[skip:]...)
	} else {
		if over := len(ss.buf) + len(p) - streamSessionMaxBytes; over > 0 {
			ss.buf = append(ss.buf[:0], ss.buf[over:]...)
			ss.dropped += over
		}
		ss.buf = append(ss.buf, p...)
	}
	ss.signalLocked()
}

// finish marks the session complete and wakes its readers.
func (ss *streamSession) finish() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.done {
		return
	}
	ss.done, ss.completed = true, time.Now()
	ss.signalLocked()
}

// stop cancels the generation and finishes the session.
func (ss *streamSession) stop() {
	ss.cancel()
	ss.finish()
}

// read returns the bytes from offset on, whether the session is done, a
// channel closed on the next change, and false if offset was dropped.
func (ss *streamSession) read(offset int) (data []byte, done bool, wake <-chan struct{}, ok bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if offset < ss.dropped {
		return nil, ss.done, ss.wake, false
	}
	if i := offset - ss.dropped; i < len(ss.buf) {
		data = append([]byte(nil), ss.buf[i:]...)
	}
	return data, ss.done, ss.wake, true
}

// streamInfo is a stream in the answer of POST /v1/streams/lookup. Its
// fields are in the order of their names, as llama-server's JSON objects
// are.
type streamInfo struct {
	CompletedAt    int64  `json:"completed_at"`
	ConversationID string `json:"conversation_id"`
	IsDone         bool   `json:"is_done"`
	StartedAt      int64  `json:"started_at"`
	TotalBytes     int    `json:"total_bytes"`
}

func (ss *streamSession) info() streamInfo {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var completed int64
	if ss.done {
		completed = ss.completed.Unix()
	}
	return streamInfo{
		ConversationID: ss.key.id, IsDone: ss.done, TotalBytes: ss.dropped + len(ss.buf),
		StartedAt: ss.started.Unix(), CompletedAt: completed,
	}
}

func (ss *streamSession) expired(now time.Time) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.done && now.Sub(ss.completed) >= streamSessionTTL
}

// streamStore holds a server's sessions, one per conversation id. The
// zero value is ready to use.
type streamStore struct {
	mu       sync.Mutex
	sessions map[streamKey]*streamSession
	closed   bool
}

// pruneLocked forgets the sessions finished more than the TTL ago.
func (st *streamStore) pruneLocked() {
	now := time.Now()
	for k, ss := range st.sessions {
		if ss.expired(now) {
			delete(st.sessions, k)
		}
	}
}

// replace installs a new session for id, stopping the previous one. It
// reports false when the store is closed or full of sessions still
// generating (see streamSessionsPerKey).
func (st *streamStore) replace(ss *streamSession) bool {
	st.mu.Lock()
	if st.closed {
		st.mu.Unlock()
		return false
	}
	if st.sessions == nil {
		st.sessions = map[streamKey]*streamSession{}
	}
	st.pruneLocked()
	if _, ok := st.sessions[ss.key]; !ok {
		if !st.makeRoomLocked(func(k streamKey) bool { return k.scope == ss.key.scope }, streamSessionsPerKey) ||
			!st.makeRoomLocked(func(streamKey) bool { return true }, streamSessionsMax) {
			st.mu.Unlock()
			return false
		}
	}
	prev := st.sessions[ss.key]
	st.sessions[ss.key] = ss
	st.mu.Unlock()
	if prev != nil {
		prev.stop()
	}
	return true
}

// makeRoomLocked drops the oldest finished sessions among those whose
// key is in, until fewer than limit of them remain; it reports false
// when the others are all generating.
func (st *streamStore) makeRoomLocked(in func(streamKey) bool, limit int) bool {
	for {
		n := 0
		var oldest *streamSession
		for k, ss := range st.sessions {
			if !in(k) {
				continue
			}
			n++
			ss.mu.Lock()
			if ss.done && (oldest == nil || ss.completed.Before(oldest.completed)) {
				oldest = ss
			}
			ss.mu.Unlock()
		}
		if n < limit {
			return true
		}
		if oldest == nil {
			return false
		}
		delete(st.sessions, oldest.key)
	}
}

func (st *streamStore) get(key streamKey) *streamSession {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.pruneLocked()
	return st.sessions[key]
}

// remove forgets key's session if it is still ss (nil: whatever it is)
// and returns what it removed.
func (st *streamStore) remove(key streamKey, ss *streamSession) *streamSession {
	st.mu.Lock()
	defer st.mu.Unlock()
	cur := st.sessions[key]
	if cur == nil || ss != nil && cur != ss {
		return nil
	}
	delete(st.sessions, key)
	return cur
}

// lookup returns scope's sessions of the ids asked for: an id matches its
// own session and those keyed "ID::MODEL".
func (st *streamStore) lookup(scope string, ids []string) []*streamSession {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.pruneLocked()
	var mine []string
	for k := range st.sessions {
		if k.scope == scope {
			mine = append(mine, k.id)
		}
	}
	slices.Sort(mine)
	var out []*streamSession
	for _, id := range ids {
		for _, k := range mine {
			if k == id || strings.HasPrefix(k, id+"::") {
				out = append(out, st.sessions[streamKey{scope, k}])
			}
		}
	}
	return out
}

// closeAll finishes every session (waking their readers) and refuses new
// ones.
func (st *streamStore) closeAll() {
	st.mu.Lock()
	all := st.sessions
	st.sessions, st.closed = nil, true
	st.mu.Unlock()
	for _, ss := range all {
		ss.stop()
	}
}

// resumableStreams is the middleware that records the streams of the
// generation routes called with an X-Conversation-Id header. It must run
// after the API key check (buildHandler installs it per route, inside
// requireAPIKey): the session is the key's. Such a request's context no
// longer ends with its connection (its deadline, if any, still holds) but
// with DELETE /v1/stream or a newer request of the same conversation and
// key; what the handler writes goes to the session and, while it is
// connected, to the client. A request that fails before streaming leaves
// no session.
func resumableStreams(st *streamStore) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := r.Header.Get("X-Conversation-Id")
			if id == "" || r.Method != http.MethodPost || !resumableRoute(r.URL.Path) {
				next.ServeHTTP(w, r)
				return
			}
			ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
			defer cancel()
			if d, ok := r.Context().Deadline(); ok {
				var cancelDeadline context.CancelFunc
				ctx, cancelDeadline = context.WithDeadline(ctx, d)
				defer cancelDeadline()
			}
			key := streamKey{scope: keyScope(r), id: id}
			ss := newStreamSession(key, cancel)
			if !st.replace(ss) {
				next.ServeHTTP(w, r)
				return
			}
			tw := &teeWriter{w: w, rc: http.NewResponseController(w), ss: ss, client: r.Context()}
			next.ServeHTTP(tw, r.WithContext(ctx))
			if !tw.streaming {
				st.remove(key, ss)
			}
			ss.finish()
		})
	}
}

// teeWriter copies a server-sent events response into a session and to
// the client while it is there; once the client is gone, writes still
// succeed so that the generation goes on.
type teeWriter struct {
	w         http.ResponseWriter
	rc        *http.ResponseController
	ss        *streamSession
	client    context.Context
	wrote     bool
	streaming bool // the response is an event stream
	gone      bool
}

func (t *teeWriter) Header() http.Header { return t.w.Header() }

func (t *teeWriter) WriteHeader(code int) {
	if t.wrote {
		return
	}
	t.wrote = true
	t.streaming = code == http.StatusOK && strings.HasPrefix(t.w.Header().Get("Content-Type"), "text/event-stream")
	t.w.WriteHeader(code)
}

func (t *teeWriter) Write(p []byte) (int, error) {
	if !t.wrote {
		t.WriteHeader(http.StatusOK)
	}
	if !t.streaming {
		return t.w.Write(p)
	}
	t.ss.append(p)
	if !t.gone && t.client.Err() == nil {
		if _, err := t.w.Write(p); err != nil {
			t.gone = true
		}
	}
	return len(p), nil
}

// FlushError flushes to the client while it is there.
func (t *teeWriter) FlushError() error {
	if !t.wrote {
		t.WriteHeader(http.StatusOK)
	}
	if t.gone || t.client.Err() != nil {
		if !t.streaming {
			return t.client.Err()
		}
		return nil
	}
	if err := t.rc.Flush(); err != nil {
		t.gone = true
		if !t.streaming {
			return err
		}
	}
	return nil
}

func handleStreamGet(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		q := r.URL.Query()
		id := q.Get("conv_id")
		if id == "" {
			return badRequest("Missing conversation id in path")
		}
		ss := s.streams.get(streamKey{scope: keyScope(r), id: id})
		if ss == nil {
			return apiError(errNotFound, "Stream not found or expired")
		}
		from := 0
		if v := q.Get("from"); v != "" {
			n, err := strconv.ParseUint(v, 10, 62)
			if err != nil {
				return badRequest("Invalid 'from' offset")
			}
			from = int(n)
		}
		data, done, wake, ok := ss.read(from)
		if !ok {
			return badRequest("Stream offset lost, please restart")
		}
		sse, _ := sseStart(r.Context(), w)
		for {
			if len(data) > 0 {
				if sse.raw(data) != nil {
					return nil
				}
				from += len(data)
			}
			if done && len(data) == 0 {
				return nil
			}
			if len(data) == 0 {
				select {
				case <-wake:
				case <-r.Context().Done():
					return nil
				case <-s.done:
					return nil
				}
			}
			data, done, wake, ok = ss.read(from)
			if !ok {
				return nil
			}
		}
	}
}

func handleStreamDelete(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		id := r.URL.Query().Get("conv_id")
		if id == "" {
			return badRequest("Missing conversation id in path")
		}
		if ss := s.streams.remove(streamKey{scope: keyScope(r), id: id}, nil); ss != nil {
			ss.stop()
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
}

func handleStreamsLookup(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		data, err := readJSONBody(r)
		if he := (*httpError)(nil); errors.As(err, &he) {
			return he
		}
		var body map[string]json.RawMessage
		if err == nil {
			err = json.Unmarshal(data, &body)
		}
		if err != nil {
			// As llama-server: an error object without "code".
			return &httpError{Status: http.StatusBadRequest, Type: errInvalidRequest, Msg: "invalid body: " + err.Error(), NoCode: true}
		}
		var raw []json.RawMessage
		_ = json.Unmarshal(body["conversation_ids"], &raw)
		var ids []string
		for _, v := range raw {
			var id string
			if json.Unmarshal(v, &id) == nil && id != "" {
				ids = append(ids, id)
			}
		}
		out := []streamInfo{}
		for _, ss := range s.streams.lookup(keyScope(r), ids) {
			out = append(out, ss.info())
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	}
}
