package hub_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/hub"
	"github.com/x/llama/internal/hub/hubtest"
)

func TestParseOCIRef(t *testing.T) {
	for _, tc := range []struct {
		ref                       string
		registry, host, repo, tag string
		file                      string
	}{
		{"gemma3", hub.DefaultOCIRegistry, "", "ai/gemma3", "latest", "ai_gemma3_latest.gguf"},
		{"ai/smollm2:135M-Q4_0", hub.DefaultOCIRegistry, "", "ai/smollm2", "135M-Q4_0", "ai_smollm2_135M-Q4_0.gguf"},
		{"someone/model.v2:Q8_0", hub.DefaultOCIRegistry, "", "someone/model.v2", "Q8_0", "someone_model.v2_Q8_0.gguf"},
		{"127.0.0.1:5000/ai/tiny:q8", "http://127.0.0.1:5000", "127.0.0.1:5000", "ai/tiny", "q8", "127_0_0_1_5000_ai_tiny_q8.gguf"},
		{"localhost/tiny", "http://localhost", "localhost", "ai/tiny", "latest", "localhost_ai_tiny_latest.gguf"},
		{"registry.example/ns/m", "https://registry.example", "registry.example", "ns/m", "latest", "registry_example_ns_m_latest.gguf"},
	} {
		r, err := hub.ParseOCIRef(tc.ref)
		require.NoError(t, err, tc.ref)
		assert.Equal(t, hub.OCIRef{Registry: tc.registry, Host: tc.host, Repo: tc.repo, Tag: tc.tag}, r, tc.ref)
		assert.Equal(t, tc.file, r.FileName(), tc.ref)
	}
	for _, bad := range []string{"", "Upper/Case", "ai/m:bad tag", "ai/m:", "ai/../x", "ai/m@sha256:00", "/m", "ai/m:" + strings.Repeat("t", 200)} {
		_, err := hub.ParseOCIRef(bad)
		var e *hub.Error
		require.ErrorAs(t, err, &e, "%q", bad)
		assert.Equal(t, hub.CodeInvalid, e.Code, "%q", bad)
	}
}

// TestPullOCI pulls from a fake registry: the token challenge, the
// manifest's GGUF layer, the blob checked against its digest, resumed
// after a dropped connection, then found in the folder; a missing tag, a
// blob that does not match its digest, a malformed digest and a manifest
// without GGUF fail with their codes and leave no file.
func TestPullOCI(t *testing.T) {
	gguf := blob("model.gguf", 700_000)
	other := blob("other", 1000)
	reg := hubtest.NewRegistry(t, map[string]*hubtest.Image{
		"ai/tiny:q8":       {GGUF: gguf},
		"ai/tiny:latest":   {GGUF: gguf, MediaType: "application/vnd.example.gguf"},
		"ai/dropped:q8":    {GGUF: gguf, DropAfter: 300_000},
		"ai/corrupt:q8":    {GGUF: gguf, Digest: hubtest.Digest(other)},
		"ai/malformed:q8":  {GGUF: gguf, Digest: "sha256:xyz"},
		"ai/nogguf:latest": {GGUF: gguf, MediaType: "application/octet-stream"},
	})
	for _, tc := range []struct {
		name, ref   string
		wantCode    hub.Code
		wantMsg     string
		wantResumed bool
	}{
		{name: "tag", ref: "/ai/tiny:q8"},
		{name: "default tag, and a media type naming gguf", ref: "/tiny"},
		{name: "dropped connection: resumed", ref: "/ai/dropped:q8", wantResumed: true},
		{name: "missing tag", ref: "/ai/tiny:q4", wantCode: hub.CodeNotFound, wantMsg: "MANIFEST_UNKNOWN"},
		{name: "missing repo", ref: "/ai/none", wantCode: hub.CodeNotFound, wantMsg: "MANIFEST_UNKNOWN"},
		{name: "blob not matching its digest", ref: "/ai/corrupt:q8", wantCode: hub.CodeChecksum, wantMsg: "checksum mismatch"},
		{name: "malformed digest", ref: "/ai/malformed:q8", wantCode: hub.CodeInvalid, wantMsg: "invalid OCI digest"},
		{name: "no GGUF layer", ref: "/ai/nogguf", wantCode: hub.CodeNotFound, wantMsg: "no GGUF layer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var done, resumed bool
			before := len(reg.Requests())
			path, err := hub.PullOCI(context.Background(), reg.Host+tc.ref, hub.OCIOptions{Dir: dir, RetryDelay: -1,
				Progress: func(p hub.Progress) {
					done = done || (p.Done && p.Downloaded == int64(len(gguf)))
				}})
			if tc.wantCode != 0 {
				var e *hub.Error
				require.ErrorAs(t, err, &e)
				assert.Equal(t, tc.wantCode, e.Code, "%v", err)
				assert.Contains(t, err.Error(), tc.wantMsg)
				entries, _ := filepath.Glob(filepath.Join(dir, "*.gguf*"))
				assert.Empty(t, entries, "nothing is left behind")
				return
			}
			require.NoError(t, err)
			r, _ := hub.ParseOCIRef(reg.Host + tc.ref)
			assert.Equal(t, filepath.Join(dir, r.FileName()), path)
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, gguf, got)
			assert.True(t, done, "progress reported the whole file")
			reqs := reg.Requests()[before:]
			var paths []string
			for _, q := range reqs {
				paths = append(paths, q.Path)
				resumed = resumed || q.Range == "bytes=300000-"
			}
			assert.Contains(t, paths, "/token", "the token came from the challenge's realm")
			assert.Equal(t, tc.wantResumed, resumed, "%v", reqs)

			// Pulled again: the file is used as is, without the network.
			before = len(reg.Requests())
			again, err := hub.PullOCI(context.Background(), reg.Host+tc.ref, hub.OCIOptions{Dir: dir})
			require.NoError(t, err)
			assert.Equal(t, path, again)
			assert.Len(t, reg.Requests(), before)
		})
	}
	t.Run("offline", func(t *testing.T) {
		_, err := hub.PullOCI(context.Background(), reg.Host+"/ai/tiny:q8", hub.OCIOptions{Dir: t.TempDir(), Offline: true})
		var e *hub.Error
		require.True(t, errors.As(err, &e))
		assert.Equal(t, hub.CodeOffline, e.Code)
	})
}
