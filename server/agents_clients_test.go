//go:build agents

package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/x/llama"
	"github.com/x/llama/engine"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/internal/testenv"
)

// The suite of real agent clients: each pinned client (installed with npm
// into LLAMA_AGENTS_NPM by .ci/run) runs one headless turn, then one turn
// that asks for its shell tool (none of them can force a tool call from
// its command line), against a proxy on 127.0.0.1 that sends every chat
// request to both llama-server built from the pinned source and this
// server, on Gemma 3 270M with its template, answers the client with this
// server's answer, and compares the two: the status, the refusal reason,
// the prompt's length, the stream's event kinds and its end.

// agentsSuiteCtx bounds the context: Claude Code's and opencode's prompts
// (about 4k and 2k of Gemma's tokens) are answered, qwen-code's (7k to 8k)
// are refused by both servers for their length, which compares their
// length without prefilling them, and keeps the suite short on two cores.
const (
	agentsSuiteCtx       = 6144
	agentsSuiteMaxTokens = 16
	agentsClientTimeout  = 6 * time.Minute
)

// agentClient is a pinned client and how to run one headless turn of it.
type agentClient struct {
	name, pkg, version, bin string
	// run returns the arguments and environment of a turn with prompt
	// against base (the proxy's URL), in the client's own home and
	// working folders, which it may write its settings into.
	run func(t *testing.T, base, home, work, prompt string, tool bool) ([]string, []string)
}

var agentClients = []agentClient{
	{name: "claude-code", pkg: "@anthropic-ai/claude-code", version: "2.1.332", bin: "claude",
		run: func(t *testing.T, base, home, work, prompt string, tool bool) ([]string, []string) {
			args := []string{"-p", prompt, "--max-turns", "1"}
			if tool {
				args = []string{"-p", prompt, "--max-turns", "2", "--allowedTools", "Bash"}
			}
			return args, []string{"ANTHROPIC_BASE_URL=" + base, "ANTHROPIC_API_KEY=sk-dummy",
				"DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1",
				"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}
		}},
	{name: "codex", pkg: "@openai/codex", version: "0.171.0", bin: "codex",
		run: func(t *testing.T, base, home, work, prompt string, tool bool) ([]string, []string) {
			dir := filepath.Join(home, ".codex")
			require.NoError(t, os.MkdirAll(dir, 0o755))
			config := fmt.Sprintf(`model = "gemma"
model_provider = "local"
check_for_update_on_startup = false
[model_providers.local]
name = "local"
base_url = "%s/v1"
wire_api = "responses"
env_key = "LOCAL_API_KEY"
[analytics]
enabled = false
`, base)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "config.toml"), []byte(config), 0o644))
			return []string{"exec", "--skip-git-repo-check", prompt}, []string{"CODEX_HOME=" + dir, "LOCAL_API_KEY=sk-dummy"}
		}},
	{name: "opencode", pkg: "opencode-ai", version: "1.18.33", bin: "opencode",
		run: func(t *testing.T, base, home, work, prompt string, tool bool) ([]string, []string) {
			config := fmt.Sprintf(`{"autoupdate": false, "share": "disabled", "model": "local/gemma",
  "provider": {"local": {"npm": "@ai-sdk/openai-compatible", "name": "local",
    "options": {"baseURL": "%s/v1", "apiKey": "sk-dummy"}, "models": {"gemma": {"name": "gemma"}}}}}`, base)
			require.NoError(t, os.WriteFile(filepath.Join(work, "opencode.json"), []byte(config), 0o644))
			return []string{"run", prompt}, []string{"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_SHARE=1",
				"OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1"}
		}},
	{name: "qwen-code", pkg: "@qwen-code/qwen-code", version: "0.24.4", bin: "qwen",
		run: func(t *testing.T, base, home, work, prompt string, tool bool) ([]string, []string) {
			dir := filepath.Join(home, ".qwen")
			require.NoError(t, os.MkdirAll(dir, 0o755))
			settings := `{"security":{"auth":{"selectedType":"openai"}},"privacy":{"usageStatisticsEnabled":false},"telemetry":{"enabled":false}}`
			require.NoError(t, os.WriteFile(filepath.Join(dir, "settings.json"), []byte(settings), 0o644))
			args := []string{"-p", prompt}
			if tool {
				args = append(args, "--yolo")
			}
			return args, []string{"OPENAI_BASE_URL=" + base + "/v1", "OPENAI_API_KEY=sk-dummy", "OPENAI_MODEL=gemma"}
		}},
}

// agentExchange is one chat request of a client and both servers' outcomes.
type agentExchange struct {
	path      string
	ref, ours agentOutcome
	err       error
}

// teeProxy sends each chat request to both servers (llama-server first),
// made short to answer, and answers with this server's answer; anything
// else goes to this server alone.
type teeProxy struct {
	ref, ours string
	mu        sync.Mutex
	log       []agentExchange
}

func (p *teeProxy) exchanges() []agentExchange {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.log
	p.log = nil
	return out
}

