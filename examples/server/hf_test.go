package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/x/llama"
	"github.com/x/llama/engine"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/hub/hubtest"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/server"
)

// pullHF serves -hf's model under the repo's name, and starts router mode
// for a preset repo; offline, it uses the cache.
func TestPullHF(t *testing.T) {
	model, err := os.ReadFile(testenv.Model(t, "stories260K.gguf"))
	require.NoError(t, err)
	fakeHub(t, map[string]*hubtest.Repo{
		"tiny/stories": {Files: map[string][]byte{"stories260K-Q8_0.gguf": model}},
		"tiny/preset":  {Files: map[string][]byte{"preset.ini": []byte("[stories]\nhf-repo = tiny/stories\n")}},
	})
	t.Setenv("LLAMA_CACHE", t.TempDir())
	for _, tc := range []struct {
		name   string
		flags  hfFlags
		alias  string
		models []string // the ids of GET /v1/models
		bar    bool
	}{
		{name: "model", flags: hfFlags{Repo: "tiny/stories:Q8_0"}, models: []string{"tiny/stories:Q8_0"}, bar: true},
		{name: "alias kept, offline", flags: hfFlags{Repo: "tiny/stories", Offline: true}, alias: "tiny", models: []string{"tiny"}},
		{name: "preset repo: router mode", flags: hfFlags{Repo: "tiny/preset"}, models: []string{"stories"}, bar: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := server.Options{Alias: tc.alias, Engine: engine.Options{Context: llama.ContextOptions{Threads: 1, ThreadsBatch: 1, ContextSize: 256}}}
			var bar bytes.Buffer
			require.NoError(t, pullHF(context.Background(), tc.flags, &o, &bar))
			assert.Equal(t, tc.bar, strings.Contains(bar.String(), "100%"), bar.String())
			if o.Model != "" {
				assert.Equal(t, "stories260K-Q8_0.gguf", filepath.Base(o.Model))
			}
			srv, err := server.New(context.Background(), o)
			require.NoError(t, err)
			defer srv.Close()
			ts := httptest.NewServer(srv.Handler())
			defer ts.Close()
			resp, err := ts.Client().Get(ts.URL + "/v1/models")
			require.NoError(t, err)
			defer resp.Body.Close()
			var list struct {
				Data []struct {
					ID string `json:"id"`
				} `json:"data"`
			}
			require.NoError(t, jsonDecode(resp.Body, &list))
			var ids []string
			for _, d := range list.Data {
				ids = append(ids, d.ID)
			}
			assert.Equal(t, tc.models, ids)
		})
	}
	// Without -hf nothing changes.
	o := server.Options{Model: "x.gguf"}
	require.NoError(t, pullHF(context.Background(), hfFlags{}, &o, &bytes.Buffer{}))
	assert.Equal(t, "x.gguf", o.Model)
}

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

// assertDrafts checks that a server started with opts drafts with its
// draft model.
func assertDrafts(t *testing.T, opts server.Options, msg string) {
	t.Helper()
	var r struct {
		Timings struct {
			DraftN int `json:"draft_n"`
		} `json:"timings"`
	}
	require.NoError(t, jsonDecode(serveCompletion(t, opts, `{"prompt":"Once upon a time","n_predict":16,"temperature":0}`), &r))
	assert.Positive(t, r.Timings.DraftN, msg)
}

