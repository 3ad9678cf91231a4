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

	"github.com/x/llama/engine"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/hub/hubtest"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/server"
)

// pullHF serves -hf's model under the repo's name, and starts router mode
// for a preset repo; offline, it uses the cache.
func TestPullHF(t *testing.T) {
	model, err := os.ReadFile(testenv.Model(t, "stories260K.gguf"))
	require.NoError(t, err)
	h := hubtest.New(t, map[string]*hubtest.Repo{
		"tiny/stories": {Files: map[string][]byte{"stories260K-Q8_0.gguf": model}},
		"tiny/preset":  {Files: map[string][]byte{"preset.ini": []byte("[stories]\nhf-repo = tiny/stories\n")}},
	})
	t.Setenv("MODEL_ENDPOINT", h.URL)
	t.Setenv("LLAMA_CACHE", t.TempDir())
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HUB_OFFLINE", "")
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
			o := server.Options{Alias: tc.alias, Engine: engine.Options{Threads: 1, ThreadsBatch: 1, CtxSize: 256}}
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

// TestCacheList checks -cl: the models pulled into the hub cache, listed
// as llama-server lists them; an empty or missing cache lists none.
func TestCacheList(t *testing.T) {
	model, err := os.ReadFile(testenv.Model(t, "stories260K.gguf"))
	require.NoError(t, err)
	h := hubtest.New(t, map[string]*hubtest.Repo{
		"tiny/stories": {Files: map[string][]byte{"stories260K-Q8_0.gguf": model, "stories260K-F16.gguf": model}},
		"tiny/other":   {Files: map[string][]byte{"other-Q4_0.gguf": model}},
	})
	t.Setenv("MODEL_ENDPOINT", h.URL)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HUB_OFFLINE", "")
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
	h := hubtest.New(t, map[string]*hubtest.Repo{
		"tiny/draft": {Files: map[string][]byte{"draft-Q8_0.gguf": model, "other.gguf": model}},
	})
	t.Setenv("MODEL_ENDPOINT", h.URL)
	t.Setenv("LLAMA_CACHE", t.TempDir())
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HUB_OFFLINE", "")
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
			require.NoError(t, c.unsupportedUse())
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
	srv, err := server.New(context.Background(), c.opts)
	require.NoError(t, err)
	defer srv.Close()
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/completion", strings.NewReader(`{"prompt":"Once upon a time","n_predict":16,"temperature":0}`)))
	require.Equal(t, 200, rec.Code, rec.Body.String())
	var r struct {
		Timings struct {
			DraftN int `json:"draft_n"`
		} `json:"timings"`
	}
	require.NoError(t, jsonDecode(rec.Body, &r))
	assert.Positive(t, r.Timings.DraftN, "the pulled draft model drafts")
}
