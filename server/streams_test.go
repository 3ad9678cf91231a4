package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/engine"
)

// The choices (or prompts) of one streamed request are sent as the engine
// generates them, all together rather than one after the other, and a
// client that goes away mid-stream frees every slot they hold.
func TestStreamSeveralTasksTogether(t *testing.T) {
	tests := []struct {
		name  string
		path  string
		body  map[string]any
		index func(chunk map[string]any) (int, bool) // the task of a chunk with text
	}{
		{"native, two prompts", "/completion",
			map[string]any{"prompt": []any{"Once upon a time", "The cat"}},
			func(c map[string]any) (int, bool) {
				i, _ := c["index"].(float64)
				text, _ := c["content"].(string)
				return int(i), text != ""
			}},
		{"openai completions, two prompts", "/v1/completions",
			map[string]any{"prompt": []any{"Once upon a time", "The cat"}},
			func(c map[string]any) (int, bool) {
				choice, ok := firstChoice(c)
				text, _ := choice["text"].(string)
				i, _ := choice["index"].(float64)
				return int(i), ok && text != ""
			}},
		{"chat, two choices", "/v1/chat/completions",
			map[string]any{"messages": []any{map[string]any{"role": "user", "content": "Tell me a story"}}, "n": 2},
			func(c map[string]any) (int, bool) {
				choice, ok := firstChoice(c)
				delta, _ := choice["delta"].(map[string]any)
				text, _ := delta["content"].(string)
				i, _ := choice["index"].(float64)
				return int(i), ok && text != ""
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// With context shift, generation goes on until the client leaves.
			s, ts := newTestServer(t, Options{Engine: engine.Options{Parallel: 2, ContextShift: true}})
			tasks := watchSubmits(t, s)
			body := map[string]any{"n_predict": 100000, "ignore_eos": true, "stream": true}
			for k, v := range tc.body {
				body[k] = v
			}
			data, err := json.Marshal(body)
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+tc.path, bytes.NewReader(data))
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			task := <-tasks
			// Each task streams text while the other goes on: neither waits
			// for the other to end (it never does), nor lags far behind (an event
			// is two lines).
			const each = 20
			var seen [2]int
			sc := bufio.NewScanner(resp.Body)
			for lines := 0; seen[0] < each || seen[1] < each; lines++ {
				require.Less(t, lines, 20*each, "one task's text waits for the other's: text chunks %v", seen)
				require.True(t, sc.Scan(), "the stream ended early: %v (text chunks %v)", sc.Err(), seen)
				line, ok := strings.CutPrefix(sc.Text(), "data: ")
				if !ok || line == "[DONE]" {
					continue
				}
				var chunk map[string]any
				require.NoError(t, json.Unmarshal([]byte(line), &chunk), line)
				if i, text := tc.index(chunk); text {
					require.Contains(t, []int{0, 1}, i)
					seen[i]++
				}
			}
			assert.Equal(t, "2", metric(t, ts.URL, "requests_processing"))
			cancel()
			resp.Body.Close()
			// The server cancels the tasks when it sees the client gone; the
			// engine frees a cancelled task's slot before it starts the next
			// task, and a task's slot before its answer: after one more
			// request, none is busy.
			<-task.Done()
			code, out := postJSON(t, ts.URL+"/completion", map[string]any{"prompt": "x", "n_predict": 1})
			require.Equal(t, http.StatusOK, code, "%v", out)
			assert.Equal(t, "0", metric(t, ts.URL, "requests_processing"))
		})
	}
}

// firstChoice returns the first of an OpenAI chunk's choices.
func firstChoice(chunk map[string]any) (map[string]any, bool) {
	choices, _ := chunk["choices"].([]any)
	if len(choices) == 0 {
		return nil, false
	}
	c, ok := choices[0].(map[string]any)
	return c, ok
}

// collect and peekEvents read the interleaved events of several tasks: each
// task's result is its own, and the error answered is the first failed
// task's in task order, as when the tasks were read one after the other.
func TestCollectSeveralTasks(t *testing.T) {
	errA, errB := errors.New("a"), errors.New("b")
	text := func(s string) engine.Event { return engine.Event{Token: 1, Text: s} }
	done := engine.Event{Done: true}
	tests := []struct {
		name    string
		events  []engine.Event
		index   []int
		want    []string // each task's text
		wantErr error    // of collect
		peekErr error    // of peekEvents
	}{
		{"interleaved", []engine.Event{text("a"), text("x"), text("b"), done, text("y"), done},
			[]int{0, 1, 0, 0, 1, 1}, []string{"ab", "xy"}, nil, nil},
		{"the second fails first", []engine.Event{text("a"), text("x"), {Done: true, Err: errB}, text("b"), done},
			[]int{0, 1, 1, 0, 0}, nil, errB, nil},
		{"both fail: the first's error", []engine.Event{text("x"), {Done: true, Err: errB}, {Done: true, Err: errA}},
			[]int{1, 1, 0}, nil, errA, errA},
		{"a task fails at once", []engine.Event{text("a"), {Done: true, Err: errB}, done},
			[]int{0, 1, 0}, nil, errB, errB},
		{"the stream ends early", []engine.Event{text("a"), done, text("x")},
			[]int{0, 0, 1}, nil, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			res, err := collect(ctx, nil, &sliceStream{events: tc.events, index: tc.index, at: -1}, 2)
			switch {
			case tc.wantErr != nil:
				require.ErrorIs(t, err, tc.wantErr)
			case tc.want == nil:
				require.ErrorContains(t, err, "without a result")
			default:
				require.NoError(t, err)
				for i, r := range res {
					assert.Equal(t, tc.want[i], r.Text, "task %d", i)
					assert.True(t, r.Final.Done, "task %d", i)
				}
			}
			st, err := peekEvents(ctx, &sliceStream{events: tc.events, index: tc.index, at: -1}, 2)
			if tc.peekErr != nil {
				require.ErrorIs(t, err, tc.peekErr)
				return
			}
			require.NoError(t, err)
			var got []engine.Event
			var idx []int
			for st.Next() {
				got, idx = append(got, st.Event()), append(idx, st.Index())
			}
			assert.Equal(t, tc.events, got, "the events read ahead come first, in order")
			assert.Equal(t, tc.index, idx)
		})
	}
}