// TestCacheList checks -cl: the models pulled into the hub cache, listed
// as llama-server lists them; an empty or missing cache lists none.
func TestCacheList(t *testing.T) {
	model, err := os.ReadFile(testenv.Model(t, "stories260K.gguf"))
	require.NoError(t, err)
	fakeHub(t, map[string]*hubtest.Repo{
		"tiny/stories": {Files: map[string][]byte{"stories260K-Q8_0.gguf": model, "stories260K-F16.gguf": model}},
		"tiny/other":   {Files: map[string][]byte{"other-Q4_0.gguf": model}},
	})
	for _, spell := range []string{"-cl", "--cache-list"} {
		c, err := parseFlags([]string{spell, "-m", "x.gguf"}, noEnv, io.Discard)
		require.NoError(t, err)
		assert.True(t, c.cacheList, spell)
	}
	t.Setenv("LLAMA_CACHE", filepath.Join(t.TempDir(), "missing"))
	var out bytes.Buffer
	require.NoError(t, printCacheList(&out))
	assert.Equal(t, "number of models in cache: 0\n", out.String())
	t.Setenv("LLAMA_CACHE", t.TempDir())
	out.Reset()
	require.NoError(t, printCacheList(&out))
	assert.Equal(t, "number of models in cache: 0\n", out.String())
	for _, repo := range []string{"tiny/stories:Q8_0", "tiny/stories:F16", "tiny/other:Q4_0"} {
		o := server.Options{}
		require.NoError(t, pullHF(context.Background(), hfFlags{Repo: repo}, &o, io.Discard), repo)
	}
	out.Reset()
	require.NoError(t, printCacheList(&out))
	assert.Equal(t, "number of models in cache: 3\n   1. tiny/other:Q4_0\n   2. tiny/stories:F16\n   3. tiny/stories:Q8_0\n", out.String())
}

// TestDraftSource checks --spec-draft-hf: the draft model is pulled as
// -hf pulls the model (-md then names the repo's file), offline from the
// cache only, and the server starts with it drafting.
func TestDraftSource(t *testing.T) {
	modelPath := testenv.Model(t, "stories260K.gguf")
	model, err := os.ReadFile(modelPath)
	require.NoError(t, err)
	fakeHub(t, map[string]*hubtest.Repo{
		"tiny/draft": {Files: map[string][]byte{"draft-Q8_0.gguf": model, "other.gguf": model}},
	})
	t.Setenv("LLAMA_CACHE", t.TempDir())
	for _, tc := range []struct {
		name string
		args []string
		file string
		err  string
	}{
		{name: "offline, empty cache", args: []string{"-hfd", "tiny/draft", "--offline"}, err: "--spec-draft-hf tiny/draft"},
		{name: "repo and quant", args: []string{"--spec-draft-hf", "tiny/draft:Q8_0"}, file: "draft-Q8_0.gguf"},
		{name: "-md names the file", args: []string{"-hfrd", "tiny/draft", "-md", "other.gguf"}, file: "other.gguf"},
		{name: "env, offline from the cache", args: []string{"--offline"}, file: "draft-Q8_0.gguf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			if strings.HasPrefix(tc.name, "env") {
				env["LLAMA_ARG_SPEC_DRAFT_HF_REPO"] = "tiny/draft:Q8_0"
			}
			c, err := parseFlags(append([]string{"-m", modelPath}, tc.args...), envOf(env), io.Discard)
			require.NoError(t, err)
			err = c.modelSource(context.Background(), io.Discard)
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.file, filepath.Base(c.opts.Engine.Speculative.DraftModel))
			assert.Equal(t, modelPath, c.opts.Model, "the model is untouched")
		})
	}
	c, err := parseFlags([]string{"-m", modelPath, "-hfd", "tiny/draft:Q8_0", "--spec-type", "draft-simple", "-c", "256", "-np", "1", "-t", "1", "-tb", "1"}, noEnv, io.Discard)
	require.NoError(t, err)
	require.NoError(t, c.modelSource(context.Background(), io.Discard))
	assertDrafts(t, c.opts, "the pulled draft model drafts")
}

