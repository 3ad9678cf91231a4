// Package corsproxy is the room of /cors-proxy: the client that forwards
// the web UI's MCP requests to another origin, and the address rule that
// keeps it off this machine, the local network and cloud metadata. The
// server package keeps the route, who may call it, and the error dialect.
package corsproxy

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"
)

// HeaderPrefix marks the request headers /cors-proxy forwards
// (without the prefix); no other header of the caller reaches the target.
const HeaderPrefix = "X-Llama-Server-Proxy-Header-"

const (
	// corsProxyTimeout bounds one proxied exchange, as llama-server's.
	corsProxyTimeout = 600 * time.Second
	// corsProxyMaxRedirects is the most redirects one exchange follows;
	// each hop's address is checked again when it is dialled.
	corsProxyMaxRedirects = 5
	// MaxBody is the most bytes of a target's response body the
	// proxy relays: a larger Content-Length is refused (502), a body
	// growing past it is cut by aborting the response.
	MaxBody = 32 << 20
)

// corsProxyDropsHeader reports whether the proxy keeps a target's
// response header (lk, lower case) to itself: hop-by-hop ones, those that
// would act on the server's own origin in the browser (cookies, site
// data, HSTS, alternative services, CORS), and those it sets itself.
func corsProxyDropsHeader(lk string) bool {
	switch lk {
	case "connection", "keep-alive", "transfer-encoding", "content-length", "server", "te", "trailer", "upgrade",
		"proxy-authenticate", "proxy-connection",
		"set-cookie", "set-cookie2", "clear-site-data", "strict-transport-security", "alt-svc", "refresh",
		"service-worker-allowed", "origin-agent-cluster",
		"content-security-policy", "content-security-policy-report-only", "x-content-type-options", "content-disposition":
		return true
	}
	return strings.HasPrefix(lk, "access-control-")
}

// Proxy is the client of /cors-proxy. It dials only the addresses
// AddrRefused lets through that are not this machine's own (unless
// allowPrivate), after resolving the target's name itself, so that a name
// resolving to a private address, and every redirect, is checked at the
// connection.
type Proxy struct {
	allowPrivate bool
	log          *slog.Logger
	// Refused is AddrRefused (tests stand a loopback address in for a
	// public one).
	Refused func(netip.Addr) string
	// Lookup resolves a host name (net.DefaultResolver's; tests resolve
	// names to addresses they must not reach).
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	// localAddrs lists the addresses of this machine's interfaces, read
	// at every connection (they change).
	localAddrs func() ([]net.Addr, error)
	Dialer     net.Dialer
	client     *http.Client
}

// New returns the proxy's client; allowPrivate lifts the address rule.
func New(allowPrivate bool, log *slog.Logger) *Proxy {
	p := &Proxy{allowPrivate: allowPrivate, log: log, Refused: AddrRefused, localAddrs: net.InterfaceAddrs}
	p.Lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
		return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	}
	p.Dialer = net.Dialer{Timeout: 30 * time.Second, Control: p.control}
	p.client = &http.Client{
		Timeout: corsProxyTimeout,
		Transport: &http.Transport{
			// No proxy from the environment: the address check must see
			// the target's address, not a proxy's.
			Proxy:                 nil,
			DialContext:           p.dial,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          16,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > corsProxyMaxRedirects {
				return fmt.Errorf("stopped after %d redirects", corsProxyMaxRedirects)
			}
			return nil
		},
	}
	return p
}

// refusedAddrError is a connection the proxy does not make.
type refusedAddrError struct {
	Addr   netip.Addr
	Reason string
}

func (e *refusedAddrError) Error() string {
	return fmt.Sprintf("address %s is %s: the CORS proxy does not connect to it (allow it with --cors-proxy-allow-private, Options.Tools.CORSProxyAllowPrivate)", e.Addr, e.Reason)
}

// check refuses ip unless it is a public unicast address that is not
// one of this machine's own, or p allows private ones.
func (p *Proxy) check(ip netip.Addr) error {
	if p.allowPrivate {
		return nil
	}
	if why := p.Refused(ip); why != "" {
		return &refusedAddrError{Addr: ip, Reason: why}
	}
	if p.isLocal(ip) {
		// A service bound to 0.0.0.0 answers on the machine's public
		// address too.
		return &refusedAddrError{Addr: ip, Reason: "an address of this machine"}
	}
	return nil
}

// isLocal reports whether ip is an address of one of this machine's
// interfaces; when they cannot be listed, every address counts as one.
func (p *Proxy) isLocal(ip netip.Addr) bool {
	addrs, err := p.localAddrs()
	if err != nil {
		return true
	}
	for _, a := range addrs {
		var local net.IP
		switch a := a.(type) {
		case *net.IPNet:
			local = a.IP
		case *net.IPAddr:
			local = a.IP
		}
		if la, ok := netip.AddrFromSlice(local); ok && la.Unmap() == ip.Unmap() {
			return true
		}
	}
	return false
}

