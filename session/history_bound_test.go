package session_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/chat"
	"github.com/x/llama/session"
)

// TestLongHistoryTrim: a history far longer than the context (a saved
// conversation given to SetHistory) used to be trimmed one turn per render
// of the whole conversation: 20,000 turns took minutes, with ctx unheeded.
// The turns to drop are now found by bisection; the newest turns that fit
// are kept, as before.
func TestLongHistoryTrim(t *testing.T) {
	m := model(t, "stories260K.gguf")
	for _, tc := range []struct {
		name  string
		turns int
	}{
		{"none", 0},
		{"fits", 2},
		{"a few over", 40},
		{"20000 turns", 20000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := chatML
			o.MaxTokens = 16
			s, err := session.New(newContext(t, m, 512), o)
			require.NoError(t, err)
			var msgs []chat.Message
			for i := range tc.turns {
				msgs = append(msgs, chat.Message{Role: chat.RoleUser, Content: fmt.Sprintf("turn %d", i)},
					chat.Message{Role: chat.RoleAssistant, Content: "ok"})
			}
			require.NoError(t, s.SetHistory(msgs))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err = s.Send(ctx, "last")
			require.NoError(t, err)
			h := s.History()
			require.GreaterOrEqual(t, len(h), 2)
			assert.Equal(t, "last", h[len(h)-2].Content)
			kept := (len(h) - 2) / 2
			if tc.turns <= 2 {
				assert.Equal(t, tc.turns, kept, "a history that fits is kept whole")
				return
			}
			assert.Less(t, kept, tc.turns)
			assert.Greater(t, kept, 5, "the newest turns that fit are kept")
			if kept > 0 {
				assert.Equal(t, fmt.Sprintf("turn %d", tc.turns-kept), h[0].Content, "the oldest turns went")
			}
		})
	}
}
