package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// corsProxyHeaderPrefix marks the request headers /cors-proxy forwards
// (without the prefix); no other header of the caller reaches the target.
const corsProxyHeaderPrefix = "X-Llama-Server-Proxy-Header-"

// corsProxyTimeout bounds one proxied exchange, as llama-server's.
const corsProxyTimeout = 600 * time.Second

// corsProxyHandler forwards a GET or POST to the http(s) URL of the "url"
// query parameter and streams the answer back (without the target's CORS
// headers), for the web UI's MCP client that a browser's same-origin
// rule would stop. Disabled (403) unless Tools.CORSProxy is set.
func corsProxyHandler(s *Server) handlerFunc {
	// It follows redirects, as llama-server's proxy does.
	client := &http.Client{Timeout: corsProxyTimeout}
	return func(w http.ResponseWriter, r *http.Request) error {
		if !s.opts.Tools.CORSProxy {
			return errFeatureDisabled()
		}
		target, err := corsProxyTarget(r.URL.Query().Get("url"))
		if err != nil {
			return serverError("%v", err)
		}
		var body io.Reader = http.NoBody
		if r.Method == http.MethodPost {
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
		resp, err := client.Do(req)
		if err != nil {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, "proxy error: "+err.Error())
			return nil
		}
		defer resp.Body.Close()
		h := w.Header()
		for k, vs := range resp.Header {
			lk := strings.ToLower(k)
			if lk == "server" || lk == "transfer-encoding" || lk == "content-length" || lk == "keep-alive" ||
				lk == "connection" || strings.HasPrefix(lk, "access-control-") {
				continue
			}
			h[k] = append([]string(nil), vs...)
		}
		w.WriteHeader(resp.StatusCode)
		rc := http.NewResponseController(w)
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
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
