package cudadrv

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeDriver is a stand-in libcuda.so.1 (the real one needs an NVIDIA
// GPU): a 13.0 driver with an H200 and an RTX 4090, or one whose cuInit
// fails as on a machine whose GPU is gone.
const fakeDriver = `
#include <string.h>
#include <stdlib.h>
static int failInit(void) { return getenv("FAKE_CUINIT_FAIL") != 0; }
int cuDriverGetVersion(int *v) { *v = 13000; return 0; }
int cuInit(unsigned f) { return failInit() ? 100 : 0; }
int cuDeviceGetCount(int *n) { *n = 2; return 0; }
int cuDeviceGet(int *d, int i) { *d = i; return i < 2 ? 0 : 101; }
int cuDeviceGetAttribute(int *v, int a, int d) {
	if (a == 75) { *v = d == 0 ? 9 : 8; return 0; }
	if (a == 76) { *v = d == 0 ? 0 : 9; return 0; }
	return 1;
}
int cuDeviceGetName(char *b, int n, int d) { strncpy(b, d == 0 ? "NVIDIA H200" : "NVIDIA GeForce RTX 4090", n); return 0; }
`

func TestQueryChild(t *testing.T) {
	if os.Getenv("CUDADRV_CHILD") != "1" {
		t.Skip("run by TestQuery in a child process")
	}
	info, err := Query()
	errText := ""
	if err != nil {
		errText = err.Error()
	}
	require.NoError(t, json.NewEncoder(os.Stdout).Encode(struct {
		Info Info
		Err  string
	}{info, errText}))
}

func TestQuery(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "fake.c")
	require.NoError(t, os.WriteFile(src, []byte(fakeDriver), 0o644))
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	out, err := exec.Command(cc, "-shared", "-fPIC", "-o", filepath.Join(dir, "libcuda.so.1"), src).CombinedOutput()
	require.NoError(t, err, "%s", out)

	type result struct {
		Info Info
		Err  string
	}
	tests := []struct {
		name string
		env  []string
		want result
	}{
		{"no driver", []string{"LD_LIBRARY_PATH=" + t.TempDir()}, result{}},
		{"a 13.0 driver, two devices", []string{"LD_LIBRARY_PATH=" + dir},
			result{Info: Info{Version: 13000, Devices: []Device{{0, "NVIDIA H200", 9, 0}, {1, "NVIDIA GeForce RTX 4090", 8, 9}}}}},
		{"cuInit fails", []string{"LD_LIBRARY_PATH=" + dir, "FAKE_CUINIT_FAIL=1"},
			result{Info: Info{Version: 13000}, Err: "cuInit: CUDA error 100 (no device)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "no driver" {
				if _, err := os.Stat("/usr/lib/x86_64-linux-gnu/libcuda.so.1"); err == nil {
					t.Skip("this machine has a CUDA driver")
				}
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestQueryChild$", "-test.count=1")
			cmd.Env = append(append(os.Environ(), "CUDADRV_CHILD=1"), tt.env...)
			out, err := cmd.Output()
			require.NoError(t, err, "%s", out)
			var got result
			require.NoError(t, json.Unmarshal(firstLine(out), &got), "%s", out)
			if tt.name == "no driver" {
				assert.Contains(t, got.Err, "no CUDA driver (libcuda.so.1 cannot be loaded)")
				assert.Contains(t, got.Err, "libcuda.so.1")
				return
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func firstLine(b []byte) []byte {
	for i, c := range b {
		if c == '\n' {
			return b[:i]
		}
	}
	return b
}
