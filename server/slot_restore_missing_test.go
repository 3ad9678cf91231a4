package server

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSlotRestoreBadFile: restoring a file that is missing or not a slot
// file is the client's error (400), and the server keeps serving.
func TestSlotRestoreBadFile(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "junk.bin"), []byte("not a slot file"), 0o644))
	_, ts := newTestServer(t, Options{SlotSavePath: dir})
	for _, name := range []string{"missing.bin", "junk.bin"} {
		resp, err := http.Post(ts.URL+"/slots/0?action=restore", "application/json", strings.NewReader(`{"filename":"`+name+`"}`))
		require.NoError(t, err)
		var e struct {
			Error struct {
				Type string `json:"type"`
			} `json:"error"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
		resp.Body.Close()
		assert.Equal(t, 400, resp.StatusCode, name)
		assert.Equal(t, "invalid_request_error", e.Error.Type, name)
	}
	resp, err := http.Post(ts.URL+"/completion", "application/json", strings.NewReader(`{"prompt":"Once upon a time","n_predict":4}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
}
