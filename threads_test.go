//go:build linux

package llama_test

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
)

// task is one of the process's threads as /proc tells it.
type task struct {
	tid          string
	cpus         string // Cpus_allowed_list
	policy, prio int    // scheduling policy and real-time priority
	cpu          time.Duration
}

func tasks(t *testing.T) []task {
	t.Helper()
	dirs, err := os.ReadDir("/proc/self/task")
	require.NoError(t, err)
	var out []task
	for _, d := range dirs {
		stat, err1 := os.ReadFile("/proc/self/task/" + d.Name() + "/stat")
		status, err2 := os.ReadFile("/proc/self/task/" + d.Name() + "/status")
		if err1 != nil || err2 != nil {
			continue // ended meanwhile
		}
		// Fields after the command's closing parenthesis, from the state
		// (field 3): utime 14, stime 15, rt_priority 40, policy 41.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		num := func(field int) int { n, _ := strconv.Atoi(f[field-3]); return n }
		tk := task{tid: d.Name(), prio: num(40), policy: num(41),
			cpu: time.Duration(num(14)+num(15)) * time.Second / 100} // USER_HZ
		for line := range strings.Lines(string(status)) {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				tk.cpus = strings.TrimSpace(v)
			}
		}
		out = append(out, tk)
	}
	return out
}

// on returns the tasks whose CPUs are exactly cpus.
func on(ts []task, cpus string) []task {
	var out []task
	for _, tk := range ts {
		if tk.cpus == cpus {
			out = append(out, tk)
		}
	}
	return out
}

// TestThreadPoolOptions: the pools' threads run where and how the options
// say, a decode computes what it computes without them, and the calling
// goroutine's thread gets its own scheduling back after every decode.
func TestThreadPoolOptions(t *testing.T) {
	m := loadModel(t, "llama-2-tiny-random.gguf")
	decode := promptDecoder(t, m)
	ref, err := m.NewContext(llama.ContextOptions{ContextSize: 256, Threads: 2})
	require.NoError(t, err)
	want := decode(ref)
	require.NoError(t, ref.Close())

	last := runtime.NumCPU() - 1
	lastS := strconv.Itoa(last)
	canRT := os.Geteuid() == 0 // CAP_SYS_NICE, as the machines these tests run on grant it
	two := min(2, runtime.NumCPU())
	for _, tc := range []struct {
		name           string
		threads, batch int
		opts           llama.ContextOptions
		// The pool's workers: on CPU last, or (policy != 0) of policy
		// and prio.
		workers      int
		policy, prio int
	}{
		{"strict CPU", 2, 2, llama.ContextOptions{ThreadPool: llama.ThreadPoolOptions{CPUs: []int{last}, StrictCPU: true}}, 1, 0, 0},
		{"CPU set", 3, 3, llama.ContextOptions{ThreadPool: llama.ThreadPoolOptions{CPUs: []int{last}}}, 2, 0, 0},
		{"low priority", 2, 2, llama.ContextOptions{ThreadPool: llama.ThreadPoolOptions{Priority: llama.PriorityLow}}, 1, 3, 0},
		{"medium priority", two, two, llama.ContextOptions{ThreadPool: llama.ThreadPoolOptions{Priority: llama.PriorityMedium}}, two - 1, 1, 40},
		{"high priority, strict", two, two, llama.ContextOptions{ThreadPool: llama.ThreadPoolOptions{Priority: llama.PriorityHigh, CPUs: []int{0, last}, StrictCPU: true}}, two - 1, 1, 80},
		// Only the batch pool is placed: the generation pool has no
		// worker (one thread), the batch pool one.
		{"batch pool", 1, 2, llama.ContextOptions{ThreadPoolBatch: &llama.ThreadPoolOptions{CPUs: []int{last}, Poll: -1}}, 1, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			o.ContextSize, o.Threads, o.ThreadsBatch = 256, tc.threads, tc.batch
			workers := func() []task {
				var out []task
				for _, tk := range tasks(t) {
					if (tc.policy == 0 && tk.cpus == lastS) || (tc.policy != 0 && tk.policy == tc.policy) {
						out = append(out, tk)
					}
				}
				return out
			}
			before := len(workers())
			c, err := m.NewContext(o)
			if tc.policy == 1 && !canRT {
				var le *llama.Error
				require.ErrorAs(t, err, &le)
				assert.Equal(t, llama.CodeInvalid, le.Code)
				assert.Contains(t, err.Error(), "CAP_SYS_NICE")
				return
			}
			require.NoError(t, err)
			defer c.Close()
			for range 3 {
				assert.Equal(t, want, decode(c))
			}
			ts := workers()
			require.Len(t, ts, before+tc.workers, "%v", ts)
			for _, tk := range ts {
				assert.Equal(t, tc.policy, tk.policy, "thread %s", tk.tid)
				assert.Equal(t, tc.prio, tk.prio, "thread %s", tk.tid)
			}
			// Nothing but the workers has another policy or CPU last
			// alone: the decodes' calling threads were restored.
			n := 0
			for _, tk := range tasks(t) {
				if tk.policy != 0 || tk.cpus == lastS {
					n++
				}
			}
			assert.Equal(t, tc.workers, n, "%v", tasks(t))
		})
	}
}

