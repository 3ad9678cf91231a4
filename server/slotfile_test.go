package server

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/x/llama/engine"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type slotCompletion struct {
	Content    string `json:"content"`
	Tokens     []int  `json:"tokens"`
	TokensEval int    `json:"tokens_evaluated"`
	Timings    struct {
		CacheN int `json:"cache_n"` // prompt tokens taken from the cache
	} `json:"timings"`
}

func slotGreedy(t *testing.T, url, prompt string) slotCompletion {
	t.Helper()
	var res slotCompletion
	require.Equal(t, http.StatusOK, xPost(t, url+"/completion", map[string]any{
		"prompt": prompt, "n_predict": 12, "temperature": 0, "cache_prompt": true, "id_slot": 0, "return_tokens": true,
	}, &res))
	return res
}

func TestSlotSaveRestore(t *testing.T) {
	dir := t.TempDir()
	// Without the RAM prompt cache, so that an erased slot stays cold.
	_, hs := newTestServer(t, Options{SlotSavePath: dir, Engine: engine.Options{NoPromptCache: true}})
	url := hs.URL
	const prompt = "Once upon a time, there was a little"

	// Uninterrupted: a turn, then its continuation reusing the cache.
	first := slotGreedy(t, url, prompt)
	require.NotEmpty(t, first.Content)
	next := prompt + first.Content + " The"
	want := slotGreedy(t, url, next)
	require.Greater(t, want.Timings.CacheN, 0, "the continuation reuses the slot's cache")

	// Interrupted: the same first turn, saved, erased and restored.
	again := slotGreedy(t, url, prompt)
	require.Equal(t, first.Content, again.Content)
	var saved map[string]any
	require.Equal(t, http.StatusOK, xPost(t, url+"/slots/0?action=save", map[string]any{"filename": "slot0.bin"}, &saved))
	nSaved, _ := saved["n_saved"].(float64)
	assert.Greater(t, nSaved, 0.0)
	st, err := os.Stat(filepath.Join(dir, "slot0.bin"))
	require.NoError(t, err)
	assert.Greater(t, st.Size(), int64(0))

	var erased map[string]any
	require.Equal(t, http.StatusOK, xPost(t, url+"/slots/0?action=erase", map[string]any{}, &erased))
	assert.Equal(t, nSaved, erased["n_erased"])

	var restored map[string]any
	require.Equal(t, http.StatusOK, xPost(t, url+"/slots/0?action=restore", map[string]any{"filename": "slot0.bin"}, &restored))
	assert.Equal(t, nSaved, restored["n_restored"])

	got := slotGreedy(t, url, next)
	assert.Equal(t, want.Content, got.Content, "same continuation as without the interruption")
	assert.Equal(t, want.Tokens, got.Tokens)
	assert.Equal(t, want.Timings.CacheN, got.Timings.CacheN, "the restored cache is reused as the live one was")
	assert.Equal(t, want.TokensEval, got.TokensEval)

	// Erasing without restoring loses the cache: the same text, recomputed.
	require.Equal(t, http.StatusOK, xPost(t, url+"/slots/0?action=erase", map[string]any{}, nil))
	cold := slotGreedy(t, url, next)
	assert.Equal(t, want.Content, cold.Content)
	assert.Equal(t, 0, cold.Timings.CacheN)

	// File names must stay inside the save folder.
	for _, name := range []string{"../x", "/abs", "a/b", "", ".."} {
		var e errorBody
		for _, action := range []string{"save", "restore"} {
			assert.Equal(t, http.StatusBadRequest, xPost(t, url+"/slots/0?action="+action, map[string]any{"filename": name}, &e), "%s %q", action, name)
		}
	}
	_, err = os.Stat(filepath.Join(filepath.Dir(dir), "x"))
	assert.True(t, os.IsNotExist(err), "nothing written outside the folder")
	var e errorBody
	assert.NotEqual(t, http.StatusOK, xPost(t, url+"/slots/0?action=restore", map[string]any{"filename": "missing.bin"}, &e))
	assert.NotEmpty(t, e.Error.Message)
	assert.Equal(t, http.StatusBadRequest, xPost(t, url+"/slots/0?action=fly", map[string]any{}, &e))
	assert.Equal(t, http.StatusBadRequest, xPost(t, url+"/slots/9?action=erase", map[string]any{}, &e))
}
