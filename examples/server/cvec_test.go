package main

import (
	"context"
	"io"
	"math"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/server"
)

// writeControlVector writes a control vector for model with a direction
// for each of layers (values of magnitude amp).
func writeControlVector(t *testing.T, model string, amp float32, layers ...int) string {
	t.Helper()
	f, err := gguf.Open(model)
	require.NoError(t, err)
	nEmbd, ok := f.Int(f.Architecture() + ".embedding_length")
	require.True(t, ok)
	w := gguf.NewWriter()
	w.SetKV("general.architecture", "controlvector")
	w.SetKV("controlvector.model_hint", f.Architecture())
	w.SetKV("controlvector.layer_count", uint32(len(layers)))
	for _, l := range layers {
		v := make([]float32, nEmbd)
		for i := range v {
			v[i] = amp * float32(math.Sin(float64(i*7+l)))
		}
		require.NoError(t, w.AddTensorF32("direction."+strconv.Itoa(l), []uint64{uint64(nEmbd)}, v))
	}
	p := filepath.Join(t.TempDir(), "cvec.gguf")
	require.NoError(t, w.WriteFile(p))
	return p
}

// greedy starts a server from args (after -m model) and returns its
// greedy completion of a prompt.
func greedy(t *testing.T, model string, args ...string) (string, error) {
	t.Helper()
	c, err := parseFlags(append([]string{"-m", model, "-c", "256", "-np", "1", "-t", "1", "-tb", "1"}, args...), noEnv, io.Discard)
	require.NoError(t, err)
	srv, err := server.New(context.Background(), c.opts)
	if err != nil {
		return "", err
	}
	defer srv.Close()
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/completion", strings.NewReader(`{"prompt":"Once upon a time","n_predict":24,"temperature":0}`)))
	require.Equal(t, 200, rec.Code, rec.Body.String())
	var r struct {
		Content string `json:"content"`
	}
	require.NoError(t, jsonDecode(rec.Body, &r))
	return r.Content, nil
}

// TestControlVectors checks --control-vector, --control-vector-scaled and
// --control-vector-layer-range on stories260K: a control vector changes
// the greedy output; scale 0, or a range without the vector's layers,
// leaves it as without one; two halves sum to the whole; bad files stop
// the start.
func TestControlVectors(t *testing.T) {
	model := testenv.Model(t, "stories260K.gguf")
	cv := writeControlVector(t, model, 2, 1, 2, 3, 4)
	cv1 := writeControlVector(t, model, 2, 1)
	none, err := greedy(t, model)
	require.NoError(t, err)
	full, err := greedy(t, model, "--control-vector", cv)
	require.NoError(t, err)
	assert.NotEqual(t, none, full, "a control vector steers the output")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"scale 0", []string{"--control-vector-scaled", cv + ":0"}, none},
		{"halves sum to the whole", []string{"--control-vector-scaled", cv + ":0.5," + cv + ":0.5"}, full},
		{"both flags sum", []string{"--control-vector", cv, "--control-vector-scaled", cv + ":0"}, full},
		{"explicit full range", []string{"--control-vector", cv, "--control-vector-layer-range", "1", "99"}, full},
		{"range without its layers", []string{"--control-vector", cv1, "--control-vector-layer-range", "2", "4"}, none},
		{"a vector and its opposite", []string{"--control-vector-scaled", cv + ":1," + cv + ":-1"}, none},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := greedy(t, model, tc.args...)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	// One layer in range does steer.
	got, err := greedy(t, model, "--control-vector", cv1, "--control-vector-layer-range", "1", "1")
	require.NoError(t, err)
	assert.NotEqual(t, none, got, "layer 1's direction in range")

	other := filepath.Join(t.TempDir(), "wide.gguf")
	w := gguf.NewWriter()
	w.SetKV("general.architecture", "controlvector")
	require.NoError(t, w.AddTensorF32("direction.1", []uint64{3}, []float32{1, 2, 3}))
	require.NoError(t, w.WriteFile(other))
	for _, tc := range []struct{ name, file, want string }{
		{"missing file", filepath.Join(t.TempDir(), "none.gguf"), "no such file"},
		{"not a GGUF", "cvec_test.go", "invalid"},
		{"other embedding size", other, "directions of 3 values"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := greedy(t, model, "--control-vector", tc.file)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