// dial resolves addr's host, checks every address and connects to the
// first one allowed that answers.
func (p *Proxy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else if ips, err = p.Lookup(ctx, host); err != nil {
		return nil, err
	}
	var first error
	for _, ip := range ips {
		if err := p.check(ip.Unmap()); err != nil {
			first = cmp.Or(first, err)
			continue
		}
		conn, err := p.Dialer.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		first = cmp.Or(first, err)
	}
	if first == nil {
		first = fmt.Errorf("no address for %s", host)
	}
	return nil, first
}

// control checks the address of every socket before it connects: a
// second guard should a connection not go through dial.
func (p *Proxy) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("cors proxy: unexpected address %q", address)
	}
	return p.check(ap.Addr().Unmap())
}

// AddrRefused says why the proxy does not connect to ip by default
// ("" when it does): loopback, private (RFC 1918 and IPv6 ULA),
// link-local (169.254.169.254, cloud metadata, is one), multicast,
// unspecified, the documentation ranges and the special-purpose ranges,
// IPv4 addresses carried in NAT64 (64:ff9b::/96) and 6to4 (2002::/16)
// addresses included. The proxy also refuses this machine's own
// addresses (Proxy.check).
func AddrRefused(ip netip.Addr) string {
	ip = ip.Unmap()
	switch {
	case !ip.IsValid():
		return "invalid"
	case ip.IsLoopback():
		return "loopback"
	case ip.IsPrivate():
		return "private"
	case ip.IsLinkLocalUnicast():
		return "link-local"
	case ip.IsMulticast(), ip.IsLinkLocalMulticast(), ip.IsInterfaceLocalMulticast():
		return "multicast"
	case ip.IsUnspecified():
		return "unspecified"
	}
	if ip.Is4() {
		// Special-purpose ranges netip does not classify: "this network",
		// shared address space (carrier NAT; some clouds' metadata
		// services), IETF protocol assignments, benchmarking, and the
		// reserved range with broadcast.
		for _, pf := range []string{"0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "198.18.0.0/15", "240.0.0.0/4"} {
			if netip.MustParsePrefix(pf).Contains(ip) {
				return "reserved"
			}
		}
		// Documentation (TEST-NET-1, -2 and -3): never a real host.
		for _, pf := range []string{"192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"} {
			if netip.MustParsePrefix(pf).Contains(ip) {
				return "documentation"
			}
		}
		return ""
	}
	// IPv4-compatible (::/96, deprecated: some stacks route it to the
	// IPv4 address), documentation (2001:db8::/32, 3fff::/20),
	// discard-only (100::/64), IETF protocol assignments (2001::/23,
	// Teredo's tunnels included) and local-use NAT64 (64:ff9b:1::/48).
	for _, r := range []struct{ prefix, why string }{
		{"::/96", "IPv4-compatible"}, {"2001:db8::/32", "documentation"}, {"3fff::/20", "documentation"},
		{"100::/64", "reserved"}, {"2001::/23", "reserved"}, {"64:ff9b:1::/48", "reserved (NAT64)"},
	} {
		if netip.MustParsePrefix(r.prefix).Contains(ip) {
			return r.why
		}
	}
	b := ip.As16()
	if netip.MustParsePrefix("64:ff9b::/96").Contains(ip) {
		if why := AddrRefused(netip.AddrFrom4([4]byte(b[12:16]))); why != "" {
			return why + " (NAT64)"
		}
	}
	if netip.MustParsePrefix("2002::/16").Contains(ip) {
		if why := AddrRefused(netip.AddrFrom4([4]byte(b[2:6]))); why != "" {
			return why + " (6to4)"
		}
	}
	return ""
}

