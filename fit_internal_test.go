package llama

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFitSize(t *testing.T) {
	// A llama of 32 layers and 8 KV heads of 128: 128 KiB a cell in f16.
	dense := kvShape{fullK: 32 * 1024, fullV: 32 * 1024}
	perCell := uint64(128 << 10)
	// Gemma 3 270M: 3 full-context layers and 15 windowed ones (512).
	gemma := kvShape{fullK: 3 * 256, fullV: 3 * 256, swaK: 15 * 256, swaV: 15 * 256, nSwa: 512}
	one := newKVGeometry(ContextOptions{})
	four := newKVGeometry(ContextOptions{Sequences: 4})
	for _, tt := range []struct {
		name       string
		sh         kvShape
		g          kvGeometry
		train, min int
		share      float64
		host, gpu  uint64
		want       int
	}{
		{"fits on the host", dense, one, 131072, 4096, 0, 131072 * perCell, 0, 131072},
		{"one cell short", dense, one, 131072, 4096, 0, 131072*perCell - 1, 0, 130816},
		{"a quarter of the memory", dense, one, 131072, 4096, 0, 32768 * perCell, 0, 32768},
		{"nothing left: the minimum", dense, one, 131072, 4096, 0, 0, 0, 4096},
		{"a training context below the minimum", dense, one, 2048, 2048, 0, 0, 0, 2048},
		{"four streams share the memory", dense, four, 32768, 4096, 0, 4 * 8192 * perCell, 0, 4 * 8192},
		{"all on the GPU", dense, one, 131072, 4096, 1, 0, 16384 * perCell, 16384},
		{"the GPU's part is what is short", dense, one, 131072, 4096, 0.5, 1 << 40, 8192 * perCell / 2, 8192},
		{"the host's part is what is short", dense, one, 131072, 4096, 0.5, 8192 * perCell / 2, 1 << 40, 8192},
		{"a window does not grow", gemma, one, 32768, 4096, 0, 32768*3*1024 + 1024*15*1024, 0, 32768},
		{"the full layers set the size", gemma, one, 32768, 4096, 0, 16384*3*1024 + 1024*15*1024, 0, 16384},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, fitSize(tt.sh, tt.g, tt.train, tt.min, tt.share, tt.host, tt.gpu))
		})
	}
}

func TestFitLower(t *testing.T) {
	f := ContextFit{Wanted: 131072}
	for _, tt := range []struct {
		name string
		n    int
		opts ContextOptions
		want int
		ok   bool
	}{
		{"halved", 131072, ContextOptions{}, 65536, true},
		{"to a multiple of 256", 10000, ContextOptions{}, 4864, true},
		{"not below the minimum", 6000, ContextOptions{}, 4096, true},
		{"at the minimum", 4096, ContextOptions{}, 4096, false},
		{"a minimum of its own", 4096, ContextOptions{Fit: FitOptions{MinContext: 1024}}, 2048, true},
		{"per sequence", 4 * 8192, ContextOptions{Sequences: 4}, 4 * 4096, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n, ok := f.lower(tt.n, tt.opts)
			assert.Equal(t, tt.want, n)
			assert.Equal(t, tt.ok, ok)
		})
	}
}
