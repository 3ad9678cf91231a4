//go:build rpc

package llama_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/internal/testenv/modeltest"
)

// TestRPCSplitMatchesLocal loads stories260K split across two workers on
// 127.0.0.1: the workers' devices are listed with their memory, llama.cpp
// places layers on each, and the greedy continuation is the local one.
func TestRPCSplitMatchesLocal(t *testing.T) {
	w1, w2 := testenv.StartRPCWorker(t), testenv.StartRPCWorker(t)
	for _, model := range []struct{ name, path string }{
		{"stories260K", testenv.Model(t, "stories260K.gguf")},
		{"random 125M Q8_0", benchModel125M(t)},
	} {
		t.Run(model.name, func(t *testing.T) { testRPCSplit(t, model.path, w1, w2) })
	}
}

// benchModel125M is the benchmarks' random 125M llama (Q8_0), made once
// in the user cache.
func benchModel125M(t testing.TB) string {
	t.Helper()
	p, err := gguf.BenchModelFile(testenv.Model(t, "llama-2-tiny-random.gguf"), "llama-125m", gguf.BenchModel125M, gguf.Q8_0)
	require.NoError(t, err)
	return p
}

func testRPCSplit(t *testing.T, path string, w1, w2 *testenv.RPCWorker) {

	devs, err := llama.AddRPCServer(context.Background(), w1.Addr)
	require.NoError(t, err)
	require.Len(t, devs, 1, "a worker with one CPU device")
	assert.Equal(t, "rpc", devs[0].Type)
	assert.Equal(t, w1.Addr, devs[0].Description)
	assert.Regexp(t, `^RPC\d+$`, devs[0].Name)
	assert.Positive(t, devs[0].TotalMemory)

	want, _, err := greedyText(t, path, llama.ModelOptions{CPUOnly: true})
	require.NoError(t, err)
	require.NotEmpty(t, want)
	for _, tc := range []struct {
		name    string
		opts    llama.ModelOptions
		layered []string // the workers holding layers
	}{
		{"two workers", llama.ModelOptions{RPCServers: []string{w1.Addr, w2.Addr}, TensorSplit: []float32{1, 1}}, []string{w1.Addr, w2.Addr}},
		{"local CPU and one worker", llama.ModelOptions{RPCServers: []string{w2.Addr}, GPULayers: 3}, []string{w2.Addr}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, log, err := greedyText(t, path, tc.opts)
			require.NoError(t, err)
			assert.Equal(t, want, got)
			for _, w := range tc.layered {
				devs, err := llama.AddRPCServer(context.Background(), w)
				require.NoError(t, err)
				assert.Regexp(t, `layer +\d+ assigned to device `+devs[0].Name+`,`, log, "%s holds layers", w)
			}
			if tc.opts.GPULayers > 0 {
				assert.Regexp(t, `layer +\d+ assigned to device CPU,`, log, "the local CPU holds layers")
			}
		})
	}
}

