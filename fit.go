package llama

import (
	"bufio"
	"bytes"
	"cmp"
	"os"
	"strconv"
	"strings"

	"github.com/x/llama/internal/capi"
	"github.com/x/llama/internal/gguf"
)

// FitOptions are llama-server's --fit settings. In ModelOptions they
// bound the layers LoadModel offloads by default (see ModelOptions.Fit);
// in ContextOptions, the context NewContext picks when ContextSize is 0:
// the model's training context for each sequence, lowered until the KV
// cache fits the memory it will live in (see Model.FitContext).
type FitOptions struct {
	// Off keeps every layer offloaded, and the training context,
	// whatever the memory.
	Off bool
	// Margin is the memory left free on the host and on each GPU; 0:
	// 1 GiB (llama-server's --fit-target).
	Margin uint64
	// MinContext is the context per sequence the fit goes no lower than,
	// and the one each offloaded layer keeps room for; 0: 4096
	// (llama-server's --fit-ctx), at most the training context.
	MinContext int
}

// ContextFit is what FitContext found.
type ContextFit struct {
	ContextSize int    // the context chosen: tokens over all sequences
	Wanted      int    // the context before fitting: the training context for each sequence
	KVBytes     uint64 // the KV cache's estimated bytes at ContextSize
	Lowered     bool   // ContextSize is below Wanted: the memory it found was short
}

const (
	defaultFitMargin = 1 << 30
	defaultFitMinCtx = 4096
)

// margin is Margin with its default.
func (f FitOptions) margin() uint64 { return cmp.Or(f.Margin, defaultFitMargin) }

// minContext is MinContext with its default.
func (f FitOptions) minContext() int {
	if f.MinContext <= 0 {
		return defaultFitMinCtx
	}
	return f.MinContext
}

// FitContext returns the context NewContext would make of opts with
// ContextSize 0 (it returns opts.ContextSize, fitted to nothing, when that
// is set). The training context goes to each sequence (to the one buffer
// with KVUnified), then the size is lowered, in steps of 256 tokens a
// sequence and not below opts.Fit.MinContext, until the KV cache fits:
// on the GPUs, their free memory less the margin, where the model's
// layers and the cache are offloaded; on the host, the memory available
// to this process (MemAvailable and the cgroup's limit on Linux), less
// the margin and the weights mapped from the file, for the rest.
//
// The cache's size is estimated from the model's metadata: each layer's
// KV heads and widths, the cache types, and for the usual sliding-window
// architectures their window-sized layers (others are counted as
// full-sized, which can only overestimate). The compute buffers are left
// to the margin; when the context still fails to allocate, NewContext
// halves it down to the minimum before giving up.
func (m *Model) FitContext(opts ContextOptions) (ContextFit, error) {
	done, err := m.use("fit context")
	if err != nil {
		return ContextFit{}, err
	}
	defer done()
	return m.fitContext(opts)
}

// fitContext is FitContext for a caller holding m.use.
func (m *Model) fitContext(opts ContextOptions) (ContextFit, error) {
	if opts.ContextSize > 0 {
		return ContextFit{ContextSize: opts.ContextSize, Wanted: opts.ContextSize}, nil
	}
	sh, err := m.kvShape()
	if err != nil {
		return ContextFit{}, err
	}
	g := newKVGeometry(opts)
	train := int(capi.ModelNCtxTrain(m.ptr))
	if train <= 0 {
		train = defaultFitMinCtx
	}
	f := ContextFit{ContextSize: train * g.streams, Wanted: train * g.streams}
	f.KVBytes = sh.bytes(f.ContextSize, g)
	if opts.Fit.Off {
		return f, nil
	}
	host, gpu := m.fitBudget(opts)
	n := fitSize(sh, g, train, min(opts.Fit.minContext(), train), m.gpuShare(opts), host, gpu)
	f.ContextSize, f.Lowered, f.KVBytes = n, n < f.Wanted, sh.bytes(n, g)
	return f, nil
}

// fitSize is the largest context, at most train tokens a stream and at
// least minSeq, in steps of 256, whose KV cache of shape sh under g fits
// host bytes on the host and gpu bytes on the GPUs, share of it there.
func fitSize(sh kvShape, g kvGeometry, train, minSeq int, share float64, host, gpu uint64) int {
	fits := func(seq int) bool {
		kv := sh.bytes(seq*g.streams, g)
		onGPU := uint64(float64(kv) * share)
		return onGPU <= gpu && kv-onGPU <= host
	}
	if fits(train) {
		return train * g.streams
	}
	lo, hi := (minSeq+255)/256, train/256
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if fits(mid * 256) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return min(max(lo*256, minSeq), train) * g.streams
}

