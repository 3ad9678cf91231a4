package llama

import (
	"fmt"
	"os"
	"slices"

	"github.com/x/llama/internal/gguf"
)

// maxLayers and maxExperts are llama.cpp's LLAMA_MAX_LAYERS and
// LLAMA_MAX_EXPERTS: beyond them its loader aborts the process.
const (
	maxLayers  = 512
	maxExperts = 1024
)

// ropeScalingTypes are the values of <arch>.rope.scaling.type llama.cpp
// knows; any other aborts its loader.
var ropeScalingTypes = map[string]bool{"none": true, "linear": true, "yarn": true, "longrope": true}

// readMetadataLight reads the header and the scalar metadata of the GGUF
// file at path (gguf.ReadMetadataLight), with arrays of up to one value a
// layer kept.
func readMetadataLight(path string) (*gguf.File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	return gguf.ReadMetadataLight(fh, st.Size(), maxLayers)
}

// checkGGUF reads the header and metadata of the GGUF file at path in Go
// before llama.cpp sees it. llama.cpp reports most damage as an error, but
// asserts (aborting the whole process) on some metadata values its GGUF
// parser accepts: a layer count of 0 or above 512, expert counts out of
// their bounds, an unknown RoPE scaling type, a sliding window with no
// layer to use it, shared KV layers pointing at no cache. Those, and any file the Go
// reader cannot parse up to the end of its metadata, are refused here with
// the reason. The tensor descriptors and data are left to llama.cpp, which
// checks them without crashing. overrides are the KVOverrides, which
// replace metadata values before llama.cpp reads them; hparams is false
// for a vocabulary-only load, where llama.cpp reads no hyperparameters.
func checkGGUF(path string, overrides map[string]any, hparams bool) error {
	f, err := readMetadataLight(path)
	if err != nil {
		return err
	}
	if !hparams {
		return nil
	}
	arch, _ := f.String("general.architecture")
	if arch == "" || arch == "clip" {
		return nil // llama.cpp refuses a missing one itself, and reads no hyperparameters of clip
	}
	// num returns the largest of a key's value or per-layer values, and
	// whether it is there as a number (a value of another type is
	// llama.cpp's own clean error).
	num := func(key string) (uint64, bool) {
		key = arch + "." + key
		if _, ok := overrides[key]; ok {
			return 0, false
		}
		v, ok := f.Get(key)
		if !ok {
			return 0, false
		}
		switch n := v.(type) {
		case uint32: // llama.cpp reads the counts as uint32 and refuses other scalar types
			return uint64(n), true
		case []uint32: // or per layer, as int32 or uint32
			var m uint32
			for _, x := range n {
				m = max(m, x)
			}
			return uint64(m), true
		case []int32:
			var m uint32
			for _, x := range n {
				m = max(m, uint32(x))
			}
			return uint64(m), true
		}
		return 0, false
	}
	if n, ok := num("block_count"); ok && (n == 0 || n > maxLayers) {
		return fmt.Errorf("%s.block_count is %d, must be 1 to %d", arch, n, maxLayers)
	}
	layers, _ := num("block_count")
	if n, ok := num("nextn_predict_layers"); ok && n > layers {
		return fmt.Errorf("%s.nextn_predict_layers %d exceeds the %d layers", arch, n, layers)
	}
	experts, _ := num("expert_count")
	if experts > maxExperts {
		return fmt.Errorf("%s.expert_count is %d, at most %d", arch, experts, maxExperts)
	}
	used, _ := num("expert_used_count")
	groups, _ := num("expert_group_count")
	groupUsed, _ := num("expert_group_used_count")
	switch {
	case used > experts:
		return fmt.Errorf("%s.expert_used_count %d exceeds expert_count %d", arch, used, experts)
	case experts > 0 && used == 0:
		return fmt.Errorf("%s.expert_used_count is 0 with %d experts", arch, experts)
	case experts > 0 && groups >= experts:
		return fmt.Errorf("%s.expert_group_count %d is not below expert_count %d", arch, groups, experts)
	case experts > 0 && groups > 1 && (experts%groups != 0 || groupUsed == 0 || groupUsed >= groups):
		return fmt.Errorf("%s: %d experts in %d groups with %d used do not fit", arch, experts, groups, groupUsed)
	case experts == 0 && groups != 0:
		return fmt.Errorf("%s.expert_group_count is %d without experts", arch, groups)
	}
	if err := checkSlidingWindow(f, arch, int(layers), overrides); err != nil {
		return err
	}
	if _, over := overrides[arch+".rope.scaling.type"]; !over {
		if v, ok := f.Get(arch + ".rope.scaling.type"); ok {
			if s, ok := v.(string); ok && !ropeScalingTypes[s] {
				return fmt.Errorf("%s.rope.scaling.type %q is none of none, linear, yarn, longrope", arch, s)
			}
		}
	}
	return nil
}

// alwaysSWA are the architectures that use a sliding window whether or not
// the file gives its size; the others only with <arch>.sliding_window
// above 0.
var alwaysSWA = map[string]bool{
	"gemma2": true, "gemma3n": true, "gemma4": true, "gemma4-assistant": true, "gemma-embedding": true,
	"cohere2": true, "cohere2moe": true, "exaone-moe": true, "openai-moe": true, "mimo2": true,
	"granite-swa": true, "dots3note": true, "muse-glimmer": true,
}

// checkSlidingWindow refuses the layouts llama.cpp asserts on when it
// creates a context: a sliding window whose pattern
// (<arch>.attention.sliding_window_pattern: a period, or a flag per
// layer) leaves no layer using it, and Gemma 3n's and 4's shared KV
// layers, which attend over the cache of the second last (sliding) or the
// last (full) layer that keeps one, when that layer is of the other kind
// or missing.
func checkSlidingWindow(f *gguf.File, arch string, layers int, overrides map[string]any) error {
	key := arch + ".attention.sliding_window_pattern"
	for _, k := range []string{key, arch + ".attention.sliding_window", arch + ".attention.shared_kv_layers"} {
		if _, over := overrides[k]; over {
			return nil // llama.cpp reads the override; leave it to llama.cpp
		}
	}
	window, hasWindow := f.Int(arch + ".attention.sliding_window")
	if window <= 0 && (!alwaysSWA[arch] || hasWindow) || layers <= 0 {
		return nil // no sliding window
	}
	swa := swaLayers(f, arch, layers) // nil: a pattern llama.cpp refuses itself, or none
	if swa != nil && !slices.Contains(swa, true) {
		return fmt.Errorf("%s has a sliding window but no layer uses it", key)
	}
	kvLayers, shared := ownKVLayers(f, arch, layers) // from kvLayers on, layers share an earlier cache
	if !shared || swa == nil {
		return nil
	}
	if kvLayers < 2 {
		return fmt.Errorf("%s.attention.shared_kv_layers leaves %d of %d layers with a KV cache, at least 2 needed", arch, max(kvLayers, 0), layers)
	}
	for i := kvLayers; i < layers; i++ {
		src := kvLayers - 1
		if swa[i] {
			src--
		}
		if swa[src] != swa[i] {
			return fmt.Errorf("%s: shared KV layer %d would attend over layer %d's cache, which is not of its kind (sliding window or full)", arch, i, src)
		}
	}
	return nil
}
