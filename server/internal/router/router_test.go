package router

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/engine"
)

// fakeInst is an Instance that loads nothing: the router's lifecycle is
// what these tests exercise (the server's tests run it with real models).
type fakeInst struct {
	name   string
	closed atomic.Int32
	rpc    atomic.Pointer[error]
}

func (f *fakeInst) Close() { f.closed.Add(1) }
func (f *fakeInst) Metrics() engine.Metrics {
	return engine.Metrics{PromptTokensTotal: 1, DecodeTotal: 1}
}
func (f *fakeInst) RPCErr() error {
	if p := f.rpc.Load(); p != nil {
		return *p
	}
	return nil
}

// opener records the specs Open was called with.
type opener struct {
	mu    sync.Mutex
	specs []Spec
	insts []*fakeInst
}

func (o *opener) open(_ context.Context, sp Spec) (*fakeInst, *Info, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.specs = append(o.specs, sp)
	if strings.HasPrefix(sp.Name, "bad") {
		return nil, nil, errors.New("no such model")
	}
	f := &fakeInst{name: sp.Name}
	o.insts = append(o.insts, f)
	return f, &Info{NCtxSlot: 128}, nil
}

func (o *opener) names() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for _, s := range o.specs {
		out = append(out, s.Name)
	}
	return out
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// touch creates the (empty) files of a models folder.
func touch(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		p := filepath.Join(dir, n)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, nil, 0o644))
	}
}

func TestCatalog(t *testing.T) {
	dir := t.TempDir()
	touch(t, dir, "a.gguf", "mmproj-a.gguf", "notes.txt",
		"split/m-00002-of-00002.gguf", "split/m-00001-of-00002.gguf",
		"vis/mmproj-f16.gguf", "vis/model.gguf", "empty/readme.md")
	preset := filepath.Join(dir, "models.ini")
	require.NoError(t, os.WriteFile(preset, []byte(`version = 1
; a comment
[*]
c = 512

[a]
np = 2
--chat-template = chatml
sleep_idle_seconds = 5

[hf]
hf-repo = org/repo:Q8_0
hf-file = "x.gguf"
load-on-startup = true
embedding = 1
`), 0o644))
	r, err := New(context.Background(), Config[*fakeInst]{Dir: dir, Preset: preset, Open: (&opener{}).open, Log: discard()})
	require.NoError(t, err)
	require.True(t, r.Multi())

	var ids []string
	for _, c := range r.List().Data {
		ids = append(ids, c.ID)
	}
	assert.Equal(t, []string{"a", "split", "vis", "hf"}, ids, "the folder's models in its order, then the preset's others by name")

	for _, tc := range []struct {
		name     string
		path     string
		settings Settings
		startup  bool
	}{
		{"a", filepath.Join(dir, "a.gguf"), Settings{ContextSize: new(512), Parallel: new(2), ChatTemplate: new("chatml"), SleepIdleSeconds: new(5)}, false},
		{"split", filepath.Join(dir, "split", "m-00001-of-00002.gguf"), Settings{}, false},
		{"vis", filepath.Join(dir, "vis", "model.gguf"), Settings{}, false},
		{"hf", "", Settings{ContextSize: new(512), Embedding: new(true)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, msg := r.Lookup(tc.name)
			require.NotNil(t, e, msg)
			v := r.View(e)
			assert.Equal(t, tc.path, v.Path)
			assert.Equal(t, tc.settings, v.Settings)
			assert.Equal(t, Unloaded, v.State)
			assert.Equal(t, tc.startup, e.loadOnStartup)
		})
	}
	e, _ := r.Lookup("hf")
	assert.Equal(t, "org/repo:Q8_0", e.hfRepo)
	assert.Equal(t, "x.gguf", e.hf.File)
}