// TestModelPresets checks llama-server's model shortcuts: each sets the
// repo and the settings llama-server's does, later flags override them,
// and the model (and a -spec preset's draft model) is pulled like -hf's.
func TestModelPresets(t *testing.T) {
	for _, tc := range []struct {
		flag, repo, file string
		port             int
		check            func(t *testing.T, c *config)
	}{
		{"--embd-gemma-default", "ggml-org/embeddinggemma-300M-qat-q4_0-GGUF", "embeddinggemma-300M-qat-Q4_0.gguf", 8011, func(t *testing.T, c *config) {
			e := c.opts.Engine
			assert.True(t, e.Embedding)
			assert.Equal(t, []int{2048, 2048, 32, 65536}, []int{e.Context.UBatchSize, e.Context.BatchSize, e.Parallel, e.Context.ContextSize})
		}},
		{"--fim-qwen-1.5b-default", "ggml-org/Qwen2.5-Coder-1.5B-Q8_0-GGUF", "qwen2.5-coder-1.5b-q8_0.gguf", 8012, func(t *testing.T, c *config) {
			e := c.opts.Engine
			assert.Equal(t, []int{1024, 1024, 0, 256}, []int{e.Context.UBatchSize, e.Context.BatchSize, e.Context.ContextSize, e.CacheReuse})
			assert.Empty(t, c.draftHF)
		}},
		{"--fim-qwen-3b-default", "ggml-org/Qwen2.5-Coder-3B-Q8_0-GGUF", "qwen2.5-coder-3b-q8_0.gguf", 8012, nil},
		{"--fim-qwen-7b-default", "ggml-org/Qwen2.5-Coder-7B-Q8_0-GGUF", "qwen2.5-coder-7b-q8_0.gguf", 8012, nil},
		{"--fim-qwen-30b-default", "ggml-org/Qwen3-Coder-30B-A3B-Instruct-Q8_0-GGUF", "qwen3-coder-30b-a3b-instruct-q8_0.gguf", 8012, nil},
		{"--fim-qwen-7b-spec", "ggml-org/Qwen2.5-Coder-7B-Q8_0-GGUF", "qwen2.5-coder-7b-q8_0.gguf", 8012, func(t *testing.T, c *config) {
			assert.Equal(t, "ggml-org/Qwen2.5-Coder-0.5B-Q8_0-GGUF", c.draftHF)
			assert.Equal(t, "qwen2.5-coder-0.5b-q8_0.gguf", c.opts.Engine.Speculative.DraftModel)
		}},
		{"--fim-qwen-14b-spec", "ggml-org/Qwen2.5-Coder-14B-Q8_0-GGUF", "qwen2.5-coder-14b-q8_0.gguf", 8012, nil},
		{"--gpt-oss-20b-default", "ggml-org/gpt-oss-20b-GGUF", "gpt-oss-20b-mxfp4.gguf", 8013, func(t *testing.T, c *config) {
			sp, e := c.opts.Sampling, c.opts.Engine
			assert.Equal(t, []float32{1, 1, 0.01}, []float32{sp.Temperature, sp.TopP, sp.MinP})
			assert.Zero(t, sp.TopK)
			assert.Equal(t, []int{2048, 32768, 2, 262144}, []int{e.Context.UBatchSize, e.Context.BatchSize, e.Parallel, e.Context.ContextSize})
			assert.True(t, c.opts.Jinja)
		}},
		{"--gpt-oss-120b-default", "ggml-org/gpt-oss-120b-GGUF", "", 8013, nil},
		{"--vision-gemma-4b-default", "ggml-org/gemma-3-4b-it-qat-GGUF", "", 8014, nil},
		{"--vision-gemma-12b-default", "ggml-org/gemma-3-12b-it-qat-GGUF", "", 8014, nil},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			c, err := parseFlags([]string{tc.flag}, noEnv, io.Discard)
			require.NoError(t, err)
			assert.Equal(t, []any{tc.repo, tc.file, tc.port}, []any{c.hf.Repo, c.hf.File, c.port})
			if tc.check != nil {
				tc.check(t, c)
			}
			c, err = parseFlags([]string{tc.flag, "--port", "9000", "-c", "4096", "-hff", "mine.gguf"}, noEnv, io.Discard)
			require.NoError(t, err)
			assert.Equal(t, []any{9000, 4096, "mine.gguf"}, []any{c.port, c.opts.Engine.Context.ContextSize, c.hf.File}, "later flags override")
		})
	}

	model, err := os.ReadFile(testenv.Model(t, "stories260K.gguf"))
	require.NoError(t, err)
	fakeHub(t, map[string]*hubtest.Repo{
		"ggml-org/Qwen2.5-Coder-7B-Q8_0-GGUF":   {Files: map[string][]byte{"qwen2.5-coder-7b-q8_0.gguf": model}},
		"ggml-org/Qwen2.5-Coder-0.5B-Q8_0-GGUF": {Files: map[string][]byte{"qwen2.5-coder-0.5b-q8_0.gguf": model}},
	})
	t.Setenv("LLAMA_CACHE", t.TempDir())
	c, err := parseFlags([]string{"--fim-qwen-7b-spec", "-c", "512", "-np", "1", "-t", "1", "-tb", "1", "--spec-type", "draft-simple"}, noEnv, io.Discard)
	require.NoError(t, err)
	require.NoError(t, c.modelSource(context.Background(), io.Discard))
	assert.Equal(t, "qwen2.5-coder-7b-q8_0.gguf", filepath.Base(c.opts.Model))
	assert.Equal(t, "qwen2.5-coder-0.5b-q8_0.gguf", filepath.Base(c.opts.Engine.Speculative.DraftModel))
	assert.Equal(t, "ggml-org/Qwen2.5-Coder-7B-Q8_0-GGUF", c.opts.Alias)
	assertDrafts(t, c.opts, "the preset's draft model drafts")
}

