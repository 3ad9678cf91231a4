package corsproxy

import (
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The proxy's own rules, without traffic; server/security_*_test.go
// perform them through the HTTP API.

func TestRelayedType(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json": true, "application/json; charset=utf-8": true, "APPLICATION/JSON": true,
		"application/vnd.api+json": true, "text/event-stream": true,
		"text/javascript": false, "application/javascript": false, "text/html": false, "text/css": false,
		"image/svg+xml": false, "text/plain": false, "": false, "application/json;;": false, "text/json+x": false,
	} {
		assert.Equal(t, want, relayedType(ct), "%q", ct)
	}
}

func TestCheckLocalAddresses(t *testing.T) {
	p := New(false, nil)
	p.Refused = func(netip.Addr) string { return "" } // every address public
	p.localAddrs = func() ([]net.Addr, error) {
		return []net.Addr{&net.IPNet{IP: net.ParseIP("203.0.113.5"), Mask: net.CIDRMask(24, 32)},
			&net.IPAddr{IP: net.ParseIP("2001:db8::5")}}, nil
	}
	for addr, refused := range map[string]bool{
		"203.0.113.5": true, "::ffff:203.0.113.5": true, "2001:db8::5": true,
		"203.0.113.6": false, "8.8.8.8": false,
	} {
		err := p.check(netip.MustParseAddr(addr))
		assert.Equal(t, refused, err != nil, addr)
	}
	p.localAddrs = func() ([]net.Addr, error) { return nil, errors.New("no interfaces") }
	assert.Error(t, p.check(netip.MustParseAddr("8.8.8.8")), "interfaces unknown: every address may be ours")
	assert.NoError(t, New(true, nil).check(netip.MustParseAddr("127.0.0.1")), "allowPrivate lifts the rule")
}
