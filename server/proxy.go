package server

// The HTTP side of /cors-proxy: who may call it. The client and its
// address rule live in internal/corsproxy.

import (
	"net/http"

	"github.com/x/llama/server/internal/corsproxy"
)

// corsProxyHandler forwards a GET or POST to the http(s) URL of the "url"
// query parameter and streams the answer back, for the web UI's MCP
// client that a browser's same-origin rule would stop. Disabled (403)
// unless Tools.CORSProxy is set; see ToolsOptions.CORSProxy for what it
// refuses.
func corsProxyHandler(s *Server) handlerFunc {
	origins := newOriginPolicy(s.opts.CORSOrigins).exact
	return func(w http.ResponseWriter, r *http.Request) error {
		if !s.opts.Tools.CORSProxy {
			return errFeatureDisabled()
		}
		if err := corsproxy.Caller(r, origins, sameOrigin); err != nil {
			// Not even the refusal is readable by the calling page.
			w.Header().Del("Access-Control-Allow-Origin")
			w.Header().Del("Access-Control-Allow-Credentials")
			return statusError(err)
		}
		var body []byte
		if r.Method == http.MethodPost {
			if !isJSONType(r.Header.Get("Content-Type")) && !isJSONType(r.Header.Get(corsproxy.HeaderPrefix+"Content-Type")) {
				return &httpError{Status: http.StatusUnsupportedMediaType, Type: errInvalidRequest,
					Msg: "Content-Type (or " + corsproxy.HeaderPrefix + "Content-Type) must be application/json"}
			}
			b, err := readBody(r)
			if err != nil {
				return badRequest("%v", err)
			}
			body = b
		}
		return statusError(s.proxy.Forward(w, r, body))
	}
}
