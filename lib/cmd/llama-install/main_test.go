package main

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		args []string
		want config
		err  string
	}{
		{args: nil, want: config{}},
		{args: []string{"-flavor", "cuda"}, want: config{flavor: "cuda"}},
		{args: []string{"-flavor", "cuda", "-build"}, want: config{flavor: "cuda-local", build: true}},
		{args: []string{"-flavor", "cuda-local"}, want: config{flavor: "cuda-local", build: true}},
		{args: []string{"-flavor", "cuda", "-build", "-cuda-arch", "sm_90,89,9.0", "-server", "-j", "16"},
			want: config{flavor: "cuda-local", build: true, archs: []string{"89", "90"}, server: true, jobs: 16}},
		{args: []string{"-flavor", "cuda", "-build", "-nvcc", "/opt/cuda/bin/nvcc", "-dir", "/x", "-force"},
			want: config{flavor: "cuda-local", build: true, nvcc: "/opt/cuda/bin/nvcc", dir: "/x", force: true}},
		{args: []string{"-server"}, want: config{server: true}},
		{args: []string{"-build"}, err: "use it with -flavor cuda"},
		{args: []string{"-flavor", "vulkan", "-build"}, err: "use it with -flavor cuda"},
		{args: []string{"-flavor", "cuda", "-cuda-arch", "90"}, err: "-cuda-arch is for -build"},
		{args: []string{"-flavor", "cuda", "-nvcc", "nvcc"}, err: "-nvcc is for -build"},
		{args: []string{"-flavor", "cuda", "-build", "-cuda-arch", "hopper"}, err: "not a CUDA architecture"},
		{args: []string{"-flavor", "cuda", "-build", "-cuda-arch", ","}, err: "no CUDA architecture"},
		{args: []string{"-flavor", "cuda", "-build", "-source", "npm"}, err: "-source and -insecure do not apply"},
		{args: []string{"-flavor", "cuda", "-build", "-insecure"}, err: "-source and -insecure do not apply"},
		{args: []string{"-j", "-1"}, err: "must not be negative"},
		{args: []string{"-flavor", "cuda", "extra"}, err: "unexpected arguments: extra"},
		{args: []string{"-no-such-flag"}, err: "not defined"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got, err := parseFlags(tt.args, io.Discard)
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	_, err := parseFlags([]string{"-h"}, io.Discard)
	require.ErrorIs(t, err, flag.ErrHelp)
}