// lower halves a context of n tokens that failed to allocate, per
// sequence and to a multiple of 256, not below the fit's minimum; ok is
// false when n is at the minimum already.
func (f ContextFit) lower(n int, opts ContextOptions) (int, bool) {
	streams := newKVGeometry(opts).streams
	minSeq := min(opts.Fit.minContext(), f.Wanted/streams)
	seq := max(n/streams/2/256*256, minSeq)
	if seq*streams >= n {
		return n, false
	}
	return seq * streams, true
}

// kvGeometry is how a context lays out its cache: streams (one per
// sequence, or one shared), sequences and the micro-batch, which sizes a
// sliding window's cache.
type kvGeometry struct {
	streams, seqs, ubatch int
	unified, swaFull      bool
	typeK, typeV          string
}

func newKVGeometry(opts ContextOptions) kvGeometry {
	g := kvGeometry{seqs: max(opts.Sequences, 1), unified: opts.KVUnified, swaFull: opts.SWAFull,
		typeK: opts.TypeK, typeV: opts.TypeV}
	g.streams = g.seqs
	if g.unified {
		g.streams = 1
	}
	batch := opts.BatchSize
	if batch <= 0 {
		batch = 2048
	}
	g.ubatch = opts.UBatchSize
	if g.ubatch <= 0 {
		g.ubatch = 512
	}
	g.ubatch = min(g.ubatch, batch)
	return g
}

// kvShape is a model's KV cache per cell: the K and V elements of its
// full-context layers and of its sliding-window layers (window nSwa).
type kvShape struct {
	fullK, fullV, swaK, swaV uint64
	nSwa                     int
}

// bytes estimates the KV cache of a context of n tokens under g, as
// llama.cpp sizes it: n padded to 256, split over the streams (each
// padded again), and a sliding-window cache of the window per sequence
// sharing it plus a micro-batch, padded, at most a stream's context.
func (s kvShape) bytes(n int, g kvGeometry) uint64 {
	pad := func(x int) int { return (x + 255) / 256 * 256 }
	seq := pad(n)
	if !g.unified {
		seq = pad(seq / g.streams)
	}
	rk, rv := cacheTypeSize(g.typeK), cacheTypeSize(g.typeV)
	cells := float64(seq * g.streams)
	total := (float64(s.fullK)*rk + float64(s.fullV)*rv) * cells
	if s.swaK+s.swaV > 0 {
		win := seq
		if !g.swaFull && s.nSwa > 0 {
			w := s.nSwa + g.ubatch
			if g.unified {
				w = s.nSwa*g.seqs + g.ubatch
			}
			win = pad(min(seq, w))
		}
		total += (float64(s.swaK)*rk + float64(s.swaV)*rv) * float64(win*g.streams)
	}
	return uint64(min(total, 1<<62)) // a float beyond uint64 converts to anything
}

// cacheTypeSize is the bytes of one element of a KV cache type
// (cacheTypes' names; "": f16), blocks' scales included.
func cacheTypeSize(t string) float64 {
	switch t {
	case "f32":
		return 4
	case "q8_0":
		return 34.0 / 32
	case "q4_0", "iq4_nl":
		return 18.0 / 32
	case "q4_1":
		return 20.0 / 32
	case "q5_0":
		return 22.0 / 32
	case "q5_1":
		return 24.0 / 32
	}
	return 2 // f16, bf16
}

// swaPeriods are the sliding-window patterns llama.cpp assumes for
// architectures whose files need not carry one
// (<arch>.attention.sliding_window_pattern): in each period of p layers,
// the first p-1 use the window and the last the whole context.
var swaPeriods = map[string]int{
	"gemma2": 2, "gemma3": 6, "gemma3n": 5, "gemma-embedding": 6, "cohere2": 4,
	"gpt-oss": 2, "exaone4": 4, "llama4": 4,
}

// swaLayers is which of a model's layers use its sliding window, as
// llama.cpp reads <arch>.attention.sliding_window_pattern: a flag per
// layer, or a period (0: every layer; p: all but the last of each p
// layers), the architecture's default period (swaPeriods) where the file
// has none; nil when there is neither.
func swaLayers(f *gguf.File, arch string, layers int) []bool {
	key := arch + ".attention.sliding_window_pattern"
	swa := make([]bool, layers)
	if v, _ := f.Get(key); v != nil {
		if flags, ok := v.([]bool); ok {
			copy(swa, flags)
			return swa
		}
	}
	period, ok := f.Int(key)
	if !ok {
		if period, ok = swaPeriods[arch]; !ok {
			return nil
		}
	}
	for i := range swa {
		swa[i] = period == 0 || period > 0 && i%period < period-1
	}
	return swa
}

