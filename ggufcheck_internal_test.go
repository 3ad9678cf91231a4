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
		{"sliding window used by no layer", map[string]any{"m.block_count": uint32(4), "m.attention.sliding_window": uint32(64),
			"m.attention.sliding_window_pattern": uint32(1)}, "no layer uses it", nil, true},
		{"pattern of 1 without a window", map[string]any{"m.block_count": uint32(4), "m.attention.sliding_window_pattern": uint32(1)}, "", nil, true},
		{"pattern of 1, window overridden", map[string]any{"m.block_count": uint32(4), "m.attention.sliding_window": uint32(64),
			"m.attention.sliding_window_pattern": uint32(1)}, "", map[string]any{"m.attention.sliding_window": 0}, true},
		{"gemma2: window always on", map[string]any{"general.architecture": "gemma2", "gemma2.block_count": uint32(4),
			"gemma2.attention.sliding_window_pattern": uint32(1)}, "no layer uses it", nil, true},
		{"gemma4: no flag set", map[string]any{"general.architecture": "gemma4", "gemma4.block_count": uint32(3),
			"gemma4.attention.sliding_window_pattern": []bool{false, false, false}}, "no layer uses it", nil, true},
		{"gemma4: shared layers as Gemma 4 E2B", map[string]any{"general.architecture": "gemma4", "gemma4.block_count": uint32(9),
			"gemma4.attention.sliding_window_pattern": []bool{true, true, false, true, true, false, true, true, false},
			"gemma4.attention.shared_kv_layers":       uint32(3)}, "", nil, true},
		{"gemma4: shared layer over another kind", map[string]any{"general.architecture": "gemma4", "gemma4.block_count": uint32(9),
			"gemma4.attention.sliding_window_pattern": []bool{true, true, false, true, true, false, true, true, false},
			"gemma4.attention.shared_kv_layers":       uint32(4)}, "not of its kind", nil, true},
		{"gemma4: one layer with a cache", map[string]any{"general.architecture": "gemma4", "gemma4.block_count": uint32(3),
			"gemma4.attention.sliding_window_pattern": []bool{true, true, false}, "gemma4.attention.shared_kv_layers": uint32(2)}, "at least 2", nil, true},
		{"gemma4: more shared layers than layers", map[string]any{"general.architecture": "gemma4", "gemma4.block_count": uint32(3),
			"gemma4.attention.sliding_window_pattern": []bool{true, true, false}, "gemma4.attention.shared_kv_layers": uint32(7)}, "at least 2", nil, true},
		{"gemma3n: period moving layer 19", map[string]any{"general.architecture": "gemma3n", "gemma3n.block_count": uint32(30),
			"gemma3n.attention.sliding_window_pattern": uint32(3)}, "not of its kind", nil, true},
		{"gemma3n: default period", map[string]any{"general.architecture": "gemma3n", "gemma3n.block_count": uint32(30)}, "", nil, true},
		{"unknown rope scaling", map[string]any{"m.block_count": uint32(4), "m.rope.scaling.type": "wobbly"}, "rope.scaling.type", nil, true},
		{"yarn rope scaling", map[string]any{"m.block_count": uint32(4), "m.rope.scaling.type": "yarn"}, "", nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := gguf.NewWriter()
			w.SetKV("general.architecture", "m")
			for k, v := range c.kv { // may set another architecture
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