func TestCatalogErrors(t *testing.T) {
	for _, tc := range []struct {
		name, preset, want string
	}{
		{"no model", "[x]\nc = 1\n", "[x] has no model path or hf-repo"},
		{"not an integer", "[x]\nmodel = /m.gguf\nc = big\n", `c: "big" is not an integer`},
		{"bad header", "[x\n", "line 1: bad section header"},
		{"no equals", "[x]\njunk\n", "line 2: expected key = value"},
		{"unknown template", "[x]\nmodel = /m.gguf\nchat-template = nonsense\n", "unknown chat template"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "models.ini")
			require.NoError(t, os.WriteFile(p, []byte(tc.preset), 0o644))
			_, err := New(context.Background(), Config[*fakeInst]{Preset: p, Open: (&opener{}).open, Log: discard()})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := New(context.Background(), Config[*fakeInst]{Dir: filepath.Join(t.TempDir(), "missing"), Log: discard()})
	assert.ErrorContains(t, err, "server: models dir:")
}

func TestLookup(t *testing.T) {
	single, err := New(context.Background(), Config[*fakeInst]{Model: "/m.gguf", Aliases: []string{"x", "y"}, Log: discard()})
	require.NoError(t, err)
	dir := t.TempDir()
	touch(t, dir, "a.gguf", "b.gguf")
	multi, err := New(context.Background(), Config[*fakeInst]{Dir: dir, Log: discard()})
	require.NoError(t, err)
	for _, tc := range []struct {
		r         *Router[*fakeInst]
		model     string
		want, msg string
	}{
		{single, "", "x", ""},
		{single, "anything", "x", ""},
		{multi, "b", "b", ""},
		{multi, "", "", "model name is missing from the request"},
		{multi, "c", "", "model 'c' not found"},
	} {
		e, msg := tc.r.Lookup(tc.model)
		assert.Equal(t, tc.msg, msg, tc.model)
		if tc.want == "" {
			assert.Nil(t, e)
			continue
		}
		require.NotNil(t, e)
		assert.Equal(t, tc.want, tc.r.View(e).Name)
	}
	card := single.List()
	assert.Equal(t, []string{"x", "y"}, card.Data[0].Aliases)
	assert.Nil(t, card.Data[0].Status, "no status out of router mode")
	assert.Len(t, card.Models, 1, "Ollama's list beside OpenAI's out of router mode")
}

// TestLifecycle walks a model through loads, eviction at Max, unloads of
// busy and idle instances, a failed load, an RPC failure and a shutdown.
func TestLifecycle(t *testing.T) {
	dir := t.TempDir()
	touch(t, dir, "a.gguf", "b.gguf", "bad.gguf")
	op := &opener{}
	r, err := New(context.Background(), Config[*fakeInst]{Dir: dir, Max: 1, Open: op.open, Log: discard()})
	require.NoError(t, err)
	events, cancel := r.Subscribe()
	defer cancel()
	ctx := context.Background()
	a, _ := r.Lookup("a")
	b, _ := r.Lookup("b")

	// Without a load: refused, and nothing starts loading.
	_, _, err = r.AcquireLoaded(a)
	require.ErrorIs(t, err, ErrNotLoaded)
	assert.Equal(t, Unloaded, r.View(a).State)

	// A load on demand; a second user shares it, as does one that asks
	// for a loaded model only.
	ia, relA, err := r.Acquire(ctx, a)
	require.NoError(t, err)
	ia2, relA2, err := r.Acquire(ctx, a)
	require.NoError(t, err)
	assert.Same(t, ia, ia2)
	relA2()
	relA2() // more calls do nothing
	ia2, relA2, err = r.AcquireLoaded(a)
	require.NoError(t, err)
	assert.Same(t, ia, ia2)
	relA2()
	assert.Equal(t, Loaded, r.View(a).State)

	// Max 1 with a busy: b loads anyway.
	ib, relB, err := r.Acquire(ctx, b)
	require.NoError(t, err)
	relB()
	relA()
	assert.Equal(t, []string{"a", "b"}, op.names())

	// An unload of an idle model closes it at once.
	require.NoError(t, r.Unload(ctx, b))
	assert.Equal(t, int32(1), ib.closed.Load())
	assert.EqualError(t, r.Unload(ctx, b), "model is not loaded")

	// Max 1: loading b unloads a, the least recently used idle model.
	ib, relB, err = r.Acquire(ctx, b)
	require.NoError(t, err)
	assert.Equal(t, Unloaded, r.View(a).State)
	assert.Equal(t, int32(1), ia.closed.Load())

	// An unload of a busy model closes it at its last release.
	require.NoError(t, r.Unload(ctx, b))
	assert.Equal(t, Unloaded, r.View(b).State)
	assert.Equal(t, int32(0), ib.closed.Load())
	relB()
	assert.Equal(t, int32(1), ib.closed.Load())

	// The counters survive unloads; the gauges' window moves at each scrape.
	now, prev := r.Scrape(b)
	assert.Equal(t, int64(2), now.PromptTokensTotal)
	assert.Equal(t, int64(0), prev.PromptTokensTotal)
	_, prev = r.Scrape(b)
	assert.Equal(t, int64(2), prev.PromptTokensTotal)

	// A failed load is the caller's error, and the card says so.
	bad, _ := r.Lookup("bad")
	_, _, err = r.Acquire(ctx, bad)
	assert.EqualError(t, err, "no such model")
	assert.EqualError(t, r.View(bad).LoadErr, "no such model")
	for _, c := range r.List().Data {
		if c.ID == "bad" {
			assert.Equal(t, &cardStatus{Value: "unloaded", Failed: true}, c.Status)
		}
	}

	// An instance whose RPC worker failed is loaded again.
	ia, relA, err = r.Acquire(ctx, a)
	require.NoError(t, err)
	relA()
	rpcErr := errors.New("rpc worker gone")
	ia.rpc.Store(&rpcErr)
	_, _, err = r.AcquireLoaded(a)
	require.ErrorIs(t, err, ErrNotLoaded, "a failed worker unloads the model")
	assert.Equal(t, Unloaded, r.View(a).State)
	ia3, relA, err := r.Acquire(ctx, a)
	require.NoError(t, err)
	assert.NotSame(t, ia, ia3)

	// Stop refuses new users; Drain closes what is left, held or not.
	require.True(t, r.Stop())
	require.False(t, r.Stop())
	_, _, err = r.Acquire(ctx, a)
	assert.ErrorIs(t, err, ErrClosed)
	done, stop := context.WithCancel(ctx)
	stop()
	r.Drain(done)
	assert.Equal(t, int32(1), ia3.closed.Load())
	relA()
	assert.Equal(t, int32(1), ia3.closed.Load(), "closed once")

	// The events: each load went loading → loaded (the first with the
	// card), each unload → unloaded.
	var got []string
	for len(events) > 0 {
		ev := <-events
		got = append(got, ev.Model+":"+ev.Data.(map[string]any)["status"].(string))
	}
	assert.Equal(t, []string{
		"a:loading", "a:loaded", "b:loading", "b:loaded", "b:unloaded",
		"a:unloaded", "b:loading", "b:loaded", "b:unloaded",
		"bad:loading", "bad:unloaded",
		"a:loading", "a:loaded", "a:unloaded", "a:loading", "a:loaded",
	}, got)
}

// FuzzReadPreset: any file reads without a panic into lower-cased keys
// without leading dashes.
func FuzzReadPreset(f *testing.F) {
	for _, s := range []string{"", "[*]\nc = 1\n", "[a]\n--Model = \"/m.gguf\"\n", "[x\n", "k\n", "=\n[]\n", "; c\n# c\n[ a ]\nA=B=C\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		p := filepath.Join(t.TempDir(), "p.ini")
		require.NoError(t, os.WriteFile(p, []byte(data), 0o644))
		secs, err := readPreset(p)
		if err != nil {
			return
		}
		for _, kv := range secs {
			for k := range kv {
				assert.Equal(t, strings.ToLower(k), k)
				assert.False(t, strings.HasPrefix(k, "-"), "%q", k)
			}
		}
	})
}
