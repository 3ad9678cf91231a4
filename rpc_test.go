package llama_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
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
	for _, err := range lctx.Generate(context.Background(), "Once upon a time", llama.GenerateOptions{MaxTokens: 400}) {
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
	for _, err := range lctx.Generate(context.Background(), "Once", llama.GenerateOptions{MaxTokens: 4}) {
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
	held, err := llama.LoadModel(context.Background(), path, llama.ModelOptions{RPCServers: []string{w.Addr}})
	require.NoError(t, err)
	defer held.Close()
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
