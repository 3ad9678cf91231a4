package main

import (
	"strings"

	"github.com/x/llama/server"
)

// applyToolsEnv sets the agent features (server.ToolsOptions) from
// llama-server's environment variables for them, until the flag table
// has their flags: LLAMA_ARG_TOOLS (--tools), LLAMA_ARG_TOOLS_RUNTIME
// (--tools-runtime), LLAMA_ARG_MCP_SERVERS_CONFIG (--mcp-servers-config),
// LLAMA_ARG_MCP_SERVERS_JSON (--mcp-servers-json) and
// LLAMA_ARG_UI_MCP_PROXY (--ui-mcp-proxy).
func applyToolsEnv(o *server.Options, getenv func(string) string) {
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
