package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/engine"
)

// flushCounter is a ResponseWriter that records what was flushed when.
type flushCounter struct {
	*httptest.ResponseRecorder
	flushes   int
	atFlushes []string // the body at each flush
}

func (f *flushCounter) Flush() {
	f.flushes++
	f.atFlushes = append(f.atFlushes, f.Body.String())
	f.ResponseRecorder.Flush()
}

// TestSSEEvents: each event is "event: name" (when named), then "data: "
// and the value as json.Marshal writes it without HTML escapes, as
// llama-server writes it (a string as it is), then a blank line, flushed;
// the writer's buffer, kept between events, never leaks one event into the
// next, a large one included; the stream is nosniff.
func TestSSEEvents(t *testing.T) {
	big := strings.Repeat("x", 100<<10)
	for _, tc := range []struct {
		name  string
		event string
		v     any
	}{
		{"struct", "", nativeChunk{Content: "<b>&</b> \u2028", Tokens: []llama.Token{}, IDSlot: 1}},
		{"map", "", map[string]any{"a": 1, "b": []string{"x"}}},
		{"string", "", `{"raw":true}`},
		{"named", "message_start", map[string]int{"n": 2}},
		{"large", "", map[string]string{"big": big}},
		{"after a large one", "", map[string]int{"small": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &flushCounter{ResponseRecorder: httptest.NewRecorder()}
			s := sseOpen(context.Background(), w)
			require.NoError(t, s.send(tc.event, tc.v))
			require.NoError(t, s.send("", "end"))
			want := ""
			if tc.event != "" {
				want = "event: " + tc.event + "\n"
			}
			if str, ok := tc.v.(string); ok {
				want += "data: " + str + "\n\n"
			} else {
				js, err := marshalJSON(tc.v)
				require.NoError(t, err)
				want += "data: " + string(js) + "\n\n"
			}
			assert.Equal(t, want+"data: end\n\n", w.Body.String())
			if tc.name == "struct" {
				assert.Contains(t, w.Body.String(), `"content":"<b>&</b> \u2028"`)
			}
			assert.Equal(t, "nosniff", w.Header().Get("X-Content-Type-Options"))
			assert.Equal(t, 2, w.flushes)
			assert.Equal(t, 2, s.seq())
		})
	}
}

// TestSSEOpenSendsHeadersWithFirstEvent: sseOpen flushes nothing, so the
// status and headers go out with the first event; sseStart flushes them
// at once.
func TestSSEOpenSendsHeadersWithFirstEvent(t *testing.T) {
	for _, tc := range []struct {
		name    string
		open    func(w http.ResponseWriter) *sseWriter
		flushes []string // the body at each flush
	}{
		{"sseOpen", func(w http.ResponseWriter) *sseWriter { return sseOpen(context.Background(), w) },
			[]string{"data: 1\n\n"}},
		{"sseStart", func(w http.ResponseWriter) *sseWriter {
			s, err := sseStart(context.Background(), w)
			require.NoError(t, err)
			return s
		}, []string{"", "data: 1\n\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &flushCounter{ResponseRecorder: httptest.NewRecorder()}
			s := tc.open(w)
			assert.Equal(t, http.StatusOK, w.Code)
			assert.Equal(t, "text/event-stream", w.Header().Get("Content-Type"))
			require.NoError(t, s.data(1))
			assert.Equal(t, tc.flushes, w.atFlushes)
		})
	}
}

// TestSSEPings: a stream silent for the scope's interval gets a comment
// line, before its first event too (sending the headers with it), and
// none once its handler has returned; an interval of 0 sends none.
func TestSSEPings(t *testing.T) {
	for _, tc := range []struct {
		name  string
		every time.Duration
		pings bool
	}{
		{"every 20 ms", 20 * time.Millisecond, true},
		{"off", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &flushCounter{ResponseRecorder: httptest.NewRecorder()}
			var s *sseWriter
			h := sseScoped(tc.every, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				s = sseOpen(r.Context(), w)
				time.Sleep(150 * time.Millisecond)
				require.NoError(t, s.data(1))
				time.Sleep(150 * time.Millisecond)
			}))
			h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/completion", nil))
			body := w.Body.String()
			time.Sleep(100 * time.Millisecond)
			s.mu.Lock()
			assert.Equal(t, body, w.Body.String(), "a write after the handler returned")
			s.mu.Unlock()
			before, after, ok := strings.Cut(body, "data: 1\n\n")
			require.True(t, ok, body)
			if !tc.pings {
				assert.Empty(t, before+after)
				return
			}
			assert.Contains(t, before, ":\n\n", "no ping before the first event")
			assert.Contains(t, after, ":\n\n", "no ping after it")
			assert.Equal(t, "", strings.ReplaceAll(before+after, ":\n\n", ""), "pings are comment lines")
			assert.Equal(t, 1, s.seq(), "pings are not events")
		})
	}
}

