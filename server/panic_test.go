package server

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/engine"
)

// boomDrafter panics at its first draft, as a drafter with a bug would.
type boomDrafter struct{}

func (boomDrafter) Draft(context.Context, []llama.Token, int) ([]llama.Token, error) {
	panic("boom: drafter")
}
func (boomDrafter) Accepted(int) {}

// TestServerPanicIs500: a request whose drafter panics on the engine's
// loop is answered 500 server_error with the panic's message (or, when
// streaming, an error event), while a request beside it answers normally,
// and the server keeps answering: health, and the same request again on
// the same slot.
func TestServerPanicIs500(t *testing.T) {
	_, ts := newTestServer(t, Options{Engine: engine.Options{Parallel: 2, Speculative: engine.SpeculativeOptions{
		// The victims ask for 41 tokens.
		NewDrafters: func(_ int, r *engine.Request) []llama.Drafter {
			if r.NPredict == 41 {
				return []llama.Drafter{boomDrafter{}}
			}
			return nil
		},
	}}})
	normal := map[string]any{"prompt": "Once upon a time", "temperature": 0, "n_predict": 24, "id_slot": 1}
	code, before := postJSON(t, ts.URL+"/completion", normal)
	require.Equal(t, http.StatusOK, code)

	var wg sync.WaitGroup
	var victimCode, besideCode int
	var victim, beside map[string]any
	wg.Add(2)
	go func() {
		defer wg.Done()
		victimCode, victim = postJSON(t, ts.URL+"/completion", map[string]any{"prompt": "Once upon a time", "temperature": 0, "n_predict": 41, "id_slot": 0})
	}()
	go func() {
		defer wg.Done()
		besideCode, beside = postJSON(t, ts.URL+"/completion", normal)
	}()
	wg.Wait()
	require.Equal(t, http.StatusInternalServerError, victimCode, "%v", victim)
	e, _ := victim["error"].(map[string]any)
	require.NotNil(t, e, "%v", victim)
	assert.Equal(t, "server_error", e["type"])
	assert.EqualValues(t, 500, e["code"])
	assert.Equal(t, "llama: engine: drafter: panic: boom: drafter", e["message"])
	require.Equal(t, http.StatusOK, besideCode, "%v", beside)
	assert.Equal(t, before["content"], beside["content"])

	var stream strings.Builder
	sseLines(t, ts.URL+"/completion", map[string]any{"prompt": "Once upon a time", "n_predict": 41, "stream": true, "id_slot": 0},
		func(l string) { stream.WriteString(l + "\n") })
	assert.Contains(t, stream.String(), "boom: drafter", "the stream's error event")

	resp, err := http.Get(ts.URL + "/health")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	again := map[string]any{"prompt": "Once upon a time", "temperature": 0, "n_predict": 24, "id_slot": 0}
	code, after := postJSON(t, ts.URL+"/completion", again)
	require.Equal(t, http.StatusOK, code, "%v", after)
	assert.Equal(t, before["content"], after["content"])
	assert.EqualValues(t, 0, after["id_slot"])
}
