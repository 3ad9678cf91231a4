package engine

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/sampling"
)

// TestDefaultSampleThreads: SampleThreads 0 samples a step's rows at once
// only where the model runs on a GPU; a count given is kept, and a
// negative one is GOMAXPROCS wherever the model runs.
func TestDefaultSampleThreads(t *testing.T) {
	for _, tc := range []struct {
		name  string
		n     int
		onGPU bool
		procs int
		want  int
	}{
		{"default on a CPU", 0, false, 16, 1},
		{"default on a GPU", 0, true, 16, 16},
		{"default on a GPU, one P", 0, true, 1, 1},
		{"one, on a GPU", 1, true, 16, 1},
		{"two, on a CPU", 2, false, 16, 2},
		{"negative on a CPU", -1, false, 2, 2},
		{"negative on a GPU", -3, true, 8, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, DefaultSampleThreads(tc.n, tc.onGPU, tc.procs))
		})
	}
}

// TestBackendSamplingMode: which requests sample on the backend by mode,
// beyond those that ask.
func TestBackendSamplingMode(t *testing.T) {
	for _, tc := range []struct {
		mode  BackendSamplingMode
		onGPU bool
		want  bool
	}{
		{BackendSamplingAuto, false, false},
		{BackendSamplingAuto, true, true},
		{BackendSamplingAsked, false, false},
		{BackendSamplingAsked, true, false},
		{BackendSamplingAlways, false, true},
		{BackendSamplingAlways, true, true},
	} {
		assert.Equal(t, tc.want, tc.mode.backendForAll(tc.onGPU), "mode %d, on a GPU %v", tc.mode, tc.onGPU)
	}
}

// TestEngineDefaultsOnCPU: on a model that runs on the CPU the default
// engine samples a step's rows one after another and on the CPU, as
// before; a request sampled on the backend because the engine says so
// (BackendSamplingAlways, what a GPU model gets by default) gives the
// greedy tokens CPU sampling gives, and several at once give the tokens
// each gives alone.
func TestEngineDefaultsOnCPU(t *testing.T) {
	m := engStoriesModel(t)
	require.False(t, m.OnGPU(), "the test models run on the CPU")
	prompt := engTokenize(t, m, "Once upon a time", true)
	run := func(o Options) (texts []string, presampled, backend int) {
		o.Context, o.Parallel = llama.ContextOptions{ContextSize: 4 * 256, Threads: 1}, 4
		e, err := New(m, o)
		require.NoError(t, err)
		defer e.Close()
		texts = make([]string, 4)
		var wg sync.WaitGroup
		for i := range texts {
			tk := engGreedyTask(prompt, 24)
			if i%2 == 1 {
				tk.Params = sampling.Defaults()
				tk.Params.Temperature, tk.Params.TopK = 0, 1
			}
			wg.Go(func() { texts[i] = engRun(t, e, tk).text })
		}
		wg.Wait()
		require.NoError(t, e.do(func() { presampled, backend = e.presampled, e.nBackend }))
		return texts, presampled, backend
	}
	want, pre, backend := run(Options{})
	assert.Zero(t, pre, "the default samples one row after another on a CPU")
	assert.Zero(t, backend, "and on the CPU")
	for i := 1; i < len(want); i++ {
		require.Equal(t, want[0], want[i], "greedy: the same text")
	}
	got, _, backend := run(Options{BackendSampling: BackendSamplingAlways})
	assert.Equal(t, 4, backend, "every request sampled on the backend")
	assert.Equal(t, want, got)
	got, _, backend = run(Options{BackendSampling: BackendSamplingAsked})
	assert.Zero(t, backend)
	assert.Equal(t, want, got)
}
