package llama

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"

	"github.com/x/llama/internal/gguf"
)

// layerWeights are a model's weights as llama.cpp places them by layer:
// the repeating layers', the output layer's (which goes to a GPU first)
// and the input layer's (which stays on the CPU).
type layerWeights struct {
	layers  []uint64 // each layer's weights, its experts included
	experts []uint64 // each layer's MoE experts (expertsPattern)
	output  uint64
}

// expertsPattern matches the MoE experts' tensors of a layer, as
// llama.cpp's --cpu-moe and --fit name them.
var expertsPattern = regexp.MustCompile(`\.ffn_(up|down|gate|gate_up)_(ch|)exps`)

// layerZeroTensors are tensors named outside the blk. ones that llama.cpp
// places with the first layer (Gemma 4's per-layer projection; RoPE
// factors, which go with the first layer using them: a few KB).
var layerZeroTensors = map[string]bool{
	"per_layer_model_proj.weight": true, "per_layer_proj_norm.weight": true, "rope_freqs.weight": true,
}

// weightsOf sums the tensors of files (a model's splits, read with their
// descriptors) by layer. An output layer tied to the token embeddings
// (no output.weight) gets a copy of them, as llama.cpp makes one.
func weightsOf(files []*gguf.File, nLayer int) (layerWeights, error) {
	w := layerWeights{layers: make([]uint64, nLayer), experts: make([]uint64, nLayer)}
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
					if expertsPattern.MatchString(name) {
						w.experts[i] += n
					}
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
			case layerZeroTensors[name] && nLayer > 0:
				w.layers[0] += n
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
// bytes; len(w.layers)+1 when all do. dense counts the layers without
// their experts.
func fitLayers(w layerWeights, kv []uint64, budget uint64, dense bool) int {
	n := len(w.layers)
	need := w.output
	if need > budget {
		return 0
	}
	for k := 1; k <= n; k++ {
		i := n - k
		need += w.layers[i]
		if dense && i < len(w.experts) {
			need -= w.experts[i]
		}
		if i < len(kv) {
			need += kv[i]
		}
		if need > budget {
			return k
		}
	}
	return n + 1
}

// layerPlan is where a fitted model's weights go: n_gpu_layers, and the
// layers (from cpuExperts on) whose MoE experts stay on the CPU.
type layerPlan struct {
	ngl, cpuExperts int
}

// planFit fits a model to budget bytes of GPU memory as llama-server's
// --fit does on one device. A dense model offloads the most layers that
// fit (fitLayers). A mixture of experts first offloads the layers' dense
// parts, their experts on the CPU, from the last layer down; when every
// dense part fits, the experts go to the GPU too, from the first layer up,
// while they fit. ok is false when everything fits.
func planFit(w layerWeights, kv []uint64, budget uint64) (p layerPlan, ok bool) {
	n := len(w.layers)
	if fitLayers(w, kv, budget, false) > n {
		return layerPlan{}, false
	}
	var experts uint64
	for _, e := range w.experts {
		experts += e
	}
	if experts == 0 {
		return layerPlan{ngl: fitLayers(w, kv, budget, false), cpuExperts: n}, true
	}
	if k := fitLayers(w, kv, budget, true); k <= n {
		return layerPlan{ngl: k, cpuExperts: 0}, true
	}
	need := w.output
	for i := range n {
		need += w.layers[i] - w.experts[i]
		if i < len(kv) {
			need += kv[i]
		}
	}
	f := 0
	for f < n && need+w.experts[f] <= budget {
		need += w.experts[f]
		f++
	}
	return layerPlan{ngl: n + 1, cpuExperts: f}, true
}

// overrides are the buffer overrides that keep the experts of layers
// cpuExperts to n-1 on the CPU.
func (p layerPlan) overrides(n int) []TensorBufferOverride {
	var out []TensorBufferOverride
	for i := p.cpuExperts; i < n; i++ {
		out = append(out, TensorBufferOverride{Pattern: fmt.Sprintf(`blk\.%d%s`, i, expertsPattern), BufferType: "CPU"})
	}
	return out
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
func planLayers(paths []string, opts ModelOptions, gpuNames []string, pinned bool) (int32, []TensorBufferOverride, bool) {
	if opts.GPULayers != 0 || opts.CPUOnly || opts.VocabOnly || opts.Fit.Off || opts.Split != SplitLayer ||
		len(opts.TensorSplit) > 0 || len(opts.TensorBufferOverrides) > 0 || len(opts.RPCServers) > 0 {
		return 0, nil, false
	}
	devs, err := Devices()
	if err != nil {
		return 0, nil, false
	}
	margin := opts.Fit.margin()
	var budget uint64
	targets := offloadTargets(devs, gpuNames, pinned)
	gpus := len(targets)
	for _, d := range targets {
		if d.FreeMemory > margin {
			budget += d.FreeMemory - margin
		}
	}
	if gpus == 0 {
		return 0, nil, false
	}
	files, err := readSplits(paths)
	if err != nil {
		return 0, nil, false
	}
	f := files[0]
	arch := f.Architecture()
	nLayer, _ := f.Int(arch + ".block_count")
	if nLayer <= 0 || nLayer > maxLayers {
		return 0, nil, false
	}
	w, err := weightsOf(files, nLayer)
	if err != nil {
		return 0, nil, false
	}
	info := modelInfoForFit{layers: nLayer}
	info.nEmbd, _ = f.Int(arch + ".embedding_length")
	info.nSwa, _ = f.Int(arch + ".attention.sliding_window")
	_, ssm := f.Get(arch + ".ssm.conv_kernel")
	_, heads := f.Get(arch + ".attention.head_count")
	_, interval := f.Get(arch + ".full_attention_interval")
	info.recurrent = ssm && !heads
	info.hybrid = ssm && heads || interval
	ctx := opts.Fit.minContext()
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
	plan, ok := planFit(w, kv, budget)
	if !ok {
		return 0, nil, false
	}
	if l := logger.Load(); l != nil {
		what := fmt.Sprintf("offloading %d of %d layers", plan.ngl, nLayer+1)
		if plan.cpuExperts < nLayer {
			what += fmt.Sprintf(", the MoE experts of layers %d to %d on the CPU,", plan.cpuExperts, nLayer-1)
		}
		l.Log(context.Background(), slog.LevelWarn, fmt.Sprintf(
			"%s to fit the GPUs' free memory (%d MiB, less %d MiB on each and a %d-token KV cache); -ngl and -ot set them, --fit off offloads all",
			what, (budget+uint64(gpus)*margin)>>20, margin>>20, ctx), "source", "llama")
	}
	return int32(plan.ngl), plan.overrides(nLayer), true
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
		f, err := gguf.Open(p)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}
