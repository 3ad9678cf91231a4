package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConnLimits performs issue 36 item 4's descriptor exhaustion on
// the listener: one client opens more connections than its cap and then
// than the total; those past a cap are closed at once (llama-server has
// no cap), the ones within are served, and a closed one frees its place.
// Traffic stays on 127.0.0.1.
func TestConnLimits(t *testing.T) {
	for _, tc := range []struct {
		name             string
		total, perClient int
		open             int // connections opened and held
		served           int // of them, those served
	}{
		{"per client", 0, 3, 5, 3},
		{"total", 4, 0, 6, 4},
		{"both, per client first", 10, 2, 4, 2},
		{"no caps", 0, 0, 6, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })}
			go func() { _ = hs.Serve(limitConns(ln, tc.total, tc.perClient)) }()
			t.Cleanup(func() { _ = hs.Close() })

			// ask sends a request on c and reports whether it was answered.
			ask := func(c net.Conn) bool {
				require.NoError(t, c.SetDeadline(time.Now().Add(20*time.Second)))
				if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
					return false
				}
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					return false
				}
				resp.Body.Close()
				return resp.StatusCode == 200
			}
			var conns []net.Conn
			served := 0
			for range tc.open {
				c, err := net.Dial("tcp", ln.Addr().String())
				require.NoError(t, err)
				t.Cleanup(func() { c.Close() })
				conns = append(conns, c)
				if ask(c) {
					served++
				}
			}
			assert.Equal(t, tc.served, served)
			// A served connection closed frees its place.
			conns[0].Close()
			require.Eventually(t, func() bool {
				c, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					return false
				}
				defer c.Close()
				return ask(c)
			}, 20*time.Second, 20*time.Millisecond)
		})
	}
}
