package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/x/llama/engine"
	"github.com/x/llama/sampling"
	"github.com/x/llama/server/internal/wire"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/chat"
)

// Every llama.cpp built-in template name works as Options.ChatTemplate:
// /apply-template renders it and a chat completion runs with it.
func TestEveryBuiltinTemplate(t *testing.T) {
	names, err := llama.BuiltinChatTemplates()
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(names), 40)
	want := map[string]string{
		"chatml":      "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
		"llama4":      "<|header_start|>system<|header_end|>\n\nS<|eot|><|header_start|>user<|header_end|>\n\nHi<|eot|><|header_start|>assistant<|header_end|>\n\n",
		"vicuna-orca": "SYSTEM: S\nUSER: Hi\nASSISTANT:",
		"llama3":      "<|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
	}
	msgs := []map[string]any{{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			_, ts := newTestServer(t, Options{ChatTemplate: name, Engine: engine.Options{Parallel: 1, Context: llama.ContextOptions{ContextSize: 256}}})
			code, out := callJSON(t, "POST", ts.URL+"/apply-template", map[string]any{"messages": msgs})
			require.Equal(t, 200, code, "%v", out)
			prompt, _ := out["prompt"].(string)
			assert.Contains(t, prompt, "Hi")
			if w, ok := want[name]; ok {
				assert.Equal(t, w, prompt)
			}
			code, out = callJSON(t, "POST", ts.URL+"/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 2})
			require.Equal(t, 200, code, "%v", out)
			assert.Len(t, out["choices"], 1)
		})
	}
}

type nopWarn struct{ n int }

func (w *nopWarn) Warn(string, ...any) { w.n++ }

func TestRendererFor(t *testing.T) {
	user := []chat.Message{{Role: chat.RoleUser, Content: "Hi"}}
	t.Run("jinja kept for names that have it", func(t *testing.T) {
		r, err := templates(false).For("llama2")
		require.NoError(t, err)
		assert.False(t, chat.IsNative(r))
	})
	t.Run("built-in rendering for the others", func(t *testing.T) {
		r, err := templates(false).For("llama4")
		require.NoError(t, err)
		require.True(t, chat.IsNative(r))
		assert.Equal(t, chat.FormatContentOnly, r.Format())
		assert.Equal(t, "llama4", r.Source())
		parts := []chat.Message{{Role: chat.RoleUser, Parts: []chat.ContentPart{{Type: "text", Text: "a"}, {Type: "text", Text: "b"}}}}
		out, err := r.Render(chat.TemplateInput{Messages: parts})
		require.NoError(t, err)
		assert.Equal(t, "<|header_start|>user<|header_end|>\n\nab<|eot|>", out)
	})
	t.Run("unknown names and bad Jinja", func(t *testing.T) {
		for _, s := range []string{"no-such-template", "{% if %}", ""} {
			_, err := templates(false).For(s)
			assert.Error(t, err, s)
		}
	})
	t.Run("with jinja, text without tags is a template of itself", func(t *testing.T) {
		r, err := templates(true).For("This is not a chat template, it is")
		require.NoError(t, err)
		out, err := r.Render(chat.TemplateInput{Messages: user, AddGenerationPrompt: true})
		require.NoError(t, err)
		assert.Equal(t, "This is not a chat template, it is", out)
		require.NoError(t, templates(true).Check("This is not a chat template, it is"))
		require.Error(t, templates(false).Check("This is not a chat template, it is"))
	})
	t.Run("model template that does not parse", func(t *testing.T) {
		w := &nopWarn{}
		// llama.cpp detects chatml from <|im_start|> in the source.
		r, err := templates(false).ForModel("{% if %}<|im_start|>", w.Warn)
		require.NoError(t, err)
		require.True(t, chat.IsNative(r))
		out, err := r.Render(chat.TemplateInput{Messages: user, AddGenerationPrompt: true})
		require.NoError(t, err)
		assert.Equal(t, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", out)
		// Nothing to detect: chatml (Jinja).
		r, err = templates(false).ForModel("{% if %}", w.Warn)
		require.NoError(t, err)
		require.False(t, chat.IsNative(r))
		assert.Equal(t, mustBuiltinJinja(t, "chatml"), r.Source())
		assert.Equal(t, 2, w.n)
		// A template that parses is used as is.
		r, err = templates(false).ForModel("{{ messages[0]['content'] }}", w.Warn)
		require.NoError(t, err)
		out, err = r.Render(chat.TemplateInput{Messages: user})
		require.NoError(t, err)
		assert.Equal(t, "Hi", out)
	})
}

// A built-in (non-Jinja) format has no tool-call format: a chat with
// tools under auto renders as without them and is answered in free text;
// a demanded call is made in the generic JSON format.
func TestBuiltinRendererTools(t *testing.T) {
	inst := testInstance(t)
	r, err := templates(false).For("vicuna-orca")
	require.NoError(t, err)
	bi := &instance{Name: inst.Name, Model: inst.Model, Engine: inst.Engine, Template: r, Server: inst.Server, Opts: inst.Opts}
	tools := []chat.Tool{{Name: "f", Parameters: json.RawMessage(`{"type":"object"}`)}}
	msgs := []chat.Message{{Role: chat.RoleUser, Content: "Hi"}}
	plain, err := bi.prepareChat(&wire.Chat{Messages: msgs, AddGenerationPrompt: true}, &engine.Request{Params: sampling.Defaults()})
	require.NoError(t, err)
	task := &engine.Request{Params: sampling.Defaults()}
	plan, err := bi.prepareChat(&wire.Chat{Messages: msgs, Tools: tools, ToolChoice: chat.ToolChoice{Mode: "auto"}, AddGenerationPrompt: true}, task)
	require.NoError(t, err)
	assert.Equal(t, chat.FormatContentOnly, plan.Parse.Format)
	assert.False(t, plan.Parse.ParseToolCalls)
	assert.Equal(t, plain.Prompt, plan.Prompt)
	assert.Empty(t, task.Params.Grammar)

	task = &engine.Request{Params: sampling.Defaults()}
	plan, err = bi.prepareChat(&wire.Chat{Messages: msgs, Tools: tools, ToolChoice: chat.ToolChoice{Mode: "required"}, AddGenerationPrompt: true}, task)
	require.NoError(t, err)
	assert.Equal(t, chat.FormatGeneric, plan.Parse.Format)
	assert.True(t, strings.HasPrefix(plan.Prompt, "SYSTEM: You can call any of the following tools"), plan.Prompt)
	assert.True(t, strings.HasSuffix(plan.Prompt, plain.Prompt), plan.Prompt)
	assert.NotEmpty(t, task.Params.Grammar)
}

// mustBuiltinJinja is chat.BuiltinJinja(name), which must exist.
func mustBuiltinJinja(t *testing.T, name string) string {
	t.Helper()
	src, ok := chat.BuiltinJinja(name)
	require.True(t, ok, name)
	return src
}
