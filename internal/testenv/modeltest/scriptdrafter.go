package modeltest

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
)

// ScriptDrafter drafts the continuation Plain that a plain run generated
// after Prompt, at most N tokens (0: 5) at a time, with one token of each
// draft wrong (none in one draft out of six): drafts are kept whole, in
// part and not at all. After another prompt it drafts nothing.
type ScriptDrafter struct {
	Prompt, Plain []llama.Token
	N             int
}

// Draft implements llama.Drafter.
func (d *ScriptDrafter) Draft(_ context.Context, history []llama.Token, n int) ([]llama.Token, error) {
	g := len(history) - len(d.Prompt)
	if g < 0 || g >= len(d.Plain) || !slices.Equal(history[:len(d.Prompt)], d.Prompt) {
		return nil, nil
	}
	k := d.N
	if k <= 0 {
		k = 5
	}
	out := slices.Clone(d.Plain[g:min(len(d.Plain), g+min(n, k))])
	if i := g % 6; i < len(out) {
		out[i]++
	}
	return out, nil
}

// Accepted implements llama.Drafter.
func (d *ScriptDrafter) Accepted(int) {}

// TinyQwen35Path writes a tiny random model of Qwen3.5's hybrid layout
// (recurrent and attention layers, llama's SPM vocabulary), with o's
// NextN (an MTP block) and PassThrough (layers that pass their input on:
// its head drafts what it says) and the rest set here.
func TinyQwen35Path(t testing.TB, o gguf.TinyModelOptions) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "qwen35.gguf")
	o.Arch, o.NLayer, o.Seed = "qwen35", 4, 7
	o.VocabFrom = testenv.Model(t, filepath.Join("vocab", "ggml-vocab-llama-spm.gguf"))
	require.NoError(t, gguf.WriteTinyModel(path, o))
	return path
}
