package llama

import (
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/gguf"
)

// writeCvec writes a control vector file: tensors maps names to values
// (1-D F32 unless shapes or f16 say otherwise).
func writeCvec(t *testing.T, tensors map[string][]float32, f16 bool) string {
	t.Helper()
	w := gguf.NewWriter()
	w.SetKV("general.architecture", "controlvector")
	w.SetKV("controlvector.model_hint", "llama")
	w.SetKV("controlvector.layer_count", uint32(len(tensors)))
	for _, name := range slices.Sorted(maps.Keys(tensors)) {
		v := tensors[name]
		if f16 {
			require.NoError(t, w.AddTensor(name, []uint64{uint64(len(v))}, gguf.F16, make([]byte, 2*len(v))))
			continue
		}
		require.NoError(t, w.AddTensorF32(name, []uint64{uint64(len(v))}, v))
	}
	p := filepath.Join(t.TempDir(), "cvec.gguf")
	require.NoError(t, w.WriteFile(p))
	return p
}

// TestLoadControlVectors checks the reading of control vector files: the
// scaled sum per layer from layer 1, and every malformed file an error.
func TestLoadControlVectors(t *testing.T) {
	a := writeCvec(t, map[string][]float32{"direction.1": {1, 2}, "direction.3": {3, 4}}, false)
	b := writeCvec(t, map[string][]float32{"direction.2": {10, 20}}, false)
	for _, tc := range []struct {
		name  string
		files []ControlVectorFile
		want  []float32
		err   string
	}{
		{name: "one file, scale 1", files: []ControlVectorFile{{a, 1}}, want: []float32{1, 2, 0, 0, 3, 4}},
		{name: "scaled and summed", files: []ControlVectorFile{{a, 2}, {b, 0.5}, {a, -1}}, want: []float32{1, 2, 5, 10, 3, 4}},
		{name: "scale 0", files: []ControlVectorFile{{b, 0}}, want: []float32{0, 0, 0, 0}},
		{name: "no files", err: "no files"},
		{name: "missing file", files: []ControlVectorFile{{filepath.Join(t.TempDir(), "none.gguf"), 1}}, err: "no such file"},
		{name: "not GGUF", files: []ControlVectorFile{{"controlvector.go", 1}}, err: "invalid"},
		{name: "layer 0", files: []ControlVectorFile{{writeCvec(t, map[string][]float32{"direction.0": {1, 2}}, false), 1}}, err: "layers start at 1"},
		{name: "other tensor", files: []ControlVectorFile{{writeCvec(t, map[string][]float32{"output.weight": {1, 2}}, false), 1}}, err: "not direction"},
		{name: "not F32", files: []ControlVectorFile{{writeCvec(t, map[string][]float32{"direction.1": {1, 2}}, true), 1}}, err: "F32"},
		{name: "sizes differ in a file", files: []ControlVectorFile{{writeCvec(t, map[string][]float32{"direction.1": {1, 2}, "direction.2": {1, 2, 3}}, false), 1}}, err: "not 2"},
		{name: "sizes differ between files", files: []ControlVectorFile{{a, 1}, {writeCvec(t, map[string][]float32{"direction.1": {1, 2, 3}}, false), 1}}, err: "not 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, nEmbd, err := LoadControlVectors(tc.files...)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, 2, nEmbd)
			assert.Equal(t, tc.want, data)
		})
	}
}
