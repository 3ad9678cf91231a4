package llama

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/x/llama/internal/gguf"
)

// layerWeights are a model's weights as llama.cpp places them by layer:
// the repeating layers', the output layer's (which goes to a GPU first)
// and the input layer's (which stays on the CPU).
type layerWeights struct {
	layers []uint64
	output uint64
}

// weightsOf sums the tensors of files (a model's splits, read with their
// descriptors) by layer. An output layer tied to the token embeddings
// (no output.weight) gets a copy of them, as llama.cpp makes one.
func weightsOf(files []*gguf.File, nLayer int) (layerWeights, error) {
	w := layerWeights{layers: make([]uint64, nLayer)}
	var embd uint64
	tied := true
	for _, f := range files {
		for _, t := range f.Tensors {
			n, err := t.Size()
			if err != nil {
				return layerWeights{}, err
			}
			name := t.Name
			switch {
			case strings.HasPrefix(name, "blk."):
				rest := name[len("blk."):]
				i, err := strconv.Atoi(rest[:max(strings.IndexByte(rest, '.'), 0)])
				if err == nil && i >= 0 && i < nLayer {
					w.layers[i] += n
				}
				// Layers past the repeating ones (multi-token prediction)
				// are not loaded by default.
			case strings.HasPrefix(name, "output"):
				w.output += n
				if name == "output.weight" {
					tied = false
				}
			case name == "token_embd.weight":
				embd = n
			}
		}
	}
	if tied {
		w.output += embd
	}
	return w, nil
}

// fitLayers is the most layers (llama_model_params.n_gpu_layers: the
// output layer first, then the repeating ones from the last) whose
// weights, with each offloaded layer's KV cache of kv bytes, fit budget
// bytes; len(w.layers)+1 when all do.
func fitLayers(w layerWeights, kv []uint64, budget uint64) int {
	n := len(w.layers)
	need := w.output
	if need > budget {
		return 0
	}
	for k := 1; k <= n; k++ {
		i := n - k
		need += w.layers[i]
		if i < len(kv) {
			need += kv[i]
		}
		if need > budget {
			return k
		}
	}
	return n + 1
}

// splitName matches the first file of a split model, as llama.cpp names
// splits (name-00001-of-00003.gguf).
var splitName = regexp.MustCompile(`^(.*)-00001-of-(\d{5})\.gguf$`)

// planLayers lowers the layers a model loaded with opts offloads by
// default when, by its tensors' sizes, they would not fit the GPUs: as
// llama-server's --fit, it keeps room on each GPU for the margin and for
// the offloaded layers' KV cache of a context of Fit.MinContext, and
// leaves the rest on the CPU. It returns n_gpu_layers and true when it
// lowered them; only the default layer split over the devices llama.cpp
// picks is planned (no TensorSplit, buffer overrides or RPC workers).
func planLayers(paths []string, opts ModelOptions, gpuNames []string, pinned bool) (int32, bool) {
	if opts.GPULayers != 0 || opts.CPUOnly || opts.VocabOnly || opts.Fit.Off || opts.Split != SplitLayer ||
		len(opts.TensorSplit) > 0 || len(opts.TensorBufferOverrides) > 0 || len(opts.RPCServers) > 0 {
		return 0, false
	}
	devs, err := Devices()
	if err != nil {
		return 0, false
	}
	margin := opts.Fit.Margin
	if margin == 0 {
		margin = defaultFitMargin
	}
	var budget uint64
	gpus := 0
	for _, d := range devs {
		if d.Type != "gpu" && d.Type != "igpu" || pinned && !slices.Contains(gpuNames, d.Name) {
			continue
		}
		gpus++
		if d.FreeMemory > margin {
			budget += d.FreeMemory - margin
		}
	}
	if gpus == 0 {
		return 0, false
	}
	files, err := readSplits(paths)
	if err != nil {
		return 0, false
	}
	f := files[0]
	arch := f.Architecture()
	nLayer, _ := f.Int(arch + ".block_count")
	if nLayer <= 0 || nLayer > maxLayers {
		return 0, false
	}
	w, err := weightsOf(files, nLayer)
	if err != nil {
		return 0, false
	}
	info := modelInfoForFit{layers: nLayer}
	info.nEmbd, _ = f.Int(arch + ".embedding_length")
	info.nSwa, _ = f.Int(arch + ".attention.sliding_window")
	_, ssm := f.Get(arch + ".ssm.conv_kernel")
	_, heads := f.Get(arch + ".attention.head_count")
	_, interval := f.Get(arch + ".full_attention_interval")
	info.recurrent = ssm && !heads
	info.hybrid = ssm && heads || interval
	ctx := opts.Fit.MinContext
	if ctx <= 0 {
		ctx = defaultFitMinCtx
	}
	if train, ok := f.Int(arch + ".context_length"); ok && train > 0 {
		ctx = min(ctx, train)
	}
	kv := make([]uint64, nLayer)
	for i, l := range kvLayers(f, info) {
		cells := ctx
		if l.swa && info.nSwa > 0 {
			cells = min(ctx, (info.nSwa+512+255)/256*256)
		}
		kv[i] = (l.k + l.v) * 2 * uint64(cells) // f16
	}
	k := fitLayers(w, kv, budget)
	if k > nLayer {
		return 0, false
	}
	if l := logger.Load(); l != nil {
		l.Log(context.Background(), slog.LevelWarn, fmt.Sprintf(
			"offloading %d of %d layers to fit the GPUs' free memory (%d MiB, less %d MiB on each and a %d-token KV cache); -ngl sets them, --fit off offloads all",
			k, nLayer+1, (budget+uint64(gpus)*margin)>>20, margin>>20, ctx), "source", "llama")
	}
	return int32(k), true
}

// readSplits reads the tensor descriptors of a model's files: paths, or
// the splits llama.cpp finds beside the first one's path.
func readSplits(paths []string) ([]*gguf.File, error) {
	if len(paths) == 1 {
		if m := splitName.FindStringSubmatch(paths[0]); m != nil {
			n, _ := strconv.Atoi(m[2])
			paths = nil
			for i := 1; i <= n; i++ {
				paths = append(paths, fmt.Sprintf("%s-%05d-of-%s.gguf", m[1], i, m[2]))
			}
		}
	}
	var files []*gguf.File
	for _, p := range paths {
		fh, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		st, err := fh.Stat()
		if err != nil {
			fh.Close()
			return nil, err
		}
		f, err := gguf.Read(fh, st.Size())
		fh.Close()
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}
