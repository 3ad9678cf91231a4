//go:build rpc

package main

import (
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFlagRPC checks --rpc (and LLAMA_ARG_RPC): the list goes to the
// model's RPCServers, which the model load checks (rpc_test.go of the SDK),
// and nothing refuses the start any more.
func TestFlagRPC(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want []string
	}{
		{args: []string{"--rpc", "127.0.0.1:50052"}, want: []string{"127.0.0.1:50052"}},
		{args: []string{"--rpc", "w0.rpc:50052, w1.rpc:50052"}, want: []string{"w0.rpc:50052", "w1.rpc:50052"}},
		{env: map[string]string{"LLAMA_ARG_RPC": "10.0.0.2:50052,10.0.0.3:50052"}, want: []string{"10.0.0.2:50052", "10.0.0.3:50052"}},
		{args: []string{}, want: nil},
	} {
		c, err := parseFlags(tc.args, envOf(tc.env), io.Discard)
		require.NoError(t, err, "%v", tc.args)
		assert.Equal(t, tc.want, c.opts.ModelOptions.RPCServers, "%v %v", tc.args, tc.env)
	}
}