// ownKVLayers is how many of a model's first layers keep a KV cache of
// their own, and whether the layers after them attend over an earlier
// layer's cache instead (Gemma 3n past llama.cpp's fixed 20, Gemma 4 the
// last <arch>.attention.shared_kv_layers); the layer count where none do.
func ownKVLayers(f *gguf.File, arch string, layers int) (n int, shared bool) {
	switch arch {
	case "gemma3n":
		return 20, true
	case "gemma4":
		n, _ := f.Int(arch + ".attention.shared_kv_layers")
		return layers - n, true
	}
	return layers, false
}

// kvShape is the model's KV cache per cell, read from its metadata once.
func (m *Model) kvShape() (kvShape, error) {
	m.kvOnce.Do(func() { m.kv, m.kvErr = m.readKVShape() })
	return m.kv, m.kvErr
}

func (m *Model) readKVShape() (kvShape, error) {
	f, err := readMetadataLight(m.path)
	if err != nil {
		return kvShape{}, errorf(CodeLoad, "fit context", "%v", err)
	}
	info := modelInfoForFit{
		layers: int(capi.ModelNLayer(m.ptr)), nEmbd: int(capi.ModelNEmbd(m.ptr)), nSwa: int(capi.ModelNSwa(m.ptr)),
		recurrent: capi.ModelIsRecurrent(m.ptr), hybrid: capi.ModelIsHybrid(m.ptr),
	}
	return kvShapeOf(f, info), nil
}

// modelInfoForFit are the facts of a loaded model kvShapeOf needs beside
// its metadata.
type modelInfoForFit struct {
	layers, nEmbd, nSwa int
	recurrent, hybrid   bool
}

// fullAttentionIntervals are the hybrid architectures whose recurrent
// layers llama.cpp places by <arch>.full_attention_interval (default 4):
// every interval-th layer attends, the others are recurrent, unless
// <arch>.attention.recurrent_layers lists them.
var fullAttentionIntervals = map[string]bool{"qwen3next": true, "qwen35": true, "qwen35moe": true, "qwen4exp": true}

// kvShapeOf is kvShape on read metadata.
func kvShapeOf(f *gguf.File, info modelInfoForFit) kvShape {
	var s kvShape
	for _, l := range kvLayers(f, info) {
		if l.swa {
			s.swaK, s.swaV = s.swaK+l.k, s.swaV+l.v
		} else {
			s.fullK, s.fullV = s.fullK+l.k, s.fullV+l.v
		}
	}
	s.nSwa = info.nSwa
	return s
}

// kvLayer is one layer's KV cache per cell: its K and V elements, and
// whether it keeps a sliding window's cells only.
type kvLayer struct {
	k, v uint64
	swa  bool
}

