package server

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/engine"
)

// The engine loop's phases are this server's own metric, beside
// llama-server's (see TestShapesAsLlamaServer).
func init() { ourMetricsBeyond["llamacpp:step_seconds_total"] = true }

// TestMetricsStepSeconds: /metrics has the engine loop's time by phase
// under llamacpp:step_seconds_total{phase=...}, one series per phase, and
// after a generation the phases it must go through have taken time.
func TestMetricsStepSeconds(t *testing.T) {
	start := time.Now()
	_, ts := newTestServer(t, Options{Engine: engine.Options{Parallel: 1, NoPromptCache: true}})
	code, out := postJSON(t, ts.URL+"/completion", map[string]any{"prompt": "Once upon a time", "n_predict": 8, "ignore_eos": true})
	require.Equal(t, http.StatusOK, code, "%v", out)
	sum := 0.0
	for p := range engine.NumStepPhases {
		name := `step_seconds_total{phase="` + p.String() + `"}`
		v, err := strconv.ParseFloat(metric(t, ts.URL, name), 64)
		require.NoError(t, err, name)
		assert.GreaterOrEqual(t, v, 0.0, name)
		switch p {
		case engine.PhaseStart, engine.PhaseBatch, engine.PhaseDecodeSubmit, engine.PhaseDecodeWait, engine.PhaseSample, engine.PhaseEmit:
			assert.Positive(t, v, name)
		}
		sum += v
	}
	// The phases are the loop's life: no longer than the test's.
	assert.LessOrEqual(t, sum, time.Since(start).Seconds())
}

// TestMetricsStepSecondsStillWhileIdle: while nothing happens the series do
// not move (a sleeping server serves the last awake scrape, and
// llama.cpp's test_sleep holds it to that).
func TestMetricsStepSecondsStillWhileIdle(t *testing.T) {
	_, ts := newTestServer(t, Options{Engine: engine.Options{Parallel: 1, NoPromptCache: true}})
	code, out := postJSON(t, ts.URL+"/completion", map[string]any{"prompt": "Once upon a time", "n_predict": 4})
	require.Equal(t, http.StatusOK, code, "%v", out)
	steps := func() string {
		resp, err := http.Get(ts.URL + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		var lines []string
		for l := range strings.Lines(string(data)) {
			if strings.HasPrefix(l, "llamacpp:step_seconds_total{") {
				lines = append(lines, l)
			}
		}
		require.Len(t, lines, int(engine.NumStepPhases))
		return strings.Join(lines, "")
	}
	// Once the engine has parked after the answer, two scrapes in a row
	// read the same counters, and so does every later one.
	last := ""
	require.Eventually(t, func() bool {
		s := steps()
		same := s == last
		last = s
		return same
	}, 5*time.Second, 20*time.Millisecond)
	for range 3 {
		assert.Equal(t, last, steps())
	}
}

// TestWriteStepSeconds: the series of a snapshot, in Prometheus text.
func TestWriteStepSeconds(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   engine.StepTimes
		want map[string]string
	}{
		{"zero", engine.StepTimes{}, map[string]string{"idle": "0", "decode_wait": "0", "other": "0"}},
		{"some", func() engine.StepTimes {
			var st engine.StepTimes
			st.Steps = 3
			st.Phase[engine.PhaseDecodeWait] = 1500 * time.Millisecond
			st.Phase[engine.PhaseEmit] = 250 * time.Microsecond
			return st
		}(), map[string]string{"decode_wait": "1.5", "emit": "0.00025", "idle": "0"}},
		{"an idle wait in progress is not counted yet", func() engine.StepTimes {
			var st engine.StepTimes
			st.Phase[engine.PhaseIdle] = 2500 * time.Millisecond
			st.Waiting = 500 * time.Millisecond
			return st
		}(), map[string]string{"idle": "2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sb strings.Builder
			writeStepSeconds(&sb, tc.st)
			text := sb.String()
			assert.Contains(t, text, "# TYPE llamacpp:step_seconds_total counter\n")
			assert.Equal(t, int(engine.NumStepPhases), strings.Count(text, "llamacpp:step_seconds_total{phase="))
			for phase, v := range tc.want {
				assert.Contains(t, text, `llamacpp:step_seconds_total{phase="`+phase+`"} `+v+"\n")
			}
		})
	}
}
