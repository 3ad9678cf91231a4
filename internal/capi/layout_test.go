package capi

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/testenv"
)

// cStruct pairs a Go mirror with its C struct and the C names of its fields,
// in order (padding fields named _ are skipped on the Go side).
type cStruct struct {
	c      string
	goType any
	fields []string
}

var layouts = []cStruct{
	{"struct llama_model_params", ModelParams{}, []string{"devices", "tensor_buft_overrides", "n_gpu_layers",
		"split_mode", "load_mode", "lazy_mode", "main_gpu", "tensor_split", "progress_callback",
		"progress_callback_user_data", "kv_overrides", "vocab_only", "check_tensors", "use_extra_bufts",
		"no_host", "no_alloc", "load_mtp"}},
	{"struct llama_context_params", ContextParams{}, []string{"n_ctx", "n_batch", "n_ubatch", "n_seq_max",
		"n_rs_seq", "n_outputs_max", "n_outputs_max_per_seq", "n_threads", "n_threads_batch", "ctx_type",
		"rope_scaling_type", "pooling_type", "attention_type", "flash_attn_type", "rope_freq_base",
		"rope_freq_scale", "yarn_ext_factor", "yarn_attn_factor", "yarn_beta_fast", "yarn_beta_slow",
		"yarn_orig_ctx", "defrag_thold", "cb_eval", "cb_eval_user_data", "type_k", "type_v",
		"abort_callback", "abort_callback_data", "embeddings", "offload_kqv", "no_perf", "op_offload",
		"swa_full", "kv_unified", "samplers", "n_samplers", "ctx_other"}},
	{"struct llama_batch", Batch{}, []string{"n_tokens", "token", "embd", "pos", "n_seq_id", "seq_id", "logits"}},
	{"llama_token_data", TokenData{}, []string{"id", "logit", "p"}},
	{"llama_token_data_array", TokenDataArray{}, []string{"data", "size", "selected", "sorted"}},
	{"struct llama_sampler_chain_params", SamplerChainParams{}, []string{"no_perf"}},
	{"struct llama_chat_message", ChatMessage{}, []string{"role", "content"}},
	{"llama_logit_bias", LogitBias{}, []string{"token", "bias"}},
	{"struct llama_model_kv_override", ModelKVOverride{}, []string{"tag", "key", "val_str"}},
	{"struct llama_perf_context_data", PerfContextData{}, []string{"t_start_ms", "t_load_ms", "t_p_eval_ms",
		"t_eval_ms", "n_p_eval", "n_eval", "n_reused"}},
	{"struct llama_perf_sampler_data", PerfSamplerData{}, []string{"t_sample_ms", "n_sample"}},
	{"struct llama_sampler_i", SamplerI{}, []string{"name", "accept", "apply", "reset", "clone", "free",
		"backend_init", "backend_accept", "backend_apply", "backend_set_input", "backend_reset", "copy_state"}},
	{"struct llama_sampler", SamplerStruct{}, []string{"iface", "ctx"}},
	{"struct ggml_threadpool_params", ThreadpoolParams{}, []string{"cpumask", "n_threads", "prio", "poll", "strict_cpu", "paused"}},
}

// TestStructLayout compiles a few lines of C against the pinned llama.h and
// holds the size, alignment and every field offset of each Go mirror
// against what the C compiler says.
func TestStructLayout(t *testing.T) {
	cc := testenv.CC(t)
	src := testenv.LlamaSrc(t)
	var prog bytes.Buffer
	prog.WriteString("#include <stdio.h>\n#include <stddef.h>\n#include \"llama.h\"\nint main(void){\n")
	for _, s := range layouts {
		fmt.Fprintf(&prog, "printf(\"%s|sizeof|%%zu\\n\", sizeof(%s));\n", s.c, s.c)
		fmt.Fprintf(&prog, "printf(\"%s|alignof|%%zu\\n\", _Alignof(%s));\n", s.c, s.c)
		for _, f := range s.fields {
			fmt.Fprintf(&prog, "printf(\"%s|%s|%%zu\\n\", offsetof(%s, %s));\n", s.c, f, s.c, f)
			fmt.Fprintf(&prog, "printf(\"%s|%s.size|%%zu\\n\", sizeof(((%s*)0)->%s));\n", s.c, f, s.c, f)
		}
	}
	prog.WriteString("return 0;}\n")
	dir := t.TempDir()
	cfile := filepath.Join(dir, "layout.c")
	require.NoError(t, os.WriteFile(cfile, prog.Bytes(), 0o644))
	exe := filepath.Join(dir, "layout")
	out, err := exec.Command(cc, "-std=c11", "-I", filepath.Join(src, "include"), "-I",
		filepath.Join(src, "ggml", "include"), "-o", exe, cfile).CombinedOutput()
	require.NoError(t, err, "compiling the layout probe: %s", out)
	out, err = exec.Command(exe).Output()
	require.NoError(t, err)
	want := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		parts := strings.Split(sc.Text(), "|")
		require.Len(t, parts, 3)
		n, err := strconv.ParseUint(parts[2], 10, 64)
		require.NoError(t, err)
		want[parts[0]+"|"+parts[1]] = n
	}
	for _, s := range layouts {
		t.Run(s.c, func(t *testing.T) {
			typ := reflect.TypeOf(s.goType)
			require.Equal(t, want[s.c+"|sizeof"], uint64(typ.Size()), "sizeof")
			require.Equal(t, want[s.c+"|alignof"], uint64(typ.Align()), "alignof")
			var goFields []reflect.StructField
			for i := range typ.NumField() {
				if f := typ.Field(i); f.Name != "_" {
					goFields = append(goFields, f)
				}
			}
			require.Len(t, goFields, len(s.fields), "field count")
			for i, f := range goFields {
				c := s.fields[i]
				require.Equal(t, want[s.c+"|"+c], uint64(f.Offset), "offset of %s (Go %s)", c, f.Name)
				require.Equal(t, want[s.c+"|"+c+".size"], uint64(f.Type.Size()), "size of %s (Go %s)", c, f.Name)
			}
		})
	}
}
