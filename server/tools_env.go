package server

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
)

// runTagEnv marks, in their environment, the processes a tool command or
// an MCP server starts, so that they can be found and killed on timeout
// even after they left the session (see killProcessGroup).
const runTagEnv = "GO_LLAMA_TOOL_RUN"

// secretEnvName reports whether the environment variable name holds a
// secret that commands run by the tools and MCP servers must not see:
// LLAMA_API_KEY, every LLAMA_ARG_* (the server's own settings, API keys
// included), HF_TOKEN, HUGGING_FACE_HUB_TOKEN, and any name ending in
// _API_KEY, _TOKEN, _SECRET or _PASSWORD (case-insensitive). An MCP
// server that needs one gets it through its "env" in the configuration.
func secretEnvName(name string) bool {
	u := strings.ToUpper(name)
	switch u {
	case "LLAMA_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", runTagEnv:
		return true
	}
	if strings.HasPrefix(u, "LLAMA_ARG_") {
		return true
	}
	for _, s := range []string{"_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD"} {
		if strings.HasSuffix(u, s) {
			return true
		}
	}
	return false
}

// childEnv returns env without its secrets, plus a fresh run tag.
func childEnv(env []string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if name == "" || secretEnvName(name) {
			continue
		}
		out = append(out, kv)
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	return append(out, runTagEnv+"="+hex.EncodeToString(b[:]))
}

// runTagOf returns the run tag entry ("NAME=VALUE") of a child's env.
func runTagOf(env []string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if strings.HasPrefix(env[i], runTagEnv+"=") {
			return env[i]
		}
	}
	return ""
}
