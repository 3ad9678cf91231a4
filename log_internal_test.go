package llama

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

// TestLlamaSaid picks the reason out of the error lines llama.cpp logged
// since a mark, and says what to do when a buffer could not be allocated.
func TestLlamaSaid(t *testing.T) {
	for _, tt := range []struct {
		name  string
		lines []string
		want  string
		hint  bool
	}{
		{"a model that does not fit", []string{
			"ggml_backend_cuda_buffer_type_alloc_buffer: allocating 30000.00 MiB on device 0: cudaMalloc failed: out of memory\n",
			"alloc_tensor_range: failed to allocate CUDA0 buffer of size 31457280000\n",
			"llama_model_load: error loading model: unable to allocate CUDA0 buffer\n",
			"llama_model_load_from_file_impl: failed to load model\n",
		}, "unable to allocate CUDA0 buffer", true},
		{"a model that does not fit in RAM", []string{"llama_model_load: error loading model: unable to allocate CPU buffer\n"},
			"unable to allocate CPU buffer", true},
		{"a context that does not fit", []string{
			"llama_kv_cache: failed to allocate buffer for kv cache\n",
			"llama_init_from_model: failed to initialize the context: failed to allocate buffer for kv cache\n",
		}, "failed to allocate buffer for kv cache", true},
		{"a bare function prefix is dropped", []string{"llama_init_from_model: quantized V cache requires flash_attn to be enabled\n"},
			"quantized V cache requires flash_attn to be enabled", false},
		{"only the closing line", []string{"llama_model_load_from_file_impl: failed to load model\n"}, "", false},
		{"nothing", nil, "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			noteLogError("an older error, before the mark\n")
			mark := logErrorMark()
			for _, l := range tt.lines {
				noteLogError(l)
			}
			got := llamaSaid(mark)
			assert.Equal(t, tt.want, got)
			hint := allocHint(got, "do this")
			assert.Equal(t, tt.hint, hint != "")
			assert.Equal(t, tt.hint && !strings.Contains(got, "CPU"), strings.HasSuffix(hint, "do this"), "GPU advice only off the CPU")
		})
	}

	// More lines than the ring keeps: the newest are read.
	mark := logErrorMark()
	for i := range 20 {
		noteLogError(fmt.Sprintf("f: line %d", i))
	}
	noteLogError("llama_model_load: error loading model: the last reason")
	assert.Equal(t, "the last reason", llamaSaid(mark))

	// A long line is cut, on a character.
	mark = logErrorMark()
	noteLogError("llama_model_load: error loading model: key not found: " + strings.Repeat("é", 1000))
	said := llamaSaid(mark)
	assert.LessOrEqual(t, len(said), maxLogErrorLine)
	assert.True(t, utf8.ValidString(said))
	assert.True(t, strings.HasSuffix(said, "é…"), said[len(said)-10:])
	assert.Equal(t, "", llamaSaid(logErrorMark()))
}
