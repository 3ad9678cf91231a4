package server

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"
)

// corsProxyHeaderPrefix marks the request headers /cors-proxy forwards
// (without the prefix); no other header of the caller reaches the target.
const corsProxyHeaderPrefix = "X-Llama-Server-Proxy-Header-"

const (
	// corsProxyTimeout bounds one proxied exchange, as llama-server's.
	corsProxyTimeout = 600 * time.Second
	// corsProxyMaxRedirects is the most redirects one exchange follows;
	// each hop's address is checked again when it is dialled.
	corsProxyMaxRedirects = 5
	// corsProxyMaxBody is the most bytes of a target's response body the
	// proxy relays: a larger Content-Length is refused (502), a body
	// growing past it is cut by aborting the response.
	corsProxyMaxBody = 32 << 20
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

// corsProxy is the client of /cors-proxy. It dials only the addresses
// addrRefused lets through (unless allowPrivate), after resolving the
// target's name itself, so that a name resolving to a private address,
// and every redirect, is checked at the connection.
type corsProxy struct {
	allowPrivate bool
	// refused is addrRefused (tests stand a loopback address in for a
	// public one).
	refused func(netip.Addr) string
	// lookup resolves a host name (net.DefaultResolver's; tests resolve
	// names to addresses they must not reach).
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	dialer net.Dialer
	client *http.Client
}

func newCORSProxy(allowPrivate bool) *corsProxy {
	p := &corsProxy{allowPrivate: allowPrivate, refused: addrRefused}
	p.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
		return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	}
	p.dialer = net.Dialer{Timeout: 30 * time.Second, Control: p.control}
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
	return fmt.Sprintf("address %s is %s: the CORS proxy does not connect to it (allow it with --cors-proxy-allow-private)", e.Addr, e.Reason)
}

// check refuses ip unless it is a public unicast address or p allows
// private ones.
func (p *corsProxy) check(ip netip.Addr) error {
	if p.allowPrivate {
		return nil
	}
	if why := p.refused(ip); why != "" {
		return &refusedAddrError{Addr: ip, Reason: why}
	}
	return nil
}

// dial resolves addr's host, checks every address and connects to the
// first one allowed that answers.
func (p *corsProxy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else if ips, err = p.lookup(ctx, host); err != nil {
		return nil, err
	}
	var first error
	for _, ip := range ips {
		if err := p.check(ip.Unmap()); err != nil {
			first = cmp.Or(first, err)
			continue
		}
		conn, err := p.dialer.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
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
func (p *corsProxy) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("cors proxy: unexpected address %q", address)
	}
	return p.check(ap.Addr().Unmap())
}

// addrRefused says why the proxy does not connect to ip by default
// ("" when it does): loopback, private (RFC 1918 and IPv6 ULA),
// link-local (169.254.169.254, cloud metadata, is one), multicast,
// unspecified and the special-purpose IPv4 ranges, IPv4 addresses
// carried in NAT64 (64:ff9b::/96) and 6to4 (2002::/16) addresses
// included.
func addrRefused(ip netip.Addr) string {
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
		return ""
	}
	b := ip.As16()
	if netip.MustParsePrefix("64:ff9b::/96").Contains(ip) {
		if why := addrRefused(netip.AddrFrom4([4]byte(b[12:16]))); why != "" {
			return why + " (NAT64)"
		}
	}
	if netip.MustParsePrefix("2002::/16").Contains(ip) {
		if why := addrRefused(netip.AddrFrom4([4]byte(b[2:6]))); why != "" {
			return why + " (6to4)"
		}
	}
	return ""
}