// TestStreamOpensPastPingInterval: a streaming request whose first event
// takes longer than the ping interval (here it waits for the one slot,
// busy with another request) gets its headers and a ping then, not at its
// first token, and the same text as a stream that did not wait.
func TestStreamOpensPastPingInterval(t *testing.T) {
	_, ts := newTestServer(t, Options{SSEPing: 30 * time.Millisecond, Engine: engine.Options{Parallel: 1}})
	post := func(body string) string {
		resp, err := http.Post(ts.URL+"/completion", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}
	text := func(body string) string {
		var sb strings.Builder
		for _, line := range strings.Split(body, "\n") {
			var c struct{ Content string }
			if rest, ok := strings.CutPrefix(line, "data: "); ok && json.Unmarshal([]byte(rest), &c) == nil {
				sb.WriteString(c.Content)
			}
		}
		return sb.String()
	}
	const greedy = `{"prompt": "Once upon a time", "n_predict": 16, "temperature": 0, "stream": true}`
	alone := post(greedy)
	require.NotContains(t, alone, ":\n\n", "the first event came in time")
	done := make(chan struct{})
	go func() { // the one slot, for a while
		defer close(done)
		post(`{"prompt": "Once", "n_predict": 1000, "ignore_eos": true}`) // to the end of the context
	}()
	time.Sleep(20 * time.Millisecond)
	waited := post(greedy)
	<-done
	assert.True(t, strings.HasPrefix(waited, ":\n\n"), "the headers and a ping before the first event: %.80q", waited)
	assert.NotEmpty(t, text(alone))
	assert.Equal(t, text(alone), text(waited))
}

// slowStream is an eventStream whose one event, ev, comes after delay.
type slowStream struct {
	delay time.Duration
	ev    engine.Event
	n     int
}

func (s *slowStream) Next() bool {
	if s.n > 0 {
		return false
	}
	time.Sleep(s.delay)
	s.n++
	return true
}
func (s *slowStream) Event() engine.Event { return s.ev }
func (s *slowStream) Index() int          { return 0 }
func (s *slowStream) Err() error          { return nil }
func (s *slowStream) Close() error        { return nil }

// TestPeekOrOpen: a first event in time is peeked, a failure in time is
// the handler's error (its status); past the ping interval the stream
// opens with a ping, and a failure then is sent in the stream, in the
// route's dialect, the handler's error being errStreamed.
func TestPeekOrOpen(t *testing.T) {
	fail := engine.Event{Err: errors.New("the engine stopped")}
	ok := engine.Event{Text: "Once"}
	for _, tc := range []struct {
		name       string
		delay      time.Duration
		ev         engine.Event
		stream     bool
		err        error  // the handler's error
		body       string // what was written
		bodySuffix string
	}{
		{"in time", 0, ok, true, nil, "", ""},
		{"a failure in time", 0, fail, true, fail.Err, "", ""},
		{"late", 80 * time.Millisecond, ok, true, nil, ":\n\n", ""},
		{"a late failure", 80 * time.Millisecond, fail, true, errStreamed, ":\n\n", "data: {\"error\":"},
		{"not a stream: no time limit", 80 * time.Millisecond, fail, false, fail.Err, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &flushCounter{ResponseRecorder: httptest.NewRecorder()}
			h := sseScoped(20*time.Millisecond, openAIErrors.serve(func(w http.ResponseWriter, r *http.Request) error {
				st, err := peekOrOpen(r.Context(), streamTo(w, tc.stream), &slowStream{delay: tc.delay, ev: tc.ev}, 1)
				if err == nil {
					require.True(t, st.Next())
					assert.Equal(t, tc.ev, st.Event())
				}
				if !assert.ErrorIs(t, err, tc.err) && err == nil {
					return nil
				}
				return err
			}))
			h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil))
			body := w.Body.String()
			switch {
			case tc.err != nil && tc.err != errStreamed:
				assert.Contains(t, body, `{"error":`, "the error as the response")
				assert.NotEqual(t, http.StatusOK, w.Code)
			default:
				assert.True(t, strings.HasPrefix(body, tc.body), "%q", body)
				assert.Contains(t, body, tc.bodySuffix)
			}
		})
	}
}

// TestSSEUnencodable: an event JSON cannot hold (a NaN: a bug somewhere)
// is not taken for a gone client: send reports it and the stream ends
// with its dialect's error event, where it used to end silently (a 200
// with no event).
func TestSSEUnencodable(t *testing.T) {
	for _, tc := range []struct {
		name  string
		d     dialect
		event string // the error event's name
		want  string // in its data
	}{
		{"llama.cpp", llamaErrors, "", `"type":"server_error"`},
		{"OpenAI", openAIErrors, "", `"type":"server_error"`},
		{"Anthropic", anthropicErrors, "error", `"type":"api_error"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &flushCounter{ResponseRecorder: httptest.NewRecorder()}
			ctx := context.WithValue(context.Background(), dialectKey{}, tc.d)
			s := sseOpen(ctx, w)
			require.NoError(t, s.data(map[string]int{"n": 1}))
			err := s.data(map[string]float64{"prob": math.NaN()})
			require.Error(t, err)
			body := w.Body.String()
			assert.True(t, strings.HasPrefix(body, "data: {\"n\":1}\n\n"), body)
			rest := strings.TrimPrefix(body, "data: {\"n\":1}\n\n")
			if tc.event != "" {
				assert.True(t, strings.HasPrefix(rest, "event: "+tc.event+"\n"), rest)
			}
			assert.Contains(t, rest, "data: ")
			assert.Contains(t, rest, tc.want)
			assert.Contains(t, rest, "encode event")
			assert.NotContains(t, rest, "NaN\n")
		})
	}
}
