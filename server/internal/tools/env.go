package tools

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"runtime"
	"slices"
	"strings"
)

// runTagEnv marks, in their environment, the processes a tool command or
// an MCP server starts, so that they can be found and killed on timeout
// even after they left the session (see killProcessGroup).
const runTagEnv = "GO_LLAMA_TOOL_RUN"

// baseEnvNames are the variables of the server's environment that
// commands and MCP servers get by default: what a shell and common tools
// need to find programs, the user's home, the locale, the terminal and
// the temporary folder. Nothing else of the server's environment (API
// keys, cloud credentials, database URLs, agent sockets) reaches them
// unless Options.Env names it. LC_* variables pass too.
var baseEnvNames = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TMPDIR", "TZ",
	// Windows: what programs need to start and find their folders.
	"SYSTEMROOT", "SYSTEMDRIVE", "WINDIR", "COMSPEC", "PATHEXT", "TEMP", "TMP",
	"USERPROFILE", "APPDATA", "LOCALAPPDATA", "PROGRAMDATA", "PROGRAMFILES", "PROGRAMFILES(X86)",
}

// envPolicy chooses the environment of the processes the tools start.
type envPolicy struct {
	names   []string // passed on besides baseEnvNames (upper case on Windows)
	inherit bool     // "*": all of the server's environment but its secrets
}

// newEnvPolicy reads Options.Env: variable names, or "*".
func newEnvPolicy(names []string) *envPolicy {
	p := &envPolicy{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		switch {
		case n == "*":
			p.inherit = true
		case n != "":
			p.names = append(p.names, n)
		}
	}
	return p
}

// keeps reports whether the variable name passes to a tool's process.
func (p *envPolicy) keeps(name string) bool {
	match := func(list []string) bool {
		if runtime.GOOS == "windows" {
			return slices.ContainsFunc(list, func(n string) bool { return strings.EqualFold(n, name) })
		}
		return slices.Contains(list, name)
	}
	switch {
	case name == "" || strings.EqualFold(name, runTagEnv):
		return false
	case match(p.names):
		return true // named by the user, even one that looks secret
	case p.inherit:
		return !secretEnvName(name)
	}
	return match(baseEnvNames) || strings.HasPrefix(name, "LC_")
}

// environ is the environment of a tool's command or MCP server: the
// server's, filtered by p, plus a fresh run tag.
func (p *envPolicy) environ() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if p.keeps(name) {
			out = append(out, kv)
		}
	}
	return withRunTag(out)
}

// secretEnvName reports whether the environment variable name looks like
// it holds a secret (Options.Env "*" leaves these out): LLAMA_API_KEY,
// every LLAMA_ARG_* (the server's own settings, API keys included),
// HF_TOKEN, HUGGING_FACE_HUB_TOKEN, the names of well-known credentials,
// and any name ending in _API_KEY, _TOKEN, _SECRET, _PASSWORD, _PAT,
// _KEY, _CREDENTIALS, _SOCK or _URL (case-insensitive). The name says
// little: hence the allow-list by default.
func secretEnvName(name string) bool {
	u := strings.ToUpper(name)
	switch u {
	case "LLAMA_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", runTagEnv,
		"PGPASSWORD", "PGPASSFILE", "MYSQL_PWD", "AWS_SESSION_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID",
		"GOOGLE_APPLICATION_CREDENTIALS", "SSH_AUTH_SOCK", "GPG_AGENT_INFO", "DOCKER_AUTH_CONFIG", "NETRC":
		return true
	}
	if strings.HasPrefix(u, "LLAMA_ARG_") {
		return true
	}
	for _, s := range []string{"_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD", "_PASSWD", "_PAT", "_KEY", "_CREDENTIALS", "_SOCK", "_URL", "_DSN"} {
		if strings.HasSuffix(u, s) {
			return true
		}
	}
	return strings.Contains(u, "SECRET") || strings.Contains(u, "PASSWORD")
}

// driverEnv is the environment of the commands that drive an isolate (a
// container engine's client, ssh): the server's environment but its
// secrets, as they may need DOCKER_HOST or XDG_RUNTIME_DIR, plus
// SSH_AUTH_SOCK for ssh's agent. What runs inside the isolate gets the
// isolate's environment, never this one.
func driverEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name != "" && (!secretEnvName(name) || name == "SSH_AUTH_SOCK") {
			out = append(out, kv)
		}
	}
	return withRunTag(out)
}

// withRunTag adds a fresh run tag to env.
func withRunTag(env []string) []string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return append(env, runTagEnv+"="+hex.EncodeToString(b[:]))
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