// corsProxyHandler forwards a GET or POST to the http(s) URL of the "url"
// query parameter and streams the answer back (without the target's CORS
// headers), for the web UI's MCP client that a browser's same-origin
// rule would stop. Disabled (403) unless Tools.CORSProxy is set; see
// ToolsOptions.CORSProxy for what it refuses.
func corsProxyHandler(s *Server) handlerFunc {
	origins := newOriginPolicy(s.opts.CORSOrigins).exact
	return func(w http.ResponseWriter, r *http.Request) error {
		if !s.opts.Tools.CORSProxy {
			return errFeatureDisabled()
		}
		if err := corsProxyCaller(r, origins); err != nil {
			// Not even the refusal is readable by the calling page.
			w.Header().Del("Access-Control-Allow-Origin")
			w.Header().Del("Access-Control-Allow-Credentials")
			return err
		}
		target, err := corsProxyTarget(r.URL.Query().Get("url"))
		if err != nil {
			return serverError("%v", err)
		}
		var body io.Reader = http.NoBody
		if r.Method == http.MethodPost {
			if !isJSONType(r.Header.Get("Content-Type")) && !isJSONType(r.Header.Get(corsProxyHeaderPrefix+"Content-Type")) {
				return &httpError{Status: http.StatusUnsupportedMediaType, Type: errInvalidRequest,
					Msg: "Content-Type (or " + corsProxyHeaderPrefix + "Content-Type) must be application/json"}
			}
			b, err := readBody(r)
			if err != nil {
				return badRequest("%v", err)
			}
			body = bytes.NewReader(b)
		}
		req, err := http.NewRequestWithContext(r.Context(), r.Method, target.String(), body)
		if err != nil {
			return serverError("%v", err)
		}
		for k, vs := range r.Header {
			name, ok := cutPrefixFold(k, corsProxyHeaderPrefix)
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
		s.log.Info("cors proxy", "method", r.Method, "target", target.Redacted())
		resp, err := s.proxy.client.Do(req)
		if err != nil {
			if re := (*refusedAddrError)(nil); errors.As(err, &re) {
				return apiError(errPermission, "%v", re)
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, "proxy error: "+err.Error())
			return nil
		}
		defer resp.Body.Close()
		if resp.ContentLength > corsProxyMaxBody {
			return &httpError{Status: http.StatusBadGateway, Type: errServer,
				Msg: fmt.Sprintf("the target's response (%d bytes) is larger than the proxy's limit of %d bytes", resp.ContentLength, corsProxyMaxBody)}
		}
		h := w.Header()
		for k, vs := range resp.Header {
			lk := strings.ToLower(k)
			if corsProxyDropsHeader(lk) {
				continue
			}
			h[k] = append([]string(nil), vs...)
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
				if sent += int64(n); sent > corsProxyMaxBody {
					// Cut, and say so: the client sees a broken response,
					// not a complete shorter one.
					s.log.Warn("cors proxy: response body over the limit, cut", "target", target.Redacted(), "limit", corsProxyMaxBody)
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
}

// corsProxyCaller refuses the requests of web pages other than the
// server's own and those of origins (exact entries of the CORS origins;
// "*" and "localhost" do not count): the proxy's answers would let them
// read what the server can reach. It covers GET too, as a cross-site GET
// (an image, a link) still makes the server connect. Requests without
// Origin and Sec-Fetch-Site (curl, SDKs) pass; so does a navigation the
// user typed (Sec-Fetch-Site: none).
func corsProxyCaller(r *http.Request, origins []string) error {
	origin := r.Header.Get("Origin")
	if origin != "" && slices.Contains(origins, origin) {
		return nil
	}
	switch site := strings.ToLower(r.Header.Get("Sec-Fetch-Site")); site {
	case "", "same-origin", "none":
	default:
		return apiError(errPermission, "the CORS proxy answers only the server's own web page (Sec-Fetch-Site: %s, Origin %q)", site, origin)
	}
	if origin != "" && !sameOrigin(r, origin) {
		return apiError(errPermission, "the CORS proxy answers only the server's own web page, not %q", origin)
	}
	return nil
}

// corsProxyTarget checks the URL to proxy to: http or https, a host, no
// credentials.
func corsProxyTarget(raw string) (*url.URL, error) {
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
