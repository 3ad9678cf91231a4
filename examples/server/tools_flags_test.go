package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/x/llama/server"
)

func TestApplyToolsEnv(t *testing.T) {
	for _, tc := range []struct {
		name  string
		env   map[string]string
		tools server.ToolsOptions
		gcp   server.GCPOptions
		port  int
	}{
		{"nothing", nil, server.ToolsOptions{}, server.GCPOptions{}, 1234},
		{"agent features", map[string]string{
			"LLAMA_ARG_TOOLS": "read_file, get_info", "LLAMA_ARG_TOOLS_RUNTIME": "docker:busybox",
			"LLAMA_ARG_MCP_SERVERS_CONFIG": "/etc/mcp.json", "LLAMA_ARG_MCP_SERVERS_JSON": `{"mcpServers":{}}`,
			"LLAMA_ARG_UI_MCP_PROXY": "1",
		}, server.ToolsOptions{Enabled: []string{"read_file", "get_info"}, Runtime: "docker:busybox",
			MCPServersConfig: "/etc/mcp.json", MCPServersJSON: `{"mcpServers":{}}`, CORSProxy: true}, server.GCPOptions{}, 1234},
		{"proxy off", map[string]string{"LLAMA_ARG_UI_MCP_PROXY": "0"}, server.ToolsOptions{}, server.GCPOptions{}, 1234},
		{"vertex", map[string]string{"AIP_MODE": "PREDICTION", "AIP_HTTP_PORT": "7070", "AIP_PREDICT_ROUTE": "/p", "AIP_HEALTH_ROUTE": "/h"},
			server.ToolsOptions{}, server.GCPOptions{Enabled: true, PredictRoute: "/p", HealthRoute: "/h"}, 7070},
		{"vertex default port", map[string]string{"AIP_MODE": "PREDICTION"}, server.ToolsOptions{}, server.GCPOptions{Enabled: true}, 8080},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &config{port: 1234}
			applyToolsEnv(c, func(k string) string { return tc.env[k] })
			assert.Equal(t, tc.tools, c.opts.Tools)
			assert.Equal(t, tc.gcp, c.opts.GCP)
			assert.Equal(t, tc.port, c.port)
		})
	}
}
