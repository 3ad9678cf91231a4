package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestArgCppNoneRefused uses every option llama-server registers (read from
// the pinned source's common/arg.cpp) with a valid value, and requires the
// server to accept it: none is refused, but those llama.cpp has removed,
// which must be refused with the replacement llama.cpp names. Options
// needing hardware absent here (GPUs) act on what the library reports
// (see devices_test.go), so none is listed.
func TestArgCppNoneRefused(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f.txt")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	schema := filepath.Join(dir, "schema.json")
	require.NoError(t, os.WriteFile(schema, []byte(`{"type":"object"}`), 0o644))
	// Values for options whose value is not one of the generic ones below.
	samples := map[string][]string{
		"--chat-template-file": {file}, "--control-vector-layer-range": {"1", "2"},
		"--lora-scaled": {file + ":0.5"}, "--control-vector-scaled": {file + ":0.5"},
		"--cpu-range": {"0-1"}, "--cpu-range-batch": {"0-1"}, "--spec-draft-cpu-range": {"0-1"},
		"--samplers": {"top_k;temperature"}, "--json-schema-file": {schema}, "--numa": {"distribute"},
		"--cache-type-k": {"f16"}, "--cache-type-v": {"f16"}, "--spec-draft-type-k": {"f16"}, "--spec-draft-type-v": {"f16"},
		"--path": {dir}, "--media-path": {dir}, "--slot-save-path": {dir}, "--models-dir": {dir},
		"--tools-root": {dir}, "--spec-type": {"ngram-simple"}, "--docker-repo": {"ai/smollm2:135M-Q4_0"},
		"--override-kv": {"tokenizer.ggml.add_bos_token=bool:false"}, "--chat-template-kwargs": {`{"a":1}`},
		"--override-tensor": {"ffn=CPU"}, "-ot": {"ffn=CPU"}, "--spec-draft-override-tensor": {"ffn=CPU"}, "--grammar-file": {file},
		"--json-schema": {`{"type":"object"}`}, "--logit-bias": {"15+1"}, "--api-key-file": {file},
		"--ssl-key-file": {file}, "--ssl-cert-file": {file}, "--alias": {"m"}, "--tags": {"t"},
		"--hf-repo": {"org/repo"}, "--spec-draft-hf": {"org/repo"}, "--model-url": {"http://127.0.0.1:1/m.gguf"},
		"--mmproj-url": {"http://127.0.0.1:1/p.gguf"}, "--rpc": {"127.0.0.1:50052"},
	}
	generic := []string{"1", "0.5", "on", "none", "auto", "1,2", file, "a"}
	for _, o := range serverCppOptions(t) {
		name := o.args[0]
		for _, n := range o.args {
			if strings.HasPrefix(n, "--") {
				name = n
				break
			}
		}
		var tries [][]string
		switch {
		case samples[name] != nil:
			tries = [][]string{samples[name]}
		case o.values == 0:
			tries = [][]string{nil}
		case o.values == 1:
			for _, v := range generic {
				tries = append(tries, []string{v})
			}
		default:
			tries = [][]string{{file, "1"}, {"1", "2"}}
		}
		if o.removed != "" {
			_, err := parseFlags(append([]string{name}, "1"), noEnv, io.Discard)
			assert.ErrorContains(t, err, "the argument has been removed. "+o.removed, "arg.cpp:%d: %s", o.line, name)
			continue
		}
		var err error
		for _, v := range tries {
			if _, err = parseFlags(append([]string{name}, v...), noEnv, io.Discard); err == nil || err == errHelp {
				break
			}
		}
		if err == errHelp {
			continue // --help, --completion-bash: print and exit
		}
		assert.NoError(t, err, "arg.cpp:%d: no sample value of %s is accepted; add one", o.line, name)
	}
}