// kvLayers reads each layer's KV cache per cell from the metadata (nil
// for a recurrent model, which keeps none).
func kvLayers(f *gguf.File, info modelInfoForFit) []kvLayer {
	if info.recurrent || info.layers <= 0 {
		return nil
	}
	arch := f.Architecture()
	perLayer := func(key string, def int) []int {
		out := make([]int, info.layers)
		v, _ := f.Get(arch + "." + key)
		for i := range out {
			out[i] = def
			switch x := v.(type) {
			case []uint32:
				if i < len(x) {
					out[i] = int(x[i])
				}
			case []int32:
				if i < len(x) {
					out[i] = int(max(x[i], 0))
				}
			default:
				if n, ok := f.Int(arch + "." + key); ok {
					out[i] = n
				}
			}
		}
		return out
	}
	heads := perLayer("attention.head_count", 0)
	headsKV := perLayer("attention.head_count_kv", -1)
	for i, h := range headsKV {
		if h < 0 {
			headsKV[i] = heads[i]
		}
	}
	head0 := 0
	for _, h := range heads {
		if h > 0 {
			head0 = h
			break
		}
	}
	defLen := 0
	if head0 > 0 {
		defLen = info.nEmbd / head0
	}
	intOr := func(key string, def int) int {
		if n, ok := f.Int(arch + "." + key); ok {
			return n
		}
		return def
	}
	kLen, vLen := intOr("attention.key_length", defLen), intOr("attention.value_length", defLen)
	if rank, ok := f.Int(arch + ".attention.kv_lora_rank"); ok && rank > 0 {
		// Multi-head latent attention caches the compressed KV and
		// the RoPE part, one head.
		rope, _ := f.Int(arch + ".rope.dimension_count")
		kLen, vLen = rank+rope, rank
		for i, h := range headsKV {
			headsKV[i] = min(h, 1)
		}
	}
	// The layers of a hybrid that keep a recurrent state and no KV cache
	// (others mark them with 0 KV heads, which the sum below skips).
	if info.hybrid {
		v, _ := f.Get(arch + ".attention.recurrent_layers")
		interval, ok := f.Int(arch + ".full_attention_interval")
		if !ok || interval <= 0 {
			interval = 4
		}
		for i := range headsKV {
			switch x := v.(type) {
			case []bool:
				if i < len(x) && x[i] {
					headsKV[i] = 0
				}
			default:
				if fullAttentionIntervals[arch] && (i+1)%interval != 0 {
					headsKV[i] = 0
				}
			}
		}
	}
	swa := make([]bool, info.layers)
	if info.nSwa > 0 {
		if pattern := swaLayers(f, arch, info.layers); pattern != nil {
			swa = pattern
		}
	}
	// Sliding-window layers may have heads of their own width.
	kLenSWA, vLenSWA := intOr("attention.key_length_swa", kLen), intOr("attention.value_length_swa", vLen)
	withKV, _ := ownKVLayers(f, arch, info.layers)
	out := make([]kvLayer, info.layers)
	for i := range out {
		if i >= withKV {
			continue
		}
		kl, vl := kLen, vLen
		if swa[i] {
			kl, vl = kLenSWA, vLenSWA
		}
		out[i] = kvLayer{k: uint64(headsKV[i] * kl), v: uint64(headsKV[i] * vl), swa: swa[i]}
	}
	return out
}

// gpuShare is the part of the KV cache a context of opts keeps on GPUs:
// that of the offloaded layers, unless the cache stays on the CPU.
func (m *Model) gpuShare(opts ContextOptions) float64 {
	if !m.onGPU || opts.NoOffloadKQV {
		return 0
	}
	// n_gpu_layers counts the output layer first, then the repeating
	// layers from the last.
	n := int(capi.ModelNLayer(m.ptr))
	if m.gpuLayers < 0 || n <= 0 || int(m.gpuLayers) > n {
		return 1
	}
	return float64(max(m.gpuLayers-1, 0)) / float64(n)
}

// fitBudget is the memory a KV cache may take, the margin left: on the
// host and on the GPUs the model uses (their free memory together).
func (m *Model) fitBudget(opts ContextOptions) (host, gpu uint64) {
	margin := opts.Fit.margin()
	sub := func(a, b uint64) uint64 {
		if a <= b {
			return 0
		}
		return a - b
	}
	devs, _ := Devices()
	var cpuFree uint64
	for _, d := range devs {
		if d.Type == "cpu" {
			cpuFree = d.FreeMemory
		}
	}
	if m.onGPU {
		for _, d := range offloadTargets(devs, m.gpuDevices, m.gpuPinned) {
			gpu += sub(d.FreeMemory, margin)
		}
	}
	avail := hostAvailable()
	if avail == 0 {
		avail = cpuFree
	}
	// Weights mapped from the file count as available (page cache) to
	// the kernel, but a cache that took their place would evict them.
	if m.mapped {
		avail = sub(avail, uint64(float64(m.size)*(1-m.gpuShare(ContextOptions{}))))
	}
	return sub(avail, margin), gpu
}

// hostAvailable is the memory this process may still take on Linux: the
// kernel's MemAvailable, or less where its cgroup's limit leaves less; 0
// where neither can be read.
func hostAvailable() uint64 {
	var avail uint64
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
				kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				if err == nil {
					avail = kb << 10
				}
			}
		}
	}
	limit, err1 := os.ReadFile("/sys/fs/cgroup/memory.max")
	used, err2 := os.ReadFile("/sys/fs/cgroup/memory.current")
	if err1 == nil && err2 == nil {
		l, e1 := strconv.ParseUint(strings.TrimSpace(string(limit)), 10, 64) // "max": no limit
		u, e2 := strconv.ParseUint(strings.TrimSpace(string(used)), 10, 64)
		if e1 == nil && e2 == nil {
			left := uint64(0)
			if l > u {
				left = l - u
			}
			if avail == 0 || left < avail {
				avail = left
			}
		}
	}
	return avail
}