// TestRPCWorkerDies kills a worker in the middle of a generation: the
// generation ends with an error with Code CodeRPC instead of the process
// ending, the model reports the failure and refuses further work, closing
// it returns, and once the worker is back the model loads and generates
// again.
func TestRPCWorkerDies(t *testing.T) {
	path := testenv.Model(t, "stories260K.gguf")
	w := testenv.StartRPCWorker(t)
	want, _, err := greedyText(t, path, llama.ModelOptions{CPUOnly: true})
	require.NoError(t, err)

	m, err := llama.LoadModel(context.Background(), path, llama.ModelOptions{RPCServers: []string{w.Addr}})
	require.NoError(t, err)
	require.NoError(t, m.RPCErr())
	require.Len(t, m.RPCDevices(), 1)
	lctx, err := m.NewContext(llama.ContextOptions{ContextSize: 512, Threads: 1})
	require.NoError(t, err)
	n := 0
	var genErr error
	for _, err := range lctx.Generate(context.Background(), "Once upon a time", llama.GenerateOptions{MaxTokens: 400}).Seq() {
		if err != nil {
			genErr = err
			break
		}
		if n++; n == 4 {
			w.Kill()
		}
	}
	require.Error(t, genErr, "the generation went on after its worker was killed")
	assert.ErrorIs(t, genErr, llama.ErrRPC)
	var le *llama.Error
	require.ErrorAs(t, genErr, &le)
	assert.Equal(t, llama.CodeRPC, le.Code)
	assert.Contains(t, genErr.Error(), "RPC worker failed")
	require.Error(t, m.RPCErr())
	assert.Contains(t, m.RPCErr().Error(), w.Addr)
	_, err = m.NewContext(llama.ContextOptions{ContextSize: 64})
	assert.ErrorIs(t, err, llama.ErrRPC, "a failed model refuses new contexts")
	for _, err := range lctx.Generate(context.Background(), "Once", llama.GenerateOptions{MaxTokens: 4}).Seq() {
		assert.ErrorIs(t, err, llama.ErrRPC, "a failed model refuses to decode")
		break
	}
	require.NoError(t, lctx.Close())
	require.NoError(t, m.Close())

	_, err = llama.LoadModel(context.Background(), path, llama.ModelOptions{RPCServers: []string{w.Addr}})
	assert.ErrorIs(t, err, llama.ErrRPC, "loading on a dead worker")

	w.Start()
	got, _, err := greedyText(t, path, llama.ModelOptions{RPCServers: []string{w.Addr}})
	require.NoError(t, err)
	assert.Equal(t, want, got, "after the worker restarted")
}

// fakeListener accepts connections on 127.0.0.1 and answers each with
// reply (nil: closes it at once).
func fakeListener(t *testing.T, reply []byte) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if reply != nil {
				buf := make([]byte, 33)
				_, _ = io.ReadFull(c, buf)
				_, _ = c.Write(reply)
			}
			c.Close()
		}
	}()
	return l.Addr().String()
}

