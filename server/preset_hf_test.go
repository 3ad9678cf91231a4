package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/hub/hubtest"
	"github.com/x/llama/internal/testenv"
)

// A preset section may name a Hugging Face repo (hf-repo, hf-file,
// hf-token) instead of a model path: the model is pulled from the hub
// ($MODEL_ENDPOINT, here a fake one on 127.0.0.1) into the hub cache
// ($LLAMA_CACHE) when it loads.
func TestServerRouterPresetHF(t *testing.T) {
	model, err := os.ReadFile(testenv.Model(t, "stories260K.gguf"))
	require.NoError(t, err)
	h := hubtest.New(t, map[string]*hubtest.Repo{
		"tiny/stories": {Files: map[string][]byte{"stories260K-Q8_0.gguf": model}},
		"tiny/gated":   {Files: map[string][]byte{"s-F32.gguf": model}, Gated: true},
	})
	cache := t.TempDir()
	t.Setenv("MODEL_ENDPOINT", h.URL)
	t.Setenv("LLAMA_CACHE", cache)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HUB_OFFLINE", "")
	ini := filepath.Join(t.TempDir(), "models.ini")
	require.NoError(t, os.WriteFile(ini, []byte(`version = 1
[*]
c = 256

[stories]
hf-repo = tiny/stories:Q8_0
load-on-startup = true

[gated]
hf-repo = tiny/gated
hf-file = s-F32.gguf
hf-token = `+hubtest.Token+`

[refused]
hf = tiny/gated
`), 0o644))
	_, ts := newTestServer(t, Options{ModelsPreset: ini})
	require.Eventually(t, func() bool { return modelStatuses(t, ts.URL)["stories"] == "loaded" }, 10*time.Second, 20*time.Millisecond)
	for _, tc := range []struct {
		model string
		code  int
		path  string
	}{
		{"stories", 200, filepath.Join("models--tiny--stories", "snapshots")},
		{"refused", 500, ""}, // no token: the load fails with the hub's 401
		// With the token. (Once cached, the model loads even without a
		// token: when the hub refuses the listing, the cache answers, as
		// with llama.cpp.)
		{"gated", 200, filepath.Join("models--tiny--gated", "snapshots")},
	} {
		t.Run(tc.model, func(t *testing.T) {
			code, out := callJSON(t, "POST", ts.URL+"/completion", map[string]any{"model": tc.model, "prompt": "Once upon a time", "n_predict": 8, "temperature": 0})
			if tc.code != 200 {
				assert.NotEqual(t, 200, code, "%v", out)
				assert.Contains(t, fmtJSON(out), "401")
				return
			}
			require.Equal(t, 200, code, "%v", out)
			assert.True(t, strings.HasPrefix(out["content"].(string), ", there was a little girl"), out["content"])
			_, props := callJSON(t, "GET", ts.URL+"/props?model="+tc.model, nil)
			p, _ := props["model_path"].(string)
			assert.True(t, strings.HasPrefix(p, filepath.Join(cache, tc.path)), p)
		})
	}
}

func fmtJSON(v any) string { b, _ := json.Marshal(v); return string(b) }