// TestThreadPoolRealtimeRefused: real-time threads that would share a CPU
// spin waiting for each other for ever; such a pool is refused.
func TestThreadPoolRealtimeRefused(t *testing.T) {
	m := loadModel(t, "llama-2-tiny-random.gguf")
	for _, o := range []llama.ContextOptions{
		{Threads: 2, ThreadPool: llama.ThreadPoolOptions{Priority: llama.PriorityMedium, CPUs: []int{0}}},
		{Threads: 2, ThreadPool: llama.ThreadPoolOptions{Priority: llama.PriorityRealtime, CPUs: []int{0, 0}, StrictCPU: true}},
		{Threads: runtime.NumCPU() + 1, ThreadPool: llama.ThreadPoolOptions{Priority: llama.PriorityHigh}},
		{Threads: 1, ThreadsBatch: 2, ThreadPoolBatch: &llama.ThreadPoolOptions{Priority: llama.PriorityHigh, CPUs: []int{0}}},
	} {
		o.ContextSize = 256
		_, err := m.NewContext(o)
		var le *llama.Error
		require.ErrorAs(t, err, &le, "%+v", o)
		assert.Equal(t, llama.CodeInvalid, le.Code)
		assert.Contains(t, err.Error(), "wait for each other")
	}
}

// TestThreadPoolPollNone: with no polling the workers sleep as soon as a
// decode ends; with ggml's default they spin for a while first.
func TestThreadPoolPollNone(t *testing.T) {
	m := loadModel(t, "llama-2-tiny-random.gguf")
	last := runtime.NumCPU() - 1
	lastS := strconv.Itoa(last)
	spin := func(poll int) time.Duration {
		before := map[string]bool{}
		for _, tk := range on(tasks(t), lastS) {
			before[tk.tid] = true
		}
		c, err := m.NewContext(llama.ContextOptions{ContextSize: 256, Threads: 2,
			ThreadPool: llama.ThreadPoolOptions{CPUs: []int{last}, Poll: poll}})
		require.NoError(t, err)
		defer c.Close()
		b := llama.NewBatch(1, 1)
		require.NoError(t, b.Add(1, 0, 0, true))
		require.NoError(t, c.Decode(context.Background(), b))
		var worker string
		for _, tk := range on(tasks(t), lastS) {
			if !before[tk.tid] {
				worker = tk.tid
			}
		}
		require.NotEmpty(t, worker)
		cpu := func() time.Duration {
			for _, tk := range tasks(t) {
				if tk.tid == worker {
					return tk.cpu
				}
			}
			return 0
		}
		start := cpu()
		// The sleep is the subject: the worker's CPU in a window of wall
		// time after the decode (spinning, or asleep), not a wait.
		time.Sleep(300 * time.Millisecond)
		return cpu() - start
	}
	none := spin(-1)
	assert.Less(t, none, 20*time.Millisecond, "CPU the worker used after the decode")
	assert.Greater(t, spin(0), none, "ggml's default polling spins")
}

func TestThreadPoolOptionsInvalid(t *testing.T) {
	m := loadModel(t, "llama-2-tiny-random.gguf")
	for _, o := range []llama.ThreadPoolOptions{
		{Priority: 4}, {Priority: -2}, {Poll: 101}, {CPUs: []int{-1}}, {CPUs: []int{512}},
	} {
		_, err := m.NewContext(llama.ContextOptions{ContextSize: 256, ThreadPool: o})
		var le *llama.Error
		require.True(t, errors.As(err, &le), "%+v: %v", o, err)
		assert.Equal(t, llama.CodeInvalid, le.Code, "%+v", o)
		_, err = m.NewContext(llama.ContextOptions{ContextSize: 256, ThreadPoolBatch: &o})
		assert.Error(t, err, "batch %+v", o)
	}
}
