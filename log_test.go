package llama_test

import (
	"bytes"
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

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLogger routes llama.cpp's log to a slog.Logger and back to silence.
func TestLogger(t *testing.T) {
	var buf syncBuf
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
