package server

import (
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
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
// Origin. Whatever p allows, a POST from another origin must carry a
// body type that only a CORS-checked request can send
// (isSimpleBody): the simple ones (text/plain, forms, multipart, none)
// need no preflight, so an origin the operator allowed would not be
// asked either, and llama-server parses them as JSON all the same.
// Requests without Origin and Sec-Fetch-Site (curl, SDKs) pass.
func crossSiteError(r *http.Request, p originPolicy) error {
	origin := r.Header.Get("Origin")
	crossSite := strings.EqualFold(r.Header.Get("Sec-Fetch-Site"), "cross-site")
	if !p.any && (origin == "" || !p.allows(origin)) {
		hint := "allow it with --cors-origins, or server.Options.CORSOrigins"
		if origin == "null" {
			hint = "a page opened from a file, or a sandboxed frame, has that origin: serve the page from http://localhost instead, " +
				`or allow "null" (--cors-origins null), which lets every site's sandboxed frames in too`
		}
		if crossSite {
			return apiError(errPermission, "cross-site request refused (Sec-Fetch-Site: cross-site, Origin %q is not an allowed CORS origin; %s)", origin, hint)
		}
		if origin != "" && !sameOrigin(r, origin) {
			return apiError(errPermission, "cross-origin request from %q refused: it is not an allowed CORS origin (%s)", origin, hint)
		}
	}
	if r.Method == http.MethodPost && (crossSite || origin != "" && !sameOrigin(r, origin)) && isSimpleBody(r) {
		return apiError(errPermission, "cross-origin POST from %q with a %q body refused: a page of another origin must send application/json", origin, r.Header.Get("Content-Type"))
	}
	return nil
}

// isSimpleBody reports whether r's body is one a web page may send to
// any origin without a CORS preflight: no Content-Type, text/plain,
// application/x-www-form-urlencoded or multipart/form-data (and, to be
// safe, a Content-Type that does not parse).
func isSimpleBody(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return true
	}
	switch mt {
	case "text/plain", "application/x-www-form-urlencoded", "multipart/form-data":
		return true
	}
	return false
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
	own      []string // this machine's names (machineNames)
}

// newHostPolicy is the policy of AllowedHosts entries, which also
// answers this machine's own names.
func newHostPolicy(hosts []string) hostPolicy {
	p := hostPolicy{own: machineNames()}
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

// machineNames are the names this machine goes by, which DNS rebinding
// cannot borrow: its host name (os.Hostname), that name under .local
// (mDNS), and the names /etc/hosts gives the addresses listed with the
// host name (where the fully qualified name usually is). Lower case;
// none when the host name is unknown.
func machineNames() []string {
	h, err := os.Hostname()
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if err != nil || h == "" {
		return nil
	}
	names := []string{h}
	if !strings.Contains(h, ".") {
		names = append(names, h+".local")
	}
	if b, err := os.ReadFile("/etc/hosts"); err == nil && len(b) < 1<<20 {
		for _, line := range strings.Split(string(b), "\n") {
			line, _, _ = strings.Cut(line, "#")
			f := strings.Fields(strings.ToLower(line))
			if len(f) < 2 || !slices.Contains(f[1:], h) {
				continue
			}
			for _, n := range f[1:] {
				if n = strings.TrimSuffix(n, "."); !slices.Contains(names, n) {
					names = append(names, n)
				}
			}
		}
	}
	return names
}

// hostError refuses a request whose Host may come from DNS rebinding: a
// name an attacker's page was loaded from, resolved to this server. The
// Host must be a loopback name (localhost, *.localhost, 127.0.0.0/8,
// [::1], any port), one of this machine's names (machineNames), one of
// p's, or, on a connection received on an address other than loopback,
// an IP address (an address cannot be rebound). The connection's local
// address comes from http.LocalAddrContextKey, which http.Server sets; a
// request without it (a Unix socket, a handler called directly) is not
// checked, nor one without a Host (HTTP/1.0, which no browser sends).
func hostError(r *http.Request, p hostPolicy) error {
	if p.any || r.Host == "" {
		return nil
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr)
	if !ok {
		return nil
	}
	loopback := local.IP.IsLoopback()
	h := hostName(r.Host)
	if isLoopbackName(h) || p.allows(h) || slices.Contains(p.own, h) {
		return nil
	}
	if !loopback {
		if _, err := netip.ParseAddr(h); err == nil {
			return nil
		}
	}
	where := "this server answers only loopback host names (localhost, 127.0.0.1, [::1]) and this machine's names on a loopback address"
	if !loopback {
		where = "this server answers only IP addresses, loopback names, this machine's names and its allowed hosts"
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
