package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/chat"
	"github.com/x/llama/engine"
	"github.com/x/llama/internal/testenv/modeltest"
	"github.com/x/llama/session"
)

// model returns a test model shared by the package's tests.
func model(t testing.TB, name string) *llama.Model {
	t.Helper()
	return modeltest.Shared(t, name, true)
}

func newContext(t testing.TB, m *llama.Model, n int) *llama.Context {
	t.Helper()
	return modeltest.NewContext(t, m, llama.ContextOptions{ContextSize: n, Threads: 1, ThreadsBatch: 1})
}

// chatML gives stories260K (which has no template) a chat form, with the
// generic JSON format for tools.
var chatML = session.Options{TemplateName: "chatml", ToolFormat: chat.FormatGeneric, Stop: []string{"<|im_end|>"}, MaxTokens: 200}

// hermesChatML is ChatML with the Hermes <tool_call> format.
const hermesChatML = `{%- if tools %}<|im_start|>system
Tools:
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}Call one as <tool_call>{"name": ..., "arguments": ...}</tool_call>.<|im_end|>
{% endif %}{%- for m in messages %}<|im_start|>{{ m.role }}
{% if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}}</tool_call>{% endfor %}{% else %}{{ m.content }}{% endif %}<|im_end|>
{% endfor %}{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}`

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
		err = session.AddTool(s, "get_weather", "", func(context.Context, weatherArgs) (string, error) { return "", nil })
		require.ErrorIs(t, err, llama.ErrInvalid)
		assert.Contains(t, err.Error(), "set Options.ToolFormat to chat.FormatGeneric")
	})
	hermes := filepath.Join(t.TempDir(), "hermes.jinja")
	require.NoError(t, os.WriteFile(hermes, []byte(hermesChatML), 0o600))
	for _, tc := range []struct {
		name   string
		choice chat.ToolChoice
		file   string
	}{
		{name: "required", choice: chat.ToolChoice{Mode: "required"}},
		{name: "named", choice: chat.ToolChoice{Mode: "function", Function: "get_weather"}},
		{name: "a template with its own format", choice: chat.ToolChoice{Mode: "required"}, file: hermes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := chatML
			if tc.file != "" {
				o.TemplateName, o.TemplateFile, o.ToolFormat = "", tc.file, chat.FormatContentOnly
			}
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
	t.Run("a forced call with no tools", func(t *testing.T) {
		o := chatML
		o.ToolChoice = chat.ToolChoice{Mode: "required"}
		s, err := session.New(newContext(t, m, 512), o)
		require.NoError(t, err)
		_, err = s.Send(context.Background(), "Weather?")
		require.ErrorIs(t, err, llama.ErrInvalid)
		assert.Contains(t, err.Error(), `tool choice "required" with no tools`)
	})
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

// The streamed text adds up to the reply's; breaking out of the loop, or
// a call inside it, leaves the session as it was.
func TestStream(t *testing.T) {
	m := model(t, "stories260K.gguf")
	o := chatML
	o.ToolChoice, o.MaxSteps = chat.ToolChoice{Mode: "required"}, 1
	s, err := session.New(newContext(t, m, 2048), o)
	require.NoError(t, err)
	var cities []string
	addWeather(t, s, &cities)

	var text strings.Builder
	var calls []session.Call
	for ev, err := range s.Stream(context.Background(), "Weather in Rome?") {
		require.NoError(t, err)
		text.WriteString(ev.Content)
		if ev.Call != nil {
			calls = append(calls, *ev.Call)
		}
	}
	require.Len(t, calls, 1)
	h := s.History()
	require.Len(t, h, 4)
	assert.Equal(t, h[3].Content, text.String())
	assert.NotEmpty(t, text.String())

	n := 0
	for ev, err := range s.Stream(context.Background(), "And in Oslo?") {
		require.NoError(t, err)
		_, busyErr := s.Send(context.Background(), "x")
		require.ErrorIs(t, busyErr, llama.ErrBusy)
		n++
		if ev.Content != "" || n > 3 {
			break
		}
	}
	assert.Equal(t, h, s.History(), "a stream broken off leaves the history as it was")
}

// Ending ctx ends the turn with an error matching llama.ErrCanceled and
// ctx's error; the history is as before.
func TestCancel(t *testing.T) {
	m := model(t, "stories260K.gguf")
	s, err := session.New(newContext(t, m, 2048), chatML)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	var last error
	for ev, err := range s.Stream(ctx, "Tell me a story.") {
		if err != nil {
			last = err
			break
		}
		if ev.Content != "" {
			n++
			cancel()
		}
	}
	require.Error(t, last)
	assert.ErrorIs(t, last, llama.ErrCanceled)
	assert.ErrorIs(t, last, context.Canceled)
	assert.Empty(t, s.History())

	_, err = s.Send(ctx, "Hi")
	assert.ErrorIs(t, err, context.Canceled)
}

// A reply decoded into a Go type: the grammar from the type makes even a
// tiny model's answer decode.
func TestAsk(t *testing.T) {
	type answer struct {
		Name string `json:"name" jsonschema:"maxLength=10"`
		Age  int    `json:"age" jsonschema:"minimum=0,maximum=99"`
	}
	for _, name := range []string{"stories260K.gguf", "llama-2-tiny-random.gguf"} {
		t.Run(name, func(t *testing.T) {
			o := chatML
			o.ToolFormat = chat.FormatContentOnly
			s, err := session.New(newContext(t, model(t, name), 2048), o)
			require.NoError(t, err)
			a, err := session.Ask[answer](context.Background(), s, "Who are you?")
			require.NoError(t, err)
			assert.LessOrEqual(t, len([]rune(a.Name)), 10)
			assert.True(t, a.Age >= 0 && a.Age <= 99, a.Age)
			h := s.History()
			require.Len(t, h, 2)
			var back answer
			require.NoError(t, json.Unmarshal([]byte(h[1].Content), &back))
			assert.Equal(t, a, back)
		})
	}
	t.Run("cut short", func(t *testing.T) {
		o := chatML
		o.ToolFormat, o.MaxTokens = chat.FormatContentOnly, 3
		s, err := session.New(newContext(t, model(t, "stories260K.gguf"), 2048), o)
		require.NoError(t, err)
		_, err = session.Ask[answer](context.Background(), s, "Who are you?")
		require.ErrorIs(t, err, llama.ErrInvalid)
		assert.ErrorContains(t, err, "MaxTokens too low")
		assert.Equal(t, 1, strings.Count(err.Error(), "unexpected end of JSON input"), "said once")
	})
}

// The conversation stays in the context: the oldest turns go, the system
// prompt and the current turn stay; a turn that cannot fit is an error.
func TestKeepInContext(t *testing.T) {
	m := model(t, "stories260K.gguf")
	o := chatML
	o.System, o.MaxTokens = "You are a storyteller.", 24
	s, err := session.New(newContext(t, m, 256), o)
	require.NoError(t, err)
	for i := range 12 {
		_, err := s.Send(context.Background(), fmt.Sprintf("Turn %d: tell me about the little dog.", i))
		require.NoError(t, err, i)
		h := s.History()
		assert.Equal(t, chat.Message{Role: chat.RoleSystem, Content: o.System}, h[0])
		assert.Equal(t, fmt.Sprintf("Turn %d: tell me about the little dog.", i), h[len(h)-2].Content)
	}
	h := s.History()
	assert.Less(t, len(h), 1+2*12, "old turns were dropped")
	assert.Equal(t, chat.RoleUser, h[1].Role, "whole turns are dropped")

	_, err = s.Send(context.Background(), strings.Repeat("long text ", 200))
	require.ErrorIs(t, err, llama.ErrInvalid)
	assert.Contains(t, err.Error(), "the current turn does not fit in the context")
	assert.Equal(t, h, s.History())
}

// Many goroutines, each with its own session over one engine.
func TestEngine(t *testing.T) {
	m := model(t, "stories260K.gguf")
	eng, err := engine.New(m, engine.Options{Parallel: 2, Context: llama.ContextOptions{ContextSize: 4096, Threads: 1, ThreadsBatch: 1}})
	require.NoError(t, err)
	defer eng.Close()
	const n = 4
	replies := make([]*session.Reply, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := chatML
			o.ToolChoice, o.MaxSteps = chat.ToolChoice{Mode: "required"}, 1
			s, err := session.NewEngine(eng, o)
			if err != nil {
				errs[i] = err
				return
			}
			var cities []string
			if errs[i] = session.AddTool(s, "get_weather", "", func(_ context.Context, in weatherArgs) (string, error) {
				cities = append(cities, in.City)
				return "sunny in " + in.City, nil
			}); errs[i] != nil {
				return
			}
			replies[i], errs[i] = s.Send(context.Background(), fmt.Sprintf("Weather in city %d?", i))
		}()
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i], i)
		require.Len(t, replies[i].Calls, 1, i)
		var args weatherArgs
		require.NoError(t, json.Unmarshal([]byte(replies[i].Calls[0].Arguments), &args))
		assert.Equal(t, "sunny in "+args.City, replies[i].Calls[0].Result)
		assert.Equal(t, 2, replies[i].Steps)
	}
}

// A second turn reuses the first's prompt in the sequence's memory, and
// answers as a session that decodes the whole conversation afresh.
func TestPromptReuse(t *testing.T) {
	m := model(t, "stories260K.gguf")
	o := chatML
	o.MaxTokens = 32
	a, err := session.New(newContext(t, m, 1024), o)
	require.NoError(t, err)
	_, err = a.Send(context.Background(), "Tell me about the dog.")
	require.NoError(t, err)
	first := a.History()
	second, err := a.Send(context.Background(), "And the cat?")
	require.NoError(t, err)

	b, err := session.New(newContext(t, m, 1024), o)
	require.NoError(t, err)
	require.NoError(t, b.SetHistory(first))
	fresh, err := b.Send(context.Background(), "And the cat?")
	require.NoError(t, err)
	assert.Equal(t, fresh.Content, second.Content)
	assert.NotEmpty(t, second.Content)
}
