package llama

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/llama/internal/gguf"
)

// TestCheckGGUFBounds writes metadata-only GGUFs with the hyperparameters
// llama.cpp's loader asserts on (aborting the process) and requires the
// Go-side check to refuse exactly those, and to leave overridden keys and
// vocabulary-only loads to llama.cpp.
func TestCheckGGUFBounds(t *testing.T) {
	cases := []struct {
		name    string
		kv      map[string]any
		want    string // "" when accepted
		over    map[string]any
		hparams bool
	}{
		{"sound", map[string]any{"m.block_count": uint32(18)}, "", nil, true},
		{"no block count (llama.cpp's own error)", map[string]any{}, "", nil, true},
		{"block count as another type (llama.cpp's own error)", map[string]any{"m.block_count": "x"}, "", nil, true},
		{"zero layers", map[string]any{"m.block_count": uint32(0)}, "block_count is 0", nil, true},
		{"513 layers", map[string]any{"m.block_count": uint32(513)}, "must be 1 to 512", nil, true},
		{"513 layers, vocabulary only", map[string]any{"m.block_count": uint32(513)}, "", nil, false},
		{"513 layers, overridden", map[string]any{"m.block_count": uint32(513)}, "", map[string]any{"m.block_count": 4}, true},
		{"nextn above layers", map[string]any{"m.block_count": uint32(4), "m.nextn_predict_layers": uint32(5)}, "nextn_predict_layers", nil, true},
		{"too many experts", map[string]any{"m.block_count": uint32(4), "m.expert_count": uint32(1025), "m.expert_used_count": uint32(2)}, "expert_count is 1025", nil, true},
		{"more used than experts", map[string]any{"m.block_count": uint32(4), "m.expert_count": uint32(4), "m.expert_used_count": uint32(8)}, "exceeds expert_count", nil, true},
		{"per-layer used above experts", map[string]any{"m.block_count": uint32(2), "m.expert_count": uint32(4), "m.expert_used_count": []int32{2, 9}}, "exceeds expert_count", nil, true},
		{"experts with none used", map[string]any{"m.block_count": uint32(4), "m.expert_count": uint32(4)}, "expert_used_count is 0", nil, true},
		{"used without experts", map[string]any{"m.block_count": uint32(4), "m.expert_used_count": uint32(2)}, "exceeds expert_count 0", nil, true},
		{"groups without experts", map[string]any{"m.block_count": uint32(4), "m.expert_group_count": uint32(2)}, "without experts", nil, true},
		{"groups not dividing", map[string]any{"m.block_count": uint32(4), "m.expert_count": uint32(8), "m.expert_used_count": uint32(2),
			"m.expert_group_count": uint32(3), "m.expert_group_used_count": uint32(1)}, "do not fit", nil, true},
		{"sound groups", map[string]any{"m.block_count": uint32(4), "m.expert_count": uint32(8), "m.expert_used_count": uint32(2),
			"m.expert_group_count": uint32(4), "m.expert_group_used_count": uint32(2)}, "", nil, true},
		{"unknown rope scaling", map[string]any{"m.block_count": uint32(4), "m.rope.scaling.type": "wobbly"}, "rope.scaling.type", nil, true},
		{"yarn rope scaling", map[string]any{"m.block_count": uint32(4), "m.rope.scaling.type": "yarn"}, "", nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := gguf.NewWriter()
			w.SetKV("general.architecture", "m")
			for k, v := range c.kv {
				w.SetKV(k, v)
			}
			p := filepath.Join(t.TempDir(), "m.gguf")
			require.NoError(t, w.WriteFile(p))
			err := checkGGUF(p, c.over, c.hparams)
			if c.want == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, c.want)
			}
		})
	}
	// A file that is not GGUF at all is refused with the reader's reason.
	p := filepath.Join(t.TempDir(), "x.gguf")
	require.NoError(t, os.WriteFile(p, []byte("not a model"), 0o644))
	require.ErrorContains(t, checkGGUF(p, nil, true), "bad magic")
}