func (p *teeProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	chatPath := r.Method == http.MethodPost && (strings.HasSuffix(r.URL.Path, "/messages") ||
		strings.HasSuffix(r.URL.Path, "/responses") || strings.HasSuffix(r.URL.Path, "/chat/completions"))
	if !chatPath {
		u, _ := url.Parse(p.ours)
		httputil.NewSingleHostReverseProxy(u).ServeHTTP(w, r)
		return
	}
	ex := agentExchange{path: r.URL.Path}
	defer func() {
		p.mu.Lock()
		p.log = append(p.log, ex)
		p.mu.Unlock()
	}()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		ex.err = err
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	body, err = shortAgentRequest(r.URL.Path, body)
	if err != nil {
		ex.err = err
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	send := func(base string) (int, http.Header, []byte, error) {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, base+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			return 0, nil, nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Close = true
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, nil, err
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, raw, err
	}
	refStatus, refHeader, refRaw, err := send(p.ref)
	if err == nil {
		ex.ref, err = agentAnswer(refStatus, refHeader.Get("Content-Type"), refRaw)
	}
	if err != nil {
		ex.err = fmt.Errorf("llama-server: %w", err)
	}
	status, header, raw, err := send(p.ours)
	if err == nil {
		ex.ours, err = agentAnswer(status, header.Get("Content-Type"), raw)
	}
	if err != nil && ex.err == nil {
		ex.err = fmt.Errorf("this server: %w", err)
	}
	if header != nil {
		w.Header().Set("Content-Type", header.Get("Content-Type"))
	}
	if status == 0 {
		status = http.StatusBadGateway
	}
	w.WriteHeader(status)
	_, _ = w.Write(raw)
}

// shortAgentRequest makes a client's request short to answer: a few
// tokens, greedy, so that both servers give the same text.
func shortAgentRequest(path string, body []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	n := json.RawMessage(strconv.Itoa(agentsSuiteMaxTokens))
	if strings.HasSuffix(path, "/responses") {
		m["max_output_tokens"] = n
	} else {
		delete(m, "max_completion_tokens")
		m["max_tokens"] = n
	}
	m["temperature"] = json.RawMessage("0")
	return json.Marshal(m)
}

// TestAgentsClients runs the pinned agent clients against both servers.
func TestAgentsClients(t *testing.T) {
	npm := os.Getenv("LLAMA_AGENTS_NPM")
	require.NotEmpty(t, npm, "LLAMA_AGENTS_NPM must name the folder the pinned clients are installed in (.ci/run installs them)")
	for _, c := range agentClients {
		var pj struct {
			Version string `json:"version"`
		}
		raw, err := os.ReadFile(filepath.Join(npm, "node_modules", c.pkg, "package.json"))
		require.NoError(t, err, "%s is not installed in %s", c.pkg, npm)
		require.NoError(t, json.Unmarshal(raw, &pj))
		require.Equal(t, c.version, pj.Version, "%s is pinned", c.pkg)
	}
	model := testenv.RealModel(t, "gemma3-270m")
	tmpl := gemmaTemplateFile(t)
	ref := testenv.RunHTTPServer(t, testenv.LlamaServer(t), "", "-m", model, "-c", strconv.Itoa(agentsSuiteCtx),
		"-np", "1", "-t", "2", "-tb", "2", "--jinja", "--chat-template-file", tmpl)
	_, ours := newTestServer(t, Options{Model: model, ChatTemplateFile: tmpl, Jinja: true,
		Engine: engine.Options{Parallel: 1, Context: llama.ContextOptions{ContextSize: agentsSuiteCtx, Threads: 2, ThreadsBatch: 2}}})
	proxy := &teeProxy{ref: ref, ours: ours.URL}
	ps := httptest.NewServer(proxy)
	t.Cleanup(ps.Close)
	dev := agentDeviations(t)

	turns := []struct {
		name, prompt string
		tool         bool
	}{
		{"hi", "Say hi", false},
		{"tool", "Run the shell command 'echo hi' with your shell tool.", true},
	}
	for _, c := range agentClients {
		for _, turn := range turns {
			t.Run(c.name+"-"+c.version+"/"+turn.name, func(t *testing.T) {
				home, work := t.TempDir(), t.TempDir()
				args, env := c.run(t, ps.URL, home, work, turn.prompt, turn.tool)
				ctx, cancel := context.WithTimeout(context.Background(), agentsClientTimeout)
				defer cancel()
				cmd := exec.CommandContext(ctx, filepath.Join(npm, "node_modules", ".bin", c.bin), args...)
				cmd.Dir = work
				// A home of its own; no proxy, so that nothing leaves 127.0.0.1.
				cmd.Env = append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TERM=dumb", "CI=1", "NO_COLOR=1",
					"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"),
					"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"), "XDG_STATE_HOME=" + filepath.Join(home, ".local", "state")}, env...)
				cmd.WaitDelay = 10 * time.Second
				var outBuf bytes.Buffer
				cmd.Stdout, cmd.Stderr = &outBuf, &outBuf
				runErr := cmd.Run()
				exs := proxy.exchanges()
				t.Logf("%s %s: exit %v; %d chat requests; output: %s", c.name, turn.name, runErr, len(exs), tailText(outBuf.String(), 600))
				require.NoError(t, ctx.Err(), "the client ran past %s", agentsClientTimeout)
				require.NotEmpty(t, exs, "the client sent no chat request")
				for i, ex := range exs {
					id := fmt.Sprintf("%s %d", ex.path, i+1)
					require.NoError(t, ex.err, id)
					t.Logf("%s: llama-server %+v; this server %+v", id, ex.ref, ex.ours)
					assert.Equal(t, ex.ref.Status, ex.ours.Status, "%s: status (llama-server %q, this server %q)", id, ex.ref.Reason, ex.ours.Reason)
					assert.Equal(t, ex.ref.Reason, ex.ours.Reason, "%s: refusal reason", id)
					assert.Equal(t, ex.ref.PromptTokens, ex.ours.PromptTokens, "%s: prompt tokens", id)
					if ex.ref.Status == http.StatusOK {
						assert.True(t, ex.ref.Complete && ex.ours.Complete, "%s: complete streams", id)
						assert.Equal(t, ex.ref.Events, withoutDeviations(ex.ours.Events, dev), "%s: stream events", id)
					}
				}
			})
		}
	}
}
