package main

import (
	"strconv"
	"strings"

	"github.com/x/llama/server"
)

// applyToolsEnv sets the agent features (server.ToolsOptions) from
// llama-server's environment variables for them, until the flag table
// has their flags: LLAMA_ARG_TOOLS (--tools), LLAMA_ARG_TOOLS_RUNTIME
// (--tools-runtime), LLAMA_ARG_MCP_SERVERS_CONFIG (--mcp-servers-config),
// LLAMA_ARG_MCP_SERVERS_JSON (--mcp-servers-json) and
// LLAMA_ARG_UI_MCP_PROXY (--ui-mcp-proxy).
//
// It also reads the Vertex AI variables that llama-server reads: with
// AIP_MODE=PREDICTION it serves AIP_PREDICT_ROUTE (default /predict) and
// AIP_HEALTH_ROUTE, on port AIP_HTTP_PORT (default 8080).
func applyToolsEnv(c *config, getenv func(string) string) {
	o := &c.opts
	if getenv("AIP_MODE") == "PREDICTION" {
		o.GCP = server.GCPOptions{Enabled: true, PredictRoute: getenv("AIP_PREDICT_ROUTE"), HealthRoute: getenv("AIP_HEALTH_ROUTE")}
		c.port = 8080
		if p, err := strconv.Atoi(getenv("AIP_HTTP_PORT")); err == nil {
			c.port = p
		}
	}
	t := &o.Tools
	if v := getenv("LLAMA_ARG_TOOLS"); v != "" {
		t.Enabled = splitList(v)
	}
	if v := getenv("LLAMA_ARG_TOOLS_RUNTIME"); v != "" {
		t.Runtime = v
	}
	if v := getenv("LLAMA_ARG_MCP_SERVERS_CONFIG"); v != "" {
		t.MCPServersConfig = v
	}
	if v := getenv("LLAMA_ARG_MCP_SERVERS_JSON"); v != "" {
		t.MCPServersJSON = v
	}
	switch strings.ToLower(getenv("LLAMA_ARG_UI_MCP_PROXY")) {
	case "1", "true", "on", "enabled":
		t.CORSProxy = true
	}
}