// Error is a proxied request that fails before the target's answer is
// relayed: Status is the HTTP status of the answer.
type Error struct {
	Status int
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// Forward sends r (a GET, or a POST whose JSON body is body) to the
// http(s) URL of its "url" query parameter, with the headers it sent
// under HeaderPrefix, and streams the answer back: without the target's
// cookies, CORS and other headers that would act on the server's origin,
// as an attachment under "Content-Security-Policy: sandbox", and, unless
// it is JSON or an event stream, as application/octet-stream with
// "X-Content-Type-Options: nosniff", so that no page may load it as a
// script or style of the server's origin. It returns an *Error when it
// fails before writing; a body over MaxBody is cut by aborting the
// response.
func (p *Proxy) Forward(w http.ResponseWriter, r *http.Request, body []byte) error {
	target, err := target(r.URL.Query().Get("url"))
	if err != nil {
		return &Error{Status: http.StatusInternalServerError, Msg: err.Error()}
	}
	var rd io.Reader = http.NoBody
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, target.String(), rd)
	if err != nil {
		return &Error{Status: http.StatusInternalServerError, Msg: err.Error()}
	}
	for k, vs := range r.Header {
		name, ok := cutPrefixFold(k, HeaderPrefix)
		if !ok || name == "" {
			continue
		}
		switch strings.ToLower(name) {
		case "accept-encoding", "transfer-encoding", "content-length":
			continue
		case "host":
			req.Host = target.Host
			continue
		}
		for _, v := range vs {
			req.Header.Add(name, v)
		}
	}
	p.log.Info("cors proxy", "method", r.Method, "target", target.Redacted())
	resp, err := p.client.Do(req)
	if err != nil {
		if re := (*refusedAddrError)(nil); errors.As(err, &re) {
			return &Error{Status: http.StatusForbidden, Msg: re.Error()}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "proxy error: "+err.Error())
		return nil
	}
	defer resp.Body.Close()
	if resp.ContentLength > MaxBody {
		return &Error{Status: http.StatusBadGateway,
			Msg: fmt.Sprintf("the target's response (%d bytes) is larger than the proxy's limit of %d bytes", resp.ContentLength, MaxBody)}
	}
	h := w.Header()
	for k, vs := range resp.Header {
		lk := strings.ToLower(k)
		if corsProxyDropsHeader(lk) {
			continue
		}
		h[k] = append([]string(nil), vs...)
	}
	if !relayedType(resp.Header.Get("Content-Type")) {
		h.Set("Content-Type", "application/octet-stream")
	}
	// Whatever the target sends is never a page of the server's
	// origin: a browser opening it runs no script and saves it.
	h.Set("Content-Security-Policy", "sandbox")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Disposition", "attachment")
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	var sent int64
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if sent += int64(n); sent > MaxBody {
				// Cut, and say so: the client sees a broken response,
				// not a complete shorter one.
				p.log.Warn("cors proxy: response body over the limit, cut", "target", target.Redacted(), "limit", MaxBody)
				panic(http.ErrAbortHandler)
			}
			if _, werr := w.Write(buf[:n]); werr != nil {
				return nil
			}
			_ = rc.Flush()
		}
		if err != nil {
			return nil
		}
	}
}

// relayedType reports whether the proxy passes a target's Content-Type
// on as it is: JSON (application/json, and any +json type) and event
// streams, what an MCP client reads. Anything else (a script, a style
// sheet, a page) is relayed as application/octet-stream, which a browser
// with nosniff neither runs nor applies.
func relayedType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || mt == "text/event-stream" ||
		strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}

// Caller refuses the requests of web pages other than the
// server's own and those of origins (exact entries of the CORS origins;
// "*" and "localhost" do not count): the proxy's answers would let them
// read what the server can reach. It covers GET too, as a cross-site GET
// (an image, a link) still makes the server connect. Requests without
// Origin and Sec-Fetch-Site (curl, SDKs) pass; so does a navigation the
// user typed (Sec-Fetch-Site: none).
func Caller(r *http.Request, origins []string, sameOrigin func(r *http.Request, origin string) bool) error {
	origin := r.Header.Get("Origin")
	if origin != "" && slices.Contains(origins, origin) {
		return nil
	}
	switch site := strings.ToLower(r.Header.Get("Sec-Fetch-Site")); site {
	case "", "same-origin", "none":
	default:
		return &Error{Status: http.StatusForbidden, Msg: fmt.Sprintf("the CORS proxy answers only the server's own web page (Sec-Fetch-Site: %s, Origin %q)", site, origin)}
	}
	if origin != "" && !sameOrigin(r, origin) {
		return &Error{Status: http.StatusForbidden, Msg: fmt.Sprintf("the CORS proxy answers only the server's own web page, not %q", origin)}
	}
	return nil
}

// target checks the URL to proxy to: http or https, a host, no
// credentials.
func target(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("invalid target URL: %w", err)
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, errors.New("invalid target URL: missing host")
	}
	if u.User != nil {
		return nil, errors.New("authentication in target URL is not supported")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, errors.New("unsupported URL scheme in target URL: " + u.Scheme)
	}
	if u.Path == "" {
		u.Path = "/"
	}
	u.Fragment = ""
	return u, nil
}

// cutPrefixFold is strings.CutPrefix ignoring ASCII case.
func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || !strings.EqualFold(s[:len(prefix)], prefix) {
		return s, false
	}
	return s[len(prefix):], true
}
