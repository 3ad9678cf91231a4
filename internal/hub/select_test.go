package hub

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSplitRef(t *testing.T) {
	for _, tc := range []struct {
		ref, repo, tag string
		ok             bool
	}{
		{"org/repo", "org/repo", "", true},
		{"org/repo:Q4_K_M", "org/repo", "Q4_K_M", true},
		{"org/repo:q8_0", "org/repo", "q8_0", true},
		{"ggml-org/gemma-3-1b-it-GGUF:Q4_K_M", "ggml-org/gemma-3-1b-it-GGUF", "Q4_K_M", true},
		{"org/repo:a:F16", "org/repo", "F16", true}, // the tag is after the last colon
		{"repo", "", "", false},
		{"org/repo/sub", "", "", false},
		{"org//repo", "", "", false},
		{"org/-repo", "", "", false},
		{"org/repo-", "", "", false},
		{"org/../x", "", "", false},
		{"org/re po", "", "", false},
		{"", "", "", false},
		{":Q4_0", "", "", false},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			repo, tag, err := SplitRef(tc.ref)
			if !tc.ok {
				var e *Error
				require.ErrorAs(t, err, &e)
				assert.Equal(t, CodeInvalid, e.Code)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.repo, repo)
			assert.Equal(t, tc.tag, tag)
		})
	}
}

func files(paths ...string) []file {
	var fs []file
	for _, p := range paths {
		fs = append(fs, file{Path: p})
	}
	return fs
}

func TestBestModel(t *testing.T) {
	repo := files("README.md", "model-Q2_K.gguf", "model-Q8_0.gguf", "model-Q4_K_M.gguf", "mmproj-model-f16.gguf")
	for _, tc := range []struct {
		name  string
		files []file
		tag   string
		want  string // "" for none
	}{
		{"Q4_K_M first by default", repo, "", "model-Q4_K_M.gguf"},
		{"then Q8_0", files("model-Q2_K.gguf", "model-Q8_0.gguf"), "", "model-Q8_0.gguf"},
		{"then the first model file", files("mmproj-x-f16.gguf", "x-imatrix.gguf", "model-F16.gguf", "model-Q3_K_S.gguf"), "", "model-F16.gguf"},
		{"tag", repo, "Q2_K", "model-Q2_K.gguf"},
		{"tag is case-insensitive", repo, "q8_0", "model-Q8_0.gguf"},
		{"tag must end at a dot or dash", files("model-Q4_0_4_4.gguf", "model-Q4_0.gguf"), "Q4_0", "model-Q4_0.gguf"},
		{"unknown tag finds nothing, no fallback", repo, "IQ2_XS", ""},
		{"projectors are not models", files("mmproj-Q4_K_M.gguf"), "Q4_K_M", ""},
		{"sidecars are not models", files("mtp-model-Q8_0.gguf", "model-Q8_0.gguf"), "Q8_0", "model-Q8_0.gguf"},
		{"split: the first part", files("m-Q4_K_M-00002-of-00003.gguf", "m-Q4_K_M-00001-of-00003.gguf", "m-Q4_K_M-00003-of-00003.gguf"), "", "m-Q4_K_M-00001-of-00003.gguf"},
		{"split in a folder", files("Q8_0/m-Q8_0-00002-of-00002.gguf", "Q8_0/m-Q8_0-00001-of-00002.gguf"), "q8_0", "Q8_0/m-Q8_0-00001-of-00002.gguf"},
		{"no GGUF", files("README.md", "config.json"), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, ok := bestModel(tc.files, tc.tag)
			assert.Equal(t, tc.want != "", ok)
			assert.Equal(t, tc.want, f.Path)
		})
	}
}

