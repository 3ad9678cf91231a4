package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/x/llama"
	"github.com/x/llama/engine"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/chat"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
)

// writeModelWithTemplates copies stories260K with a main chat template and
// a "tool_use" one added to its metadata.
func writeModelWithTemplates(t *testing.T, main, toolUse string) string {
	src := testenv.Model(t, "stories260K.gguf")
	f, err := gguf.Open(src)
	require.NoError(t, err)
	r, err := os.Open(src)
	require.NoError(t, err)
	defer r.Close()
	w := gguf.NewWriter()
	w.CopyKV(f, nil)
	w.SetKV("tokenizer.chat_template", main)
	w.SetKV("tokenizer.chat_template.tool_use", toolUse)
	for _, ti := range f.Tensors {
		data, err := f.TensorData(r, ti.Name)
		require.NoError(t, err)
		require.NoError(t, w.AddTensor(ti.Name, ti.Shape, ti.Type, data))
	}
	p := filepath.Join(t.TempDir(), "with-templates.gguf")
	require.NoError(t, w.WriteFile(p))
	return p
}

// TestToolUseTemplate: a model's "tool_use" template renders prompts that
// offer tools, its main template the others, as in llama.cpp; a template
// given in the options replaces both.
func TestToolUseTemplate(t *testing.T) {
	path := writeModelWithTemplates(t,
		`{% for m in messages %}MAIN {{ m.content }}{% endfor %}`,
		`{% for t in tools %}TOOL {{ t.function.name }} {% endfor %}{% for m in messages %}USER {{ m.content }}{% endfor %}`)
	tools := []chat.Tool{{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object"}`)}}
	msgs := []chat.Message{{Role: "user", Content: "hi"}}

	s, _ := newTestServer(t, Options{Model: path, Engine: engine.Options{Context: llama.ContextOptions{ContextSize: 512}}})
	inst := defaultInstance(t, s)
	require.NotNil(t, inst.ToolTemplate)
	out, err := inst.renderChat(msgs, nil, false, nil)
	require.NoError(t, err)
	assert.Equal(t, "MAIN hi", out)
	out, err = inst.renderChat(msgs, tools, false, nil)
	require.NoError(t, err)
	assert.Equal(t, "TOOL get_weather USER hi", out)

	s2, _ := newTestServer(t, Options{Model: path, ChatTemplate: "chatml", Engine: engine.Options{Context: llama.ContextOptions{ContextSize: 512}}})
	inst2 := defaultInstance(t, s2)
	assert.Nil(t, inst2.ToolTemplate, "a template in the options replaces the model's both")
	out, err = inst2.renderChat(msgs, tools, false, nil)
	require.NoError(t, err)
	assert.Contains(t, out, "<|im_start|>user\nhi")
}
