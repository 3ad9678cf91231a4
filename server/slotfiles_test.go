package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slotAction posts a slot action and returns the status and the body.
func slotAction(t *testing.T, url string, slot int, action, filename string) (int, string) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"filename": filename})
	require.NoError(t, err)
	resp, err := http.Post(url+"/slots/"+string(rune('0'+slot))+"?action="+action, "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, buf.String()
}

// Slot file names and the files in the folder: client mistakes are 4xx,
// messages never show a server path, and no symlink is followed.
func TestSlotFilesHostileNames(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "victim.txt")
	require.NoError(t, os.WriteFile(outside, []byte("keep me"), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "link.bin")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "adir"), 0o755))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo.bin"), 0o644))
	_, ts := newTestServer(t, Options{SlotSavePath: dir})
	code, out := postJSON(t, ts.URL+"/completion", map[string]any{"prompt": "Once upon a time", "n_predict": 4, "id_slot": 0})
	require.Equal(t, http.StatusOK, code, "%v", out)

	cases := []struct {
		name, action, file string
		status             int
	}{
		{"spaces only", "save", "   ", 400},
		{"leading space", "save", " a.bin", 400},
		{"tab", "save", "a\tb.bin", 400},
		{"bidi override", "save", "evil\u202Etxt.bin", 400},
		{"bidi isolate", "restore", "a\u2066b.bin", 400},
		{"zero width", "save", "a\u200Bb.bin", 400},
		{"byte order mark", "save", "\uFEFFa.bin", 400},
		{"fullwidth slash", "save", "a\uFF0Fb.bin", 400},
		{"directory", "save", "adir", 400},
		{"directory restore", "restore", "adir", 400},
		{"symlink save", "save", "link.bin", 400},
		{"symlink restore", "restore", "link.bin", 400},
		{"fifo save", "save", "fifo.bin", 400},
		{"fifo restore", "restore", "fifo.bin", 400},
		{"missing", "restore", "missing.bin", 400},
		{"traversal", "save", "../x.bin", 400},
		{"plain", "save", "good.bin", 200},
		{"plain restore", "restore", "good.bin", 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body := slotAction(t, ts.URL, 0, c.action, c.file)
			assert.Equal(t, c.status, code, body)
			assert.NotContains(t, body, dir, "the answer shows a server path")
			if c.status != 200 {
				var e errorBody
				require.NoError(t, json.Unmarshal([]byte(body), &e), body)
				assert.Equal(t, c.status, e.Error.Code)
				assert.NotEmpty(t, e.Error.Message)
			}
		})
	}
	got, err := os.ReadFile(outside)
	require.NoError(t, err)
	assert.Equal(t, "keep me", string(got), "saving followed the symlink")
	st, err := os.Lstat(filepath.Join(dir, "link.bin"))
	require.NoError(t, err)
	assert.NotZero(t, st.Mode()&os.ModeSymlink)
}

// Save, restore and erase on a slot that is processing a task wait for it
// to go idle and then succeed; none is a 500.
func TestSlotFilesBusySlot(t *testing.T) {
	dir := t.TempDir()
	_, ts := newTestServer(t, Options{SlotSavePath: dir})
	code, body := slotAction(t, ts.URL, 0, "save", "seed.bin")
	require.Equal(t, http.StatusOK, code, body)

	for _, action := range []string{"save", "restore", "erase"} {
		t.Run(action, func(t *testing.T) {
			data, err := json.Marshal(map[string]any{"prompt": "Once upon a time", "n_predict": 200, "id_slot": 0, "stream": true, "ignore_eos": true})
			require.NoError(t, err)
			resp, err := http.Post(ts.URL+"/completion", "application/json", bytes.NewReader(data))
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			sc := bufio.NewScanner(resp.Body)
			require.True(t, sc.Scan(), "first event") // the slot is now processing
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { // keep reading so the generation goes on
				defer wg.Done()
				for sc.Scan() {
				}
			}()
			code, body := slotAction(t, ts.URL, 0, action, "seed.bin")
			assert.Equal(t, http.StatusOK, code, body)
			assert.False(t, strings.Contains(body, "server_error"), body)
			wg.Wait()
		})
	}
}

// 36 slot actions at once, while both slots generate: every one is
// answered 200 (or 409 if a slot stayed busy too long), never 500.
func TestSlotFilesConcurrentActions(t *testing.T) {
	dir := t.TempDir()
	_, ts := newTestServer(t, Options{SlotSavePath: dir})
	for slot := range 2 {
		code, body := slotAction(t, ts.URL, slot, "save", fmt.Sprintf("s%d.bin", slot))
		require.Equal(t, http.StatusOK, code, body)
	}
	var gen sync.WaitGroup
	for slot := range 2 {
		gen.Add(1)
		go func() {
			defer gen.Done()
			for range 3 {
				data, _ := json.Marshal(map[string]any{"prompt": "Once upon a time", "n_predict": 64, "id_slot": slot})
				resp, err := http.Post(ts.URL+"/completion", "application/json", bytes.NewReader(data))
				if assert.NoError(t, err) {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}()
	}
	actions := []string{"save", "restore", "erase"}
	codes := make([]int, 36)
	bodies := make([]string, 36)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slot := i % 2
			codes[i], bodies[i] = slotAction(t, ts.URL, slot, actions[i%3], fmt.Sprintf("s%d.bin", slot))
		}()
	}
	wg.Wait()
	gen.Wait()
	for i, code := range codes {
		assert.Contains(t, []int{http.StatusOK, http.StatusConflict}, code, "%s: %s", actions[i%3], bodies[i])
	}
	left, err := filepath.Glob(filepath.Join(dir, ".slot-*"))
	require.NoError(t, err)
	assert.Empty(t, left, "temporary files left in the slot folder")
}