func TestSplitParts(t *testing.T) {
	all := files("m-Q4_K_M-00002-of-00003.gguf", "m-Q4_K_M-00001-of-00003.gguf", "m-Q8_0.gguf",
		"m-Q4_K_M-00003-of-00003.gguf", "m-Q8_0-00001-of-00002.gguf", "other-Q4_K_M-00001-of-00003.gguf")
	for _, tc := range []struct {
		primary string
		want    []string
	}{
		{"m-Q4_K_M-00001-of-00003.gguf", []string{"m-Q4_K_M-00001-of-00003.gguf", "m-Q4_K_M-00002-of-00003.gguf", "m-Q4_K_M-00003-of-00003.gguf"}},
		{"m-Q8_0.gguf", []string{"m-Q8_0.gguf"}},
		{"m-Q8_0-00001-of-00002.gguf", []string{"m-Q8_0-00001-of-00002.gguf"}}, // the second part is missing: the caller refuses it
	} {
		t.Run(tc.primary, func(t *testing.T) {
			var got []string
			for _, f := range splitParts(all, file{Path: tc.primary}) {
				got = append(got, f.Path)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestGGUFSplitAndBits(t *testing.T) {
	for _, tc := range []struct {
		path         string
		prefix, tag  string
		index, count int
		bits         int
	}{
		{"model-Q4_K_M.gguf", "model-Q4_K_M", "Q4_K_M", 1, 1, 4},
		{"model.f16.gguf", "model.f16", "F16", 1, 1, 16},
		{"x/model-BF16-00002-of-00004.gguf", "x/model-BF16", "BF16", 2, 4, 16},
		{"model-IQ2_XS.gguf", "model-IQ2_XS", "IQ2_XS", 1, 1, 2},
		{"mmproj.gguf", "mmproj", "", 1, 1, 0},
	} {
		t.Run(tc.path, func(t *testing.T) {
			s := ggufSplit(tc.path)
			assert.True(t, s.ok)
			assert.Equal(t, tc.prefix, s.Prefix)
			assert.Equal(t, tc.tag, s.Tag)
			assert.Equal(t, tc.index, s.Index)
			assert.Equal(t, tc.count, s.Count)
			assert.Equal(t, tc.bits, tagBits(s.Tag))
		})
	}
	assert.False(t, ggufSplit("README.md").ok)
}

func TestBestSibling(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []file
		model string
		want  string
		kw    string // "": mmproj
		tag   string
	}{
		{name: "closest bits", files: files("m-Q4_K_M.gguf", "mmproj-m-f16.gguf", "mmproj-m-q8_0.gguf"), model: "m-Q4_K_M.gguf", want: "mmproj-m-q8_0.gguf"},
		{name: "f16 model takes f16", files: files("m-F16.gguf", "mmproj-m-f16.gguf", "mmproj-m-q8_0.gguf"), model: "m-F16.gguf", want: "mmproj-m-f16.gguf"},
		{name: "deepest folder first", files: files("a/m-Q4_K_M.gguf", "mmproj-q4_0.gguf", "a/mmproj-f16.gguf"), model: "a/m-Q4_K_M.gguf", want: "a/mmproj-f16.gguf"},
		{name: "not from another folder", files: files("a/m-Q4_K_M.gguf", "b/mmproj-f16.gguf"), model: "a/m-Q4_K_M.gguf"},
		{name: "parent folder ok", files: files("a/m-Q4_K_M.gguf", "mmproj-f16.gguf"), model: "a/m-Q4_K_M.gguf", want: "mmproj-f16.gguf"},
		{name: "none", files: files("m-Q4_K_M.gguf"), model: "m-Q4_K_M.gguf"},
		// The MTP head: the quant asked for by name first, then the closest.
		{name: "mtp of the tag", files: files("m-Q4_K_M.gguf", "mtp-m-Q8_0.gguf", "mtp-m-Q4_K_M.gguf", "mtp-m-Q4_0.gguf"), model: "m-Q4_K_M.gguf",
			kw: "mtp-", tag: "q4_k_m", want: "mtp-m-Q4_K_M.gguf"},
		{name: "mtp closest to the tag", files: files("m-Q2_K.gguf", "mtp-m-Q8_0.gguf", "mtp-m-Q3_K_M.gguf"), model: "m-Q2_K.gguf",
			kw: "mtp-", tag: "Q2_K", want: "mtp-m-Q3_K_M.gguf"},
		{name: "mtp without a tag", files: files("m-Q8_0.gguf", "mtp-m-Q4_K_M.gguf", "mtp-m-Q8_0.gguf"), model: "m-Q8_0.gguf",
			kw: "mtp-", want: "mtp-m-Q8_0.gguf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kw := tc.kw
			if kw == "" {
				kw = "mmproj"
			}
			f, ok := bestSibling(tc.files, tc.model, kw, tc.tag)
			assert.Equal(t, tc.want != "", ok)
			assert.Equal(t, tc.want, f.Path)
		})
	}
}

func TestCacheDir(t *testing.T) {
	vars := []string{"LLAMA_CACHE", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HOME"}
	for _, tc := range []struct {
		name string
		set  map[string]string
		want string
	}{
		{"LLAMA_CACHE first", map[string]string{"LLAMA_CACHE": "/l", "HF_HUB_CACHE": "/h", "HF_HOME": "/home/hf"}, "/l"},
		{"HF_HUB_CACHE", map[string]string{"HF_HUB_CACHE": "/h", "HUGGINGFACE_HUB_CACHE": "/old", "HF_HOME": "/home/hf"}, "/h"},
		{"HUGGINGFACE_HUB_CACHE", map[string]string{"HUGGINGFACE_HUB_CACHE": "/old", "HF_HOME": "/home/hf"}, "/old"},
		{"HF_HOME/hub", map[string]string{"HF_HOME": "/home/hf", "XDG_CACHE_HOME": "/x"}, "/home/hf/hub"},
		{"XDG_CACHE_HOME/huggingface/hub", map[string]string{"XDG_CACHE_HOME": "/x", "HOME": "/u"}, "/x/huggingface/hub"},
		{"HOME/.cache/huggingface/hub", map[string]string{"HOME": "/u"}, "/u/.cache/huggingface/hub"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range vars {
				t.Setenv(v, tc.set[v])
			}
			got, err := CacheDir()
			require.NoError(t, err)
			assert.Equal(t, filepath.FromSlash(tc.want), got)
		})
	}
}

func TestEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name, opt, model, hf, want string
	}{
		{"default", "", "", "", DefaultEndpoint},
		{"MODEL_ENDPOINT first", "", "http://a:1", "http://b:2/", "http://a:1/"},
		{"HF_ENDPOINT", "", "", "http://b:2", "http://b:2/"},
		{"option wins", "http://c/", "http://a:1", "http://b:2", "http://c/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvModelEndpoint, tc.model)
			t.Setenv(EnvHFEndpoint, tc.hf)
			assert.Equal(t, tc.want, Endpoint(tc.opt))
		})
	}
}
