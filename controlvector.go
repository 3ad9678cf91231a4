package llama

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/x/llama/internal/gguf"
)

// ControlVectorFile is a control vector GGUF file and the strength its
// directions are applied with.
type ControlVectorFile struct {
	Path  string
	Scale float32
}

// LoadControlVectors reads control vector files, as llama.cpp's
// --control-vector and --control-vector-scaled do, and sums them, each
// direction multiplied by its file's Scale. A file holds 1-D F32 tensors
// named direction.N, one per layer N >= 1, all of the same length (the
// model's embedding size); several tensors for one layer add up. The
// result is what Context.SetControlVector takes: nEmbd floats per layer
// from layer 1 up to the highest layer any file has, zero where a file
// has no direction. Every file must be valid and all of one embedding
// size; unlike llama.cpp, which skips a bad file with a warning, any
// problem is an error.
func LoadControlVectors(files ...ControlVectorFile) (data []float32, nEmbd int, err error) {
	if len(files) == 0 {
		return nil, 0, errorf(CodeInvalid, "control vector", "no files")
	}
	for _, f := range files {
		n, err := addControlVector(&data, nEmbd, f)
		if err != nil {
			return nil, 0, errorf(CodeInvalid, "control vector", "%s: %v", f.Path, err)
		}
		nEmbd = n
	}
	return data, nEmbd, nil
}

// addControlVector adds one file's scaled directions to *data, whose
// layers are nEmbd long (0: not known yet), and returns the file's nEmbd.
func addControlVector(data *[]float32, nEmbd int, f ControlVectorFile) (int, error) {
	fh, err := os.Open(f.Path)
	if err != nil {
		return 0, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return 0, err
	}
	g, err := gguf.Read(fh, st.Size())
	if err != nil {
		return 0, err
	}
	if len(g.Tensors) == 0 {
		return 0, fmt.Errorf("no direction tensors")
	}
	for _, t := range g.Tensors {
		shape := t.Shape
		for len(shape) > 1 && shape[len(shape)-1] == 1 {
			shape = shape[:len(shape)-1] // ggml counts the dimensions up to the last one above 1
		}
		prefix, num, _ := strings.Cut(t.Name, ".")
		layer, err := strconv.Atoi(num)
		switch {
		case prefix != "direction" || err != nil || layer < 0:
			return 0, fmt.Errorf("tensor %q is not direction.<layer>", t.Name)
		case layer == 0:
			return 0, fmt.Errorf("tensor %q: layers start at 1", t.Name)
		case t.Type != gguf.F32 || len(shape) != 1:
			return 0, fmt.Errorf("tensor %q is not a 1-D F32 tensor", t.Name)
		case nEmbd == 0:
			nEmbd = int(shape[0])
		case int(shape[0]) != nEmbd:
			return 0, fmt.Errorf("tensor %q has %d values, not %d as the others", t.Name, shape[0], nEmbd)
		}
		if nEmbd == 0 || layer > 1<<16 {
			return 0, fmt.Errorf("tensor %q: %d values for layer %d", t.Name, nEmbd, layer)
		}
		v, err := g.TensorF32(fh, t.Name)
		if err != nil {
			return 0, err
		}
		if need := layer * nEmbd; len(*data) < need {
			*data = append(*data, make([]float32, need-len(*data))...)
		}
		dst := (*data)[(layer-1)*nEmbd : layer*nEmbd]
		for i, x := range v {
			dst[i] += x * f.Scale
		}
	}
	return nEmbd, nil
}
