package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/chat"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/session"
)

var (
	modelsOnce sync.Once
	models     = map[string]*llama.Model{}
	modelsErr  error
)

// model loads a test model once for the package's tests.
func model(t testing.TB, name string) *llama.Model {
	t.Helper()
	modelsOnce.Do(func() {
		for _, n := range []string{"stories260K.gguf", "llama-2-tiny-random.gguf"} {
			m, err := llama.LoadModel(context.Background(), testenv.Model(t, n), llama.ModelOptions{CPUOnly: true})
			if err != nil {
				modelsErr = err
				return
			}
			models[n] = m
		}
	})
	require.NoError(t, modelsErr)
	return models[name]
}

func newContext(t testing.TB, m *llama.Model, n int) *llama.Context {
	t.Helper()
	lctx, err := m.NewContext(llama.ContextOptions{ContextSize: n, Threads: 1, ThreadsBatch: 1})
	require.NoError(t, err)
	t.Cleanup(func() { lctx.Close() })
	return lctx
}

// chatML gives stories260K (which has no template) a chat form, with the
// generic JSON format for tools.
var chatML = session.Options{TemplateName: "chatml", ToolFormat: chat.FormatGeneric, Stop: []string{"<|im_end|>"}, MaxTokens: 200}

type weatherArgs struct {
	City string `json:"city" jsonschema:"maxLength=12"`
}

func addWeather(t testing.TB, s *session.Session, calls *[]string) {
	t.Helper()
	require.NoError(t, session.AddTool(s, "get_weather", "Current weather in a city",
		func(ctx context.Context, in weatherArgs) (map[string]any, error) {
			*calls = append(*calls, in.City)
			return map[string]any{"city": in.City, "temperature_c": 21}, nil
		}))
}

