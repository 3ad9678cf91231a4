//go:build realmodel

package session_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/chat"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/internal/testenv/modeltest"
	"github.com/x/llama/session"
)

// A Gemma 3 tool loop in process: Gemma 3's template has no tool-call
// format, so the generic JSON format stands in for it; the first step must
// call get_weather, its result goes back, and the model answers. The body
// between the markers is the user code the issue bounds to 15 lines.
func TestRealModelGemmaToolLoop(t *testing.T) {
	path := testenv.RealModel(t, "gemma3-270m")
	tmpl := filepath.Join(testenv.RepoRoot(t), "server", "testdata", "gemma3-chat-template.jinja")
	ctx := context.Background()
	var cities []string

	// user code: begin
	model := modeltest.LoadPath(t, path, llama.ModelOptions{})
	lctx, err := model.NewContext(llama.ContextOptions{ContextSize: 2048, Threads: 2})
	require.NoError(t, err)
	s, err := session.New(lctx, session.Options{TemplateFile: tmpl, ToolFormat: chat.FormatGeneric,
		ToolChoice: chat.ToolChoice{Mode: "required"}, MaxSteps: 1, MaxTokens: 64})
	require.NoError(t, err)
	require.NoError(t, session.AddTool(s, "get_weather", "Current weather in a city",
		func(ctx context.Context, in struct{ City string }) (string, error) {
			cities = append(cities, in.City)
			return "sunny, 21 °C in " + in.City, nil
		}))
	reply, err := s.Send(ctx, "What is the weather in Paris?")
	require.NoError(t, err)
	// user code: end

	require.Len(t, reply.Calls, 1)
	var args struct{ City string }
	require.NoError(t, json.Unmarshal([]byte(reply.Calls[0].Arguments), &args))
	assert.Equal(t, []string{args.City}, cities)
	assert.Equal(t, "sunny, 21 °C in "+args.City, reply.Calls[0].Result)
	assert.NotEmpty(t, reply.Content)
	assert.Equal(t, 2, reply.Steps)
	t.Logf("call %s(%s) -> %s; answer: %q", reply.Calls[0].Name, reply.Calls[0].Arguments, reply.Calls[0].Result, reply.Content)
	h := s.History()
	require.Len(t, h, 4)
	assert.Equal(t, chat.RoleTool, h[2].Role)
}
