package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
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
// and the value as json.Marshal writes it (a string as it is), then a
// blank line, flushed; the writer's buffer, kept between events, never
// leaks one event into the next, a large one included.
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
				js, err := json.Marshal(tc.v)
				require.NoError(t, err)
				want += "data: " + string(js) + "\n\n"
			}
			assert.Equal(t, want+"data: end\n\n", w.Body.String())
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