func TestTemplates(t *testing.T) {
	m := model(t, "stories260K.gguf")
	lctx := newContext(t, m, 512)
	file := filepath.Join(t.TempDir(), "t.jinja")
	require.NoError(t, os.WriteFile(file, []byte(`{% for m in messages %}[{{ m.role }}] {{ m.content }}{% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}`), 0o600))
	bad := filepath.Join(t.TempDir(), "bad.jinja")
	require.NoError(t, os.WriteFile(bad, []byte(`{% for %}`), 0o600))
	for _, tc := range []struct {
		name string
		o    session.Options
		err  string
	}{
		{name: "a model without a template", o: session.Options{},
			err: `the model has no chat template: set Options.TemplateFile (a Jinja file) or Options.TemplateName (a llama.cpp built-in such as "chatml")`},
		{name: "a file", o: session.Options{TemplateFile: file}},
		{name: "a name", o: session.Options{TemplateName: "chatml"}},
		{name: "a native name", o: session.Options{TemplateName: "vicuna"}},
		{name: "an unknown name", o: session.Options{TemplateName: "nope"}, err: `unknown template name "nope"`},
		{name: "a missing file", o: session.Options{TemplateFile: file + ".x"}, err: "template file: open"},
		{name: "a file that does not parse", o: session.Options{TemplateFile: bad}, err: "template file " + bad},
		{name: "two ways", o: session.Options{TemplateFile: file, TemplateName: "chatml"}, err: "set one of TemplateFile, TemplateName and Templates"},
		{name: "MaxSteps past the bound", o: session.Options{TemplateName: "chatml", MaxSteps: session.MaxStepsLimit + 1}, err: "MaxSteps 65 out of range"},
		{name: "MaxTokens past the context", o: session.Options{TemplateName: "chatml", MaxTokens: 512}, err: "MaxTokens 512 leaves no room"},
		{name: "a format that cannot stand in", o: session.Options{TemplateName: "chatml", ToolFormat: chat.FormatHermes2Pro}, err: "only chat.FormatGeneric"},
		{name: "a sequence out of range", o: session.Options{TemplateName: "chatml", Seq: 3}, err: "sequence 3 out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := session.New(lctx, tc.o)
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, llama.ErrInvalid)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
}

// A template without a tool-call format refuses tools unless the generic
// format stands in; with it, a forced call from a tiny model is valid
// JSON of the tool's Go type, runs, and its result goes back.
func TestToolLoop(t *testing.T) {
	m := model(t, "stories260K.gguf")
	t.Run("refused without a tool format", func(t *testing.T) {
		s, err := session.New(newContext(t, m, 1024), session.Options{TemplateName: "chatml"})
		require.NoError(t, err)
		var calls []string
		err = session.AddTool(s, "get_weather", "", func(context.Context, weatherArgs) (string, error) { return "", nil })
		require.ErrorIs(t, err, llama.ErrInvalid)
		assert.Contains(t, err.Error(), "set Options.ToolFormat to chat.FormatGeneric")
		_ = calls
	})
	for _, tc := range []struct {
		name   string
		choice chat.ToolChoice
	}{
		{"required", chat.ToolChoice{Mode: "required"}},
		{"named", chat.ToolChoice{Mode: "function", Function: "get_weather"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := chatML
			o.ToolChoice, o.MaxSteps = tc.choice, 2
			s, err := session.New(newContext(t, m, 2048), o)
			require.NoError(t, err)
			var cities []string
			addWeather(t, s, &cities)
			reply, err := s.Send(context.Background(), "What is the weather in Paris?")
			require.NoError(t, err)
			require.NotEmpty(t, reply.Calls)
			assert.LessOrEqual(t, len(reply.Calls), 2, "at most MaxSteps steps call")
			assert.Equal(t, len(reply.Calls)+1, reply.Steps, "the step after the calls answers")
			c := reply.Calls[0]
			assert.Equal(t, "get_weather", c.Name)
			var args weatherArgs
			require.NoError(t, json.Unmarshal([]byte(c.Arguments), &args), c.Arguments)
			assert.Equal(t, args.City, cities[0])
			assert.JSONEq(t, fmt.Sprintf(`{"city": %q, "temperature_c": 21}`, args.City), c.Result)
			h := s.History()
			require.GreaterOrEqual(t, len(h), 4)
			assert.Equal(t, chat.RoleUser, h[0].Role)
			assert.Equal(t, c.ID, h[1].ToolCalls[0].ID)
			assert.Equal(t, chat.RoleTool, h[2].Role)
			assert.Equal(t, c.Result, h[2].Content)
			assert.Equal(t, chat.RoleAssistant, h[len(h)-1].Role)
			assert.Equal(t, reply.Content, h[len(h)-1].Content)
		})
	}
}

// Errors of a tool, unknown tools and arguments that do not decode go back
// to the model as the call's result; a panic ends the turn.
func TestToolErrors(t *testing.T) {
	m := model(t, "stories260K.gguf")
	for _, tc := range []struct {
		name   string
		fn     func(context.Context, weatherArgs) (string, error)
		result string
		panics bool
	}{
		{name: "an error", fn: func(context.Context, weatherArgs) (string, error) { return "", errors.New("no such city") },
			result: "error: no such city"},
		{name: "a panic", fn: func(context.Context, weatherArgs) (string, error) { panic("boom") }, panics: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := chatML
			o.ToolChoice, o.MaxSteps = chat.ToolChoice{Mode: "required"}, 1
			s, err := session.New(newContext(t, m, 2048), o)
			require.NoError(t, err)
			require.NoError(t, session.AddTool(s, "get_weather", "", tc.fn))
			reply, err := s.Send(context.Background(), "Weather?")
			if tc.panics {
				var pe *llama.PanicError
				require.ErrorAs(t, err, &pe)
				assert.Equal(t, "boom", pe.Value)
				assert.Empty(t, s.History(), "a failed turn leaves the history as it was")
				return
			}
			require.NoError(t, err)
			require.Len(t, reply.Calls, 1)
			assert.Equal(t, tc.result, reply.Calls[0].Result)
			assert.Error(t, reply.Calls[0].Err)
		})
	}
	t.Run("bad registrations", func(t *testing.T) {
		s, err := session.New(newContext(t, m, 512), chatML)
		require.NoError(t, err)
		ok := func(context.Context, weatherArgs) (string, error) { return "", nil }
		require.NoError(t, session.AddTool(s, "get_weather", "", ok))
		for name, err := range map[string]error{
			"twice":        session.AddTool(s, "get_weather", "", ok),
			"bad name":     session.AddTool(s, "get weather", "", ok),
			"no name":      session.AddTool(s, "", "", ok),
			"not a struct": session.AddTool(s, "f", "", func(context.Context, string) (string, error) { return "", nil }),
			"nil":          session.AddTool[weatherArgs, string](s, "g", "", nil),
		} {
			assert.ErrorIs(t, err, llama.ErrInvalid, name)
		}
	})
}