// TestRPCBadWorkers gives LoadModel and AddRPCServer addresses that are
// no usable worker: each is an error at load, naming the address and
// what is wrong, and nothing reaches ggml-rpc (which would end the
// process).
func TestRPCBadWorkers(t *testing.T) {
	path := testenv.Model(t, "stories260K.gguf")
	closed := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		a := l.Addr().String()
		l.Close()
		return a
	}()
	// A worker of another protocol version: the handshake's answer with
	// major version 5.
	old := make([]byte, 8+28)
	binary.LittleEndian.PutUint64(old, 28)
	old[8], old[9], old[10] = 5, 2, 1
	for _, tc := range []struct {
		name, addr string
		code       llama.ErrorCode
		want       []string
	}{
		{"unreachable", closed, llama.CodeRPC, []string{"cannot reach the RPC worker " + closed, "refused"}},
		{"not a worker: closes", fakeListener(t, nil), llama.CodeRPC, []string{"is not an RPC worker"}},
		{"not a worker: HTTP", fakeListener(t, []byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")), llama.CodeRPC, []string{"is not an RPC worker"}},
		{"another version", fakeListener(t, old), llama.CodeRPC, []string{"speaks protocol 5.2.1", "this library 6.0", "same llama.cpp version"}},
		{"no port", "127.0.0.1", llama.CodeInvalid, []string{"invalid RPC worker address", "host:port"}},
		{"port 0", "127.0.0.1:0", llama.CodeInvalid, []string{"port must be a number from 1 to 65535"}},
		{"IPv6", "[::1]:50052", llama.CodeInvalid, []string{"IPv4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := llama.LoadModel(context.Background(), path, llama.ModelOptions{RPCServers: []string{tc.addr}})
			require.Error(t, err)
			var le *llama.Error
			require.ErrorAs(t, err, &le)
			assert.Equal(t, tc.code, le.Code, "%v", err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			_, err = llama.AddRPCServer(context.Background(), tc.addr)
			require.ErrorAs(t, err, &le)
			assert.Equal(t, tc.code, le.Code, "%v", err)
		})
	}
	w := testenv.StartRPCWorker(t)
	_, err := llama.LoadModel(context.Background(), path, llama.ModelOptions{RPCServers: []string{w.Addr, w.Addr}})
	assert.ErrorIs(t, err, llama.ErrInvalid, "a worker named twice")
}

// TestRPCSharedWorker loads models on one worker at once and while
// another holds it: a worker serves one client process, whose models share
// its connection, so none waits on the worker and each generates the
// local text.
func TestRPCSharedWorker(t *testing.T) {
	path := testenv.Model(t, "stories260K.gguf")
	w := testenv.StartRPCWorker(t)
	want, _, err := greedyText(t, path, llama.ModelOptions{CPUOnly: true})
	require.NoError(t, err)
	modeltest.LoadPath(t, path, llama.ModelOptions{RPCServers: []string{w.Addr}}) // held while the others load
	results := make(chan error, 3)
	texts := make(chan string, 3)
	for range 3 {
		go func() {
			got, _, err := greedyText(t, path, llama.ModelOptions{RPCServers: []string{w.Addr}})
			texts <- got
			results <- err
		}()
	}
	for range 3 {
		require.NoError(t, <-results)
		assert.Equal(t, want, <-texts)
	}
	devs, err := llama.AddRPCServer(context.Background(), w.Addr)
	require.NoError(t, err, "listing a worker a loaded model holds")
	assert.Len(t, devs, 1)
}

// deadWorkerCall is a call of a model on one RPC worker, made after the
// worker is killed; prep runs while the worker is up and returns it.
type deadWorkerCall struct {
	name string
	prep func(t *testing.T, m *llama.Model, c *llama.Context) func() error
}

// testRPCDeadWorkerCalls loads path on a worker of its own for each call,
// decodes prompt (so that the KV memory lives on the worker), kills the
// worker and makes the call: it returns an error with Code CodeRPC
// instead of blocking for good (a minute is the hang guard), the model is
// failed, and then every guarded call of the model refuses with CodeRPC
// without reaching the worker.
func testRPCDeadWorkerCalls(t *testing.T, path string, copts llama.ContextOptions, prompt string, calls []deadWorkerCall) {
	for _, tc := range calls {
		t.Run(tc.name, func(t *testing.T) {
			w := testenv.StartRPCWorker(t)
			m := modeltest.LoadPath(t, path, llama.ModelOptions{RPCServers: []string{w.Addr}})
			c, err := m.NewContext(copts)
			require.NoError(t, err)
			defer c.Close()
			toks, err := m.Tokenize(prompt, llama.TokenizeOptions{AddSpecial: true})
			require.NoError(t, err)
			b := llama.NewBatch(len(toks), 1)
			for i, tk := range toks {
				require.NoError(t, b.Add(tk, i, 0, i == len(toks)-1))
			}
			if copts.Embeddings {
				require.NoError(t, c.Encode(context.Background(), b))
			} else {
				require.NoError(t, c.Decode(context.Background(), b))
			}
			call := tc.prep(t, m, c)
			w.Kill()

			requireRPCErr := func(what string, f func() error) {
				t.Helper()
				done := make(chan error, 1)
				go func() { done <- f() }()
				select {
				case err := <-done:
					require.Error(t, err, "%s after the worker died", what)
					var le *llama.Error
					require.ErrorAs(t, err, &le, "%s: %v", what, err)
					assert.Equal(t, llama.CodeRPC, le.Code, "%s: %v", what, err)
				case <-time.After(time.Minute):
					t.Fatalf("%s hangs on a dead worker", what)
				}
			}
			requireRPCErr(tc.name, call)
			require.ErrorIs(t, m.RPCErr(), llama.ErrRPC, "the model is failed")

			// The failed model's guarded calls refuse without reaching the worker.
			mem := c.Memory()
			for _, f := range []struct {
				name string
				call func() error
			}{
				{"State", func() error { _, err := c.State(); return err }},
				{"SetState", func() error { return c.SetState([]byte{0}) }},
				{"SeqState", func() error { _, err := c.SeqState(0); return err }},
				{"SetSeqState", func() error { return c.SetSeqState(0, []byte{0}) }},
				{"SaveStateFile", func() error { return c.SaveStateFile(filepath.Join(t.TempDir(), "s"), toks) }},
				{"SaveSeqFile", func() error { _, err := c.SaveSeqFile(filepath.Join(t.TempDir(), "s"), 0, toks); return err }},
				{"SetAdapters", func() error { return c.SetAdapters(nil) }},
				{"SetControlVector", func() error { return c.SetControlVector(nil, 0, 0) }},
				{"Memory.Clear", mem.Clear},
				{"Memory.Remove", func() error { _, err := mem.Remove(0, 0, -1); return err }},
				{"Memory.Keep", func() error { return mem.Keep(0) }},
				{"Encode", func() error { return c.Encode(context.Background(), b) }},
				{"Decode", func() error { return c.Decode(context.Background(), b) }},
			} {
				requireRPCErr(f.name+" on the failed model", f.call)
			}
		})
	}
}

// TestRPCDeadWorkerCalls covers the calls of a context besides decoding
// that reach the workers' memory: a worker killed before them makes each
// return an error with Code CodeRPC (ggml-rpc would have parked it for
// good, the call waiting on it forever).
func TestRPCDeadWorkerCalls(t *testing.T) {
	path := testenv.Model(t, "stories260K.gguf")
	f, err := gguf.Open(path)
	require.NoError(t, err)
	lora := filepath.Join(t.TempDir(), "lora.gguf")
	require.NoError(t, gguf.WriteLoRA(lora, f, nil, 4, 8, 1, 1))
	calls := []deadWorkerCall{
		{"State", func(_ *testing.T, _ *llama.Model, c *llama.Context) func() error {
			return func() error { _, err := c.State(); return err }
		}},
		{"SetState", func(t *testing.T, _ *llama.Model, c *llama.Context) func() error {
			s, err := c.State()
			require.NoError(t, err)
			return func() error { return c.SetState(s) }
		}},
		{"SeqState", func(_ *testing.T, _ *llama.Model, c *llama.Context) func() error {
			return func() error { _, err := c.SeqState(0); return err }
		}},
		{"SetSeqState", func(t *testing.T, _ *llama.Model, c *llama.Context) func() error {
			s, err := c.SeqState(0)
			require.NoError(t, err)
			return func() error { return c.SetSeqState(1, s) }
		}},
		{"SaveStateFile", func(t *testing.T, _ *llama.Model, c *llama.Context) func() error {
			p := filepath.Join(t.TempDir(), "state")
			return func() error { return c.SaveStateFile(p, nil) }
		}},
		{"LoadStateFile", func(t *testing.T, _ *llama.Model, c *llama.Context) func() error {
			p := filepath.Join(t.TempDir(), "state")
			require.NoError(t, c.SaveStateFile(p, nil))
			return func() error { _, err := c.LoadStateFile(p); return err }
		}},
		{"SaveSeqFile", func(t *testing.T, _ *llama.Model, c *llama.Context) func() error {
			p := filepath.Join(t.TempDir(), "seq")
			return func() error { _, err := c.SaveSeqFile(p, 0, nil); return err }
		}},
		{"LoadSeqFile", func(t *testing.T, _ *llama.Model, c *llama.Context) func() error {
			p := filepath.Join(t.TempDir(), "seq")
			_, err := c.SaveSeqFile(p, 0, nil)
			require.NoError(t, err)
			return func() error { _, err := c.LoadSeqFile(p, 1); return err }
		}},
		{"SetControlVector", func(_ *testing.T, m *llama.Model, c *llama.Context) func() error {
			cv := make([]float32, 64*4)
			for i := range cv {
				cv[i] = 0.5
			}
			return func() error { return c.SetControlVector(cv, 1, 4) }
		}},
		{"LoadAdapter", func(_ *testing.T, m *llama.Model, _ *llama.Context) func() error {
			return func() error { _, err := m.LoadAdapter(lora); return err }
		}},
		{"Memory.Clear", func(_ *testing.T, _ *llama.Model, c *llama.Context) func() error {
			return c.Memory().Clear
		}},
	}
	testRPCDeadWorkerCalls(t, path, llama.ContextOptions{ContextSize: 256, Sequences: 2, Threads: 1}, "Once upon a time", calls)
}
