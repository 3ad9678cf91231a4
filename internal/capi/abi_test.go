package capi

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/internal/testenv"
)

// TestRefuseOtherABI builds fake libllama libraries with the C compiler and
// loads each in a child process: one that lacks symbols, one that reports
// another version, and one whose llama_model_params has another layout.
// Each must be refused at load with an error saying what is wrong.
func TestRefuseOtherABI(t *testing.T) {
	if dir := os.Getenv("CAPI_CHILD_DIR"); dir != "" {
		err := Load(Files{
			Llama:      filepath.Join(dir, "libllama-fake"),
			GGML:       filepath.Join(dir, "libggml-real"),
			GGMLBase:   filepath.Join(dir, "libggml-base-real"),
			BackendDir: dir,
		})
		if err == nil {
			fmt.Println("LOADED")
		} else {
			fmt.Println("ERROR:", err)
		}
		return
	}
	cc := testenv.CC(t)
	// The real library's ggml parts, beside each fake libllama.
	ggml := map[string]string{
		"libggml-base-real": testenv.LibraryPath(t, "ggml-base"),
		"libggml-real":      testenv.LibraryPath(t, "ggml"),
	}

	// C source with a stub for every bound llama_ symbol.
	stubs := func(version string, gpuLayers int) string {
		var b strings.Builder
		b.WriteString("#include <string.h>\n")
		fmt.Fprintf(&b, "const char* llama_version(void){return %q;}\n", version)
		b.WriteString("typedef struct { void*a; void*b; int n_gpu_layers; int split; int load; int lazy; int main_gpu; void*c[4]; _Bool f[8]; } mp;\n")
		fmt.Fprintf(&b, "mp llama_model_default_params(void){mp p; memset(&p,0,sizeof p); p.n_gpu_layers=%d; p.split=1; p.load=-1; p.lazy=1; p.f[2]=1; return p;}\n", gpuLayers)
		for _, s := range registry {
			if s.lib != libLlama || s.name == "llama_version" || s.name == "llama_model_default_params" {
				continue
			}
			fmt.Fprintf(&b, "void* %s(void){return 0;}\n", s.name)
		}
		return b.String()
	}
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"missing symbols", `const char* llama_version(void){return "0.4.0";}`, "lacks"},
		{"other version", stubs("0.3.9", -1), `version "0.3.9"`},
		{"other struct layout", stubs("0.4.0-dev", 7), "llama_model_params does not have the expected layout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, real := range ggml {
				b, err := os.ReadFile(real)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o755))
			}
			c := filepath.Join(dir, "fake.c")
			require.NoError(t, os.WriteFile(c, []byte(tt.src), 0o644))
			out, err := exec.Command(cc, "-shared", "-fPIC", "-w", "-o", filepath.Join(dir, "libllama-fake"), c).CombinedOutput()
			require.NoError(t, err, "%s", out)
			cmd := exec.Command(os.Args[0], "-test.run=^TestRefuseOtherABI$", "-test.count=1")
			cmd.Env = append(os.Environ(), "CAPI_CHILD_DIR="+dir)
			out, err = cmd.CombinedOutput()
			require.NoError(t, err, "child crashed instead of refusing: %s", out)
			assert.Contains(t, string(out), "ERROR: llama:")
			assert.Contains(t, string(out), tt.want)
			assert.NotContains(t, string(out), "LOADED")
		})
	}
}
