package server

import (
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
)

// Web pages the user visits can send requests to the server: a fetch in
// "no-cors" mode with a text/plain body needs no CORS preflight, so the
// CORS headers alone never stop it, and a name the attacker controls can
// be made to resolve to 127.0.0.1 (DNS rebinding), which makes the
// attacker's page same-origin with the server. Browsers mark every such
// request: Origin on every request but a plain GET, Sec-Fetch-Site on
// every request, and the Host they send is the attacker's name. curl and
// the SDKs send neither Origin nor Sec-Fetch-Site, so they are not
// affected by the checks below.

// originPolicy says which browser origins may call the server, derived
// from Options.CORSOrigins: "*" allows every origin, "localhost" the
// loopback origins, other entries exact origins. Same-origin requests
// (from the server's own web page) are always allowed.
type originPolicy struct {
	any       bool
	localhost bool
	exact     []string
}

func newOriginPolicy(origins []string) originPolicy {
	var p originPolicy
	for _, o := range origins {
		switch o = strings.TrimSpace(o); o {
		case "*":
			p.any = true
		case "localhost":
			p.localhost = true
		case "":
		default:
			p.exact = append(p.exact, strings.TrimSuffix(o, "/"))
		}
	}
	return p
}

// allows reports whether CORS lets origin call the server.
func (p originPolicy) allows(origin string) bool {
	return p.any || (p.localhost && isLoopbackOrigin(origin)) || slices.Contains(p.exact, origin)
}

// sameOrigin reports whether origin names the host the request was sent
// to. Only the host and port are compared, as net/http's
// CrossOriginProtection does: a TLS proxy in front of the server makes
// the page's scheme differ from the request's.
func sameOrigin(r *http.Request, origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	return strings.EqualFold(u.Host, r.Host)
}

// isSafeMethod reports whether a method only reads (the checks below let
// these through: a cross-site page cannot read their answers unless CORS
// allows it).
func isSafeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// crossSiteError refuses a request sent by a web page that CORS does not
// allow: its Origin is neither the server's own nor allowed by p, or the
// browser says it is cross-site (Sec-Fetch-Site) and p does not allow its
// Origin. Requests without Origin and Sec-Fetch-Site (curl, SDKs) pass.
func crossSiteError(r *http.Request, p originPolicy) error {
	if p.any {
		return nil
	}
	origin := r.Header.Get("Origin")
	if origin != "" && p.allows(origin) {
		return nil
	}
	if strings.EqualFold(r.Header.Get("Sec-Fetch-Site"), "cross-site") {
		return apiError(errPermission, "cross-site request refused (Sec-Fetch-Site: cross-site, Origin %q is not an allowed CORS origin)", origin)
	}
	if origin != "" && !sameOrigin(r, origin) {
		return apiError(errPermission, "cross-origin request from %q refused: it is not an allowed CORS origin", origin)
	}
	return nil
}

// refuseCrossSite refuses the state-changing requests (every method but
// GET, HEAD and OPTIONS) that crossSiteError refuses, in d's shape.
func refuseCrossSite(p originPolicy, d dialect) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !isSafeMethod(r.Method) {
				if err := crossSiteError(r, p); err != nil {
					d.write(w, err)
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

// hostPolicy says which Host headers the server answers (see checkHost).
type hostPolicy struct {
	any      bool
	names    []string // exact host names, lower case
	suffixes []string // ".example.com" of "*.example.com" entries
}

func newHostPolicy(hosts []string) hostPolicy {
	var p hostPolicy
	for _, h := range hosts {
		h = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(h), "."))
		switch {
		case h == "*":
			p.any = true
		case h == "":
		case strings.HasPrefix(h, "*."):
			p.suffixes = append(p.suffixes, h[1:])
		case strings.HasPrefix(h, "."):
			p.suffixes = append(p.suffixes, h)
		default:
			p.names = append(p.names, hostName(h))
		}
	}
	return p
}

// hostName is the host of a Host header, without its port and brackets,
// in lower case and without a final dot.
func hostName(host string) string {
	if strings.HasPrefix(host, "[") {
		if i := strings.IndexByte(host, ']'); i > 0 {
			host = host[1:i]
		}
	} else if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

// isLoopbackName reports whether a host name can only mean this machine:
// localhost, a name under .localhost, or a loopback address.
func isLoopbackName(h string) bool {
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.Unmap().IsLoopback()
}

// allows reports whether the policy lists the host name h.
func (p hostPolicy) allows(h string) bool {
	if p.any || slices.Contains(p.names, h) {
		return true
	}
	for _, s := range p.suffixes {
		if strings.HasSuffix(h, s) {
			return true
		}
	}
	return false
}

// set reports whether the policy lists any host.
func (p hostPolicy) set() bool { return p.any || len(p.names) > 0 || len(p.suffixes) > 0 }

// hostError refuses a request whose Host may come from DNS rebinding. A
// connection received on a loopback address must name a loopback host
// (localhost, *.localhost, 127.0.0.0/8, [::1], any port) or one of p's.
// Once p lists hosts, other connections must name one of those, a
// loopback host or an IP address (an address cannot be rebound). The
// connection's local address comes from http.LocalAddrContextKey, which
// http.Server sets; a request without it (a Unix socket, a handler
// called directly) is not checked, nor one without a Host (HTTP/1.0,
// which no browser sends).
func hostError(r *http.Request, p hostPolicy) error {
	if p.any || r.Host == "" {
		return nil
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr)
	if !ok {
		return nil
	}
	loopback := local.IP.IsLoopback()
	if !loopback && !p.set() {
		return nil
	}
	h := hostName(r.Host)
	if isLoopbackName(h) || p.allows(h) {
		return nil
	}
	if !loopback {
		if _, err := netip.ParseAddr(h); err == nil {
			return nil
		}
	}
	where := "this server answers only loopback host names (localhost, 127.0.0.1, [::1]) on a loopback address"
	if !loopback {
		where = "it is not one of the server's allowed hosts"
	}
	return apiError(errPermission, "Host %q refused: %s; allow it with --allowed-hosts (Options.AllowedHosts)", r.Host, where)
}

// checkHost refuses, in d's shape, the requests hostError refuses.
func checkHost(p hostPolicy, d dialect) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := hostError(r, p); err != nil {
				d.write(w, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// isJSONType reports whether a Content-Type is application/json.
func isJSONType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// requireJSONBody refuses (415) a request whose Content-Type is not
// application/json. The routes that act on the machine require it: a
// web page can send a text/plain or form body to any site without a CORS
// preflight, but not an application/json one.
func requireJSONBody(r *http.Request) error {
	if isJSONType(r.Header.Get("Content-Type")) {
		return nil
	}
	return &httpError{Status: http.StatusUnsupportedMediaType, Type: errInvalidRequest,
		Msg: "Content-Type must be application/json"}
}
