package llama_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
)

// TestLogger routes llama.cpp's log to a slog.Logger and back to silence.
func TestLogger(t *testing.T) {
	var buf testenv.Buffer
	llama.SetLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	m, err := llama.LoadModel(context.Background(), testenv.Model(t, "stories260K.gguf"), llama.ModelOptions{})
	llama.SetLogger(nil)
	require.NoError(t, err)
	defer m.Close()
	logs := buf.String()
	assert.Contains(t, logs, "source=llama.cpp")
	assert.Contains(t, logs, "llama_model_loader")
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		assert.Contains(t, line, "msg=", "one record per line")
	}
	n := len(buf.String())
	m2, err := llama.LoadModel(context.Background(), testenv.Model(t, "stories260K.gguf"), llama.ModelOptions{})
	require.NoError(t, err)
	m2.Close()
	assert.Equal(t, n, len(buf.String()), "quiet again after SetLogger(nil)")
}

// reentrantHandler calls SetLogger from inside Handle, once, as a handler
// that reconfigures logging might; it records what it handled.
type reentrantHandler struct {
	slog.Handler
	once  *sync.Once
	self  **slog.Logger
	lines *testenv.Buffer
}

func (h reentrantHandler) Handle(ctx context.Context, r slog.Record) error {
	h.once.Do(func() { llama.SetLogger(*h.self) })
	h.lines.Write([]byte(r.Message + "\n"))
	return nil
}

// TestLoggerReentrant: no lock is held while a record is handled, so a
// handler may call back into the package (it deadlocked under the global
// log mutex), and records from several threads need not queue behind one.
func TestLoggerReentrant(t *testing.T) {
	var lines testenv.Buffer
	var l *slog.Logger
	l = slog.New(reentrantHandler{Handler: slog.NewTextHandler(&lines, nil), once: new(sync.Once), self: &l, lines: &lines})
	llama.SetLogger(l)
	defer llama.SetLogger(nil)
	m, err := llama.LoadModel(context.Background(), testenv.Model(t, "stories260K.gguf"), llama.ModelOptions{})
	require.NoError(t, err)
	require.NoError(t, m.Close())
	assert.Contains(t, lines.String(), "llama_model_loader")
}
