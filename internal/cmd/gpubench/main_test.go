package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/engine"
)

// TestWriteVocab: the synthetic vocabularies load in llama.cpp with the
// size asked for, tokenize any text (with the byte fallback for what they
// lack) and give printable ASCII back, and render the byte tokens that are
// not a printable ASCII character alone as nothing (a random model's
// output stays valid UTF-8).
func TestWriteVocab(t *testing.T) {
	for _, n := range []int{512, 4096, 32768} {
		path := filepath.Join(t.TempDir(), "vocab.gguf")
		require.NoError(t, writeVocab(path, n))
		m, err := llama.LoadModel(context.Background(), path, llama.ModelOptions{VocabOnly: true})
		require.NoError(t, err, "vocabulary of %d", n)
		assert.Equal(t, n, m.VocabSize())
		for _, tc := range []struct{ text, back string }{
			{"Once upon a time", "Once upon a time"},
			// Other characters go to their bytes, which render as nothing.
			{"naïve café, 42!\n\tend", "nave caf, 42!\n\tend"},
		} {
			toks, err := m.Tokenize(tc.text, llama.TokenizeOptions{})
			require.NoError(t, err)
			require.NotEmpty(t, toks)
			back, err := m.Detokenize(toks, llama.DetokenizeOptions{})
			require.NoError(t, err)
			assert.Equal(t, tc.back, back, "vocabulary of %d", n)
		}
		for _, tc := range []struct {
			tok  llama.Token
			want string
		}{
			{3 + 'a', "a"}, {3 + '\n', "\n"}, {3 + 0xC3, ""}, {3 + 0x00, ""},
		} {
			p, err := m.TokenPiece(tc.tok, false)
			require.NoError(t, err)
			assert.Equal(t, tc.want, p, "piece of token %d", tc.tok)
		}
		m.Close()
	}
}

// TestScrapeSteps: the step breakdown read back from a server's /metrics
// is what the engine reports there, and a /metrics without it is an error.
func TestScrapeSteps(t *testing.T) {
	var st engine.StepTimes
	st.Steps = 7
	st.Phase[engine.PhaseDecodeWait] = 1500 * time.Millisecond
	st.Phase[engine.PhaseEmit] = 3 * time.Millisecond
	for _, tc := range []struct {
		name, body string
		want       engine.StepTimes
		err        bool
	}{
		{"all phases", stepsText(st), st, false},
		{"none", "llamacpp:n_decode_total 7\n", engine.StepTimes{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = w.Write([]byte(tc.body))
			}))
			defer ts.Close()
			got, err := scrapeSteps(ts.URL)
			if tc.err {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// stepsText is what the server writes for st (server.metricsText's
// series), by hand.
func stepsText(st engine.StepTimes) string {
	s := "# HELP llamacpp:n_decode_total x\n# TYPE llamacpp:n_decode_total counter\nllamacpp:n_decode_total 7\n"
	for p := range engine.NumStepPhases {
		s += `llamacpp:step_seconds_total{phase="` + p.String() + `"} ` + formatSeconds(st.Phase[p]) + "\n"
	}
	return s
}

func formatSeconds(d time.Duration) string {
	switch d {
	case 1500 * time.Millisecond:
		return "1.5"
	case 3 * time.Millisecond:
		return "0.003"
	}
	return "0"
}

// TestIdleShare: the table's idle % is the share of our rounds' wall time
// the loop did not work, whatever idle time before the round the scrapes'
// difference holds.
func TestIdleShare(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		took, work, idle, gat time.Duration
		want                  string
	}{
		{"a quarter idle", time.Second, 750 * time.Millisecond, 0, 0, "25"},
		{"the pause before the round left out", time.Second, 750 * time.Millisecond, 5 * time.Second, 0, "25"},
		{"gather counts as idle", time.Second, 500 * time.Millisecond, 0, 500 * time.Millisecond, "50"},
		{"working the whole time", time.Second, time.Second, 300 * time.Millisecond, 0, "0"},
		{"no steps", 0, 0, 0, 0, "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := row{model: "m", clients: 1, ours: side{took: tc.took}}
			r.steps.Steps = 10
			r.steps.Phase[engine.PhaseDecodeSubmit] = tc.work
			r.steps.Phase[engine.PhaseIdle] = tc.idle
			r.steps.Phase[engine.PhaseGather] = tc.gat
			cells := strings.Split(r.line(), "|")
			assert.Equal(t, tc.want, strings.TrimSpace(cells[len(cells)-2]))
		})
	}
}

// TestPairedRatio: the median of the rounds' own ratios, rounds where a
// side has no figure left out.
func TestPairedRatio(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ours, ref []float64
		want      float64
	}{
		{"none", nil, nil, 0},
		{"one round", []float64{100}, []float64{50}, 2},
		{"odd: the middle one", []float64{100, 10, 90}, []float64{100, 100, 90}, 1},
		{"even: the mean of the middle two", []float64{100, 120, 80, 300}, []float64{100, 100, 100, 100}, 1.1},
		{"a side missing", []float64{100, 100}, []float64{50}, 2},
		{"a round without figures", []float64{100, 0, 100}, []float64{100, 100, 50}, 1.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.InDelta(t, tc.want, pairedRatio(tc.ours, tc.ref), 1e-9)
		})
	}
}

// TestWaitIdle: the wait ends at the first window in which the processes
// together used under 5 % of a core, gives up after quietMax, and does
// not wait where the CPU time cannot be read.
func TestWaitIdle(t *testing.T) {
	busy, idle := quietWindow, quietWindow/100 // CPU time per window
	for _, tc := range []struct {
		name    string
		windows []time.Duration // CPU time used in each window, per process
		readErr bool
		want    int
	}{
		{"idle at once", []time.Duration{idle}, false, 1},
		{"spinning for three windows", []time.Duration{busy, busy, busy, idle}, false, 4},
		{"never idle", nil, false, int(quietMax / quietWindow)},
		{"unreadable", nil, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var now time.Duration // CPU time so far, per process
			w := 0
			cpu := func(int) (time.Duration, bool) { return now, !tc.readErr }
			sleep := func(time.Duration) {
				if w < len(tc.windows) {
					now += tc.windows[w]
				} else if tc.windows == nil {
					now += busy
				}
				w++
			}
			assert.Equal(t, tc.want, waitIdle([]int{1, 2}, cpu, sleep))
		})
	}
	// This process, idle, is seen as such before the wait gives up.
	_, ok := cpuTime(os.Getpid())
	require.True(t, ok, "schedstat readable")
	assert.Less(t, waitIdle([]int{os.Getpid()}, cpuTime, time.Sleep), int(quietMax/quietWindow))
}