// TestMTPSource checks the MTP head shipped beside a model: with
// --spec-type draft-mtp, -hf pulls it with the model (the quant asked
// for), and a draft repo of heads alone (-hfd, no --spec-type) gives the
// head, whose file turns draft-mtp on; the server drafts with it.
func TestMTPSource(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{}
	for name, only := range map[string]string{"glm-Q8_0.gguf": "trunk", "mtp-glm-Q8_0.gguf": "mtp", "mtp-glm-Q4_0.gguf": "mtp"} {
		path := filepath.Join(dir, name)
		require.NoError(t, gguf.WriteTinyModel(path, gguf.TinyModelOptions{Arch: "glm4moe", NLayer: 2, NextN: 1, Seed: 7, PassThrough: true,
			Only: only, VocabFrom: filepath.Join(testenv.ModelsDir(t), "vocab", "ggml-vocab-llama-spm.gguf")}))
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		files[name] = b
	}
	fakeHub(t, map[string]*hubtest.Repo{
		"org/glm":   {Files: files},
		"org/heads": {Files: map[string][]byte{"mtp-glm-Q8_0.gguf": files["mtp-glm-Q8_0.gguf"]}},
	})
	t.Setenv("LLAMA_CACHE", t.TempDir())
	base := []string{"-c", "256", "-np", "1", "-t", "1", "-tb", "1"}

	c, err := parseFlags(append([]string{"-hf", "org/glm:Q8_0", "--spec-type", "draft-mtp"}, base...), noEnv, io.Discard)
	require.NoError(t, err)
	require.NoError(t, c.modelSource(context.Background(), io.Discard))
	assert.Equal(t, "glm-Q8_0.gguf", filepath.Base(c.opts.Model))
	assert.Equal(t, "mtp-glm-Q8_0.gguf", filepath.Base(c.opts.Engine.Speculative.DraftModel))
	assertDrafts(t, c.opts, "the head pulled beside the model drafts")

	c, err = parseFlags(append([]string{"-hf", "org/glm:Q8_0"}, base...), noEnv, io.Discard)
	require.NoError(t, err)
	require.NoError(t, c.modelSource(context.Background(), io.Discard))
	assert.Empty(t, c.opts.Engine.Speculative.DraftModel, "no head without draft-mtp")

	c, err = parseFlags(append([]string{"-m", filepath.Join(dir, "glm-Q8_0.gguf"), "-hfd", "org/heads"}, base...), noEnv, io.Discard)
	require.NoError(t, err)
	require.NoError(t, c.modelSource(context.Background(), io.Discard))
	assert.Equal(t, "mtp-glm-Q8_0.gguf", filepath.Base(c.opts.Engine.Speculative.DraftModel))
	assertDrafts(t, c.opts, "a draft repo's head drafts without --spec-type")
}
