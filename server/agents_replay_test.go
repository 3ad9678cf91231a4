package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/x/llama"
	"github.com/x/llama/engine"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The requests of real agent clients (testdata/agents, one folder per
// client and version) are replayed through the handlers with stories260K,
// on chatml and on Gemma 3's template, and the outcome is compared with
// llama-server's on the same request, recorded in
// testdata/agents/llama-server.json by the agents suite
// (go test -tags agents -run TestAgentsReference -agents.update ./server/).
// Each request is sent as recorded, which is longer than stories260K's
// context (both servers refuse it, naming the same prompt length), and
// shrunk (every string cut short) so that it fits and is answered.

const (
	agentsDir      = "testdata/agents"
	agentsRefFile  = "llama-server.json"
	agentsCtx      = 2048 // stories260K's training context, which both servers cap to
	agentsMaxToken = 8
	agentsShrinkTo = 48 // bytes a shrunk string keeps
)

// agentTemplates are the chat templates the recordings are replayed on: a
// name, our Options and llama-server's flags for it.
func agentTemplates(t *testing.T) []struct {
	name    string
	opts    Options
	refArgs []string
} {
	gemma := gemmaTemplateFile(t)
	return []struct {
		name    string
		opts    Options
		refArgs []string
	}{
		{"chatml", Options{ChatTemplate: "chatml"}, []string{"--chat-template", "chatml"}},
		{"gemma3", Options{ChatTemplateFile: gemma}, []string{"--chat-template-file", gemma}},
	}
}

// agentRecording is one recorded request body.
type agentRecording struct {
	ID   string // client-version/turn/NNN_path, the key in llama-server.json
	Path string // the URL path posted to
	Body []byte
}

// agentRecordings lists the recorded requests in order.
func agentRecordings(t *testing.T) []agentRecording {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(agentsDir, "*", "*", "*.json"))
	require.NoError(t, err)
	var out []agentRecording
	for _, f := range files {
		if strings.HasSuffix(f, ".meta.json") {
			continue
		}
		body, err := os.ReadFile(f)
		require.NoError(t, err)
		metaRaw, err := os.ReadFile(strings.TrimSuffix(f, ".json") + ".meta.json")
		require.NoError(t, err, "each recording has its .meta.json")
		var meta struct {
			Path string `json:"path"`
		}
		require.NoError(t, json.Unmarshal(metaRaw, &meta))
		path, _, _ := strings.Cut(meta.Path, "?")
		rel, err := filepath.Rel(agentsDir, f)
		require.NoError(t, err)
		out = append(out, agentRecording{ID: filepath.ToSlash(strings.TrimSuffix(rel, ".json")), Path: path, Body: body})
	}
	require.NotEmpty(t, out, "no recordings in %s", agentsDir)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// agentBody is a recording made short to answer: a few tokens at
// temperature 0, and when shrink every string value cut to a few bytes,
// so that the prompt fits stories260K's context.
func agentBody(t *testing.T, rec agentRecording, shrink bool) []byte {
	t.Helper()
	var body map[string]any
	require.NoError(t, json.Unmarshal(rec.Body, &body))
	if rec.Path == "/v1/responses" {
		body["max_output_tokens"] = agentsMaxToken
	} else {
		delete(body, "max_completion_tokens")
		body["max_tokens"] = agentsMaxToken
	}
	body["temperature"] = 0
	if shrink {
		for k, v := range body {
			if k != "model" {
				body[k] = shrinkStrings(v)
			}
		}
	}
	out, err := json.Marshal(body)
	require.NoError(t, err)
	return out
}

// shrinkStrings cuts every string inside v to agentsShrinkTo bytes (on a
// rune boundary). Strings that are JSON text (tool arguments) are kept.
func shrinkStrings(v any) any {
	switch x := v.(type) {
	case string:
		if len(x) <= agentsShrinkTo || json.Valid([]byte(x)) {
			return x
		}
		n := agentsShrinkTo
		for n > 0 && !utf8.RuneStart(x[n]) {
			n--
		}
		return x[:n]
	case []any:
		for i := range x {
			x[i] = shrinkStrings(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = shrinkStrings(x[k])
		}
	}
	return v
}

// agentOutcome is what a server made of a request, in terms both servers
// share.
type agentOutcome struct {
	Status int `json:"status"`
	// Reason is why a request was refused: "context" (longer than the
	// context), the text a template raised, or the error message.
	Reason string `json:"reason,omitempty"`
	// PromptTokens is the length of the rendered prompt: from the usage
	// of an answer, or from the error of a request longer than the context.
	PromptTokens int `json:"prompt_tokens"`
	// Events are the kinds of the stream's events in order, repeats of
	// one kind counted once.
	Events []string `json:"events,omitempty"`
	// Complete is whether the stream ended as its dialect ends one.
	Complete bool `json:"complete,omitempty"`
}

var (
	agentTooLong = regexp.MustCompile(`request \((\d+) tokens\) exceeds the available context size`)
	// The text a template raised: llama-server's "Jinja Exception: ...",
	// ours "template raised: ...".
	agentRaised = regexp.MustCompile(`(?:Jinja Exception|template raised): ([^\n"]+)`)
)

// replayAgent posts body to base+path and describes the answer.
func replayAgent(t *testing.T, base, path string, body []byte) agentOutcome {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Close = true // llama-server closes idle connections, which a POST is not retried on
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out, err := agentAnswer(resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	require.NoError(t, err)
	return out
}

// agentAnswer describes an answer: its status, content type and body.
func agentAnswer(status int, contentType string, raw []byte) (agentOutcome, error) {
	out := agentOutcome{Status: status}
	if status != http.StatusOK {
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			return out, fmt.Errorf("error body %q: %w", raw, err)
		}
		msg := e.Error.Message
		switch {
		case agentTooLong.MatchString(msg):
			out.Reason = "context"
			out.PromptTokens, _ = strconv.Atoi(agentTooLong.FindStringSubmatch(msg)[1])
		case agentRaised.MatchString(msg):
			out.Reason = agentRaised.FindStringSubmatch(msg)[1]
		default:
			out.Reason = msg
		}
		return out, nil
	}
	if !strings.Contains(contentType, "text/event-stream") {
		return out, fmt.Errorf("not a stream (every recorded client streams): %s", contentType)
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	last := ""
	add := func(kind string) {
		if kind != last {
			out.Events = append(out.Events, kind)
			last = kind
		}
	}
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			add("[DONE]")
			out.Complete = true
			continue
		}
		var ev struct {
			Type    string `json:"type"`
			Message *struct {
				Usage agentUsage `json:"usage"`
			} `json:"message"`
			Response *struct {
				Usage *agentUsage `json:"usage"`
			} `json:"response"`
			Usage   *agentUsage `json:"usage"`
			Choices []struct {
				Delta struct {
					Role             string            `json:"role"`
					Content          *string           `json:"content"`
					ReasoningContent *string           `json:"reasoning_content"`
					ToolCalls        []json.RawMessage `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return out, fmt.Errorf("event %q: %w", data, err)
		}
		switch {
		case ev.Type != "":
			add(ev.Type)
			if ev.Type == "message_stop" || ev.Type == "response.completed" {
				out.Complete = true
			}
		case len(ev.Choices) > 0:
			c := ev.Choices[0]
			switch {
			case c.FinishReason != nil:
				add("finish:" + *c.FinishReason)
			case len(c.Delta.ToolCalls) > 0:
				add("tool_calls")
			case c.Delta.ReasoningContent != nil && *c.Delta.ReasoningContent != "":
				add("reasoning")
			case c.Delta.Content != nil && *c.Delta.Content != "":
				add("content")
			case c.Delta.Role != "":
				add("role")
			}
		case ev.Usage != nil:
			add("usage")
		}
		for _, u := range []*agentUsage{ev.Usage, usageOf(ev.Message), usageOfResp(ev.Response)} {
			if u != nil && u.prompt() > 0 {
				out.PromptTokens = u.prompt()
			}
		}
	}
	return out, sc.Err()
}

// agentUsage is the usage of any of the three dialects.
type agentUsage struct {
	PromptTokens         int `json:"prompt_tokens"`           // chat completions
	InputTokens          int `json:"input_tokens"`            // messages, responses
	CacheReadInputTokens int `json:"cache_read_input_tokens"` // messages: counted apart from input_tokens
}

func (u agentUsage) prompt() int {
	return u.PromptTokens + u.InputTokens + u.CacheReadInputTokens
}

func usageOf(m *struct {
	Usage agentUsage `json:"usage"`
}) *agentUsage {
	if m == nil {
		return nil
	}
	return &m.Usage
}

func usageOfResp(r *struct {
	Usage *agentUsage `json:"usage"`
}) *agentUsage {
	if r == nil {
		return nil
	}
	return r.Usage
}

// agentReference is llama-server's outcome of every recording, by
// template, then recording ID, then "recorded" or "shrunk".
type agentReference map[string]map[string]map[string]agentOutcome

func readAgentReference(t *testing.T) agentReference {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(agentsDir, agentsRefFile))
	require.NoError(t, err, "record it: go test -tags agents -run TestAgentsReference -agents.update ./server/")
	var ref agentReference
	require.NoError(t, json.Unmarshal(raw, &ref))
	return ref
}

// agentDeviations reads testdata/agents/deviations.txt: "id: reason" lines.
func agentDeviations(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(agentsDir, "deviations.txt"))
	require.NoError(t, err)
	out := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, reason, ok := strings.Cut(line, ": ")
		require.True(t, ok && reason != "", "deviation without a reason: %q", line)
		out[id] = reason
	}
	return out
}

// withoutDeviations returns events without the kinds the deviations allow
// this server to add.
func withoutDeviations(events []string, dev map[string]string) []string {
	var out []string
	for _, e := range events {
		if _, ok := dev["event/"+e]; !ok {
			out = append(out, e)
		}
	}
	return out
}

// agentServer starts this server on stories260K as the reference was
// recorded: one slot, the whole training context.
func agentServer(t *testing.T, o Options) string {
	o.Jinja = true
	o.Engine = engine.Options{Parallel: 1, Context: llama.ContextOptions{ContextSize: agentsCtx}}
	_, ts := newTestServer(t, o)
	return ts.URL
}

// TestAgentsReplay replays every recorded agent request on both templates,
// as recorded and shrunk, and requires llama-server's outcome: the same
// status, the same reason for a refusal, the same prompt length, and for
// an answer a complete stream with the same sequence of event kinds.
func TestAgentsReplay(t *testing.T) {
	ref := readAgentReference(t)
	dev := agentDeviations(t)
	recs := agentRecordings(t)
	for _, tmpl := range agentTemplates(t) {
		t.Run(tmpl.name, func(t *testing.T) {
			url := agentServer(t, tmpl.opts)
			answered := 0
			for _, rec := range recs {
				for _, variant := range []string{"recorded", "shrunk"} {
					t.Run(rec.ID+"/"+variant, func(t *testing.T) {
						want, ok := ref[tmpl.name][rec.ID][variant]
						require.True(t, ok, "no reference for %s %s: record it again", rec.ID, variant)
						got := replayAgent(t, url, rec.Path, agentBody(t, rec, variant == "shrunk"))
						assert.Equal(t, want.Status, got.Status, "status (%s)", got.Reason)
						assert.Equal(t, want.Reason, got.Reason)
						assert.Equal(t, want.PromptTokens, got.PromptTokens, "prompt tokens")
						if want.Status == http.StatusOK {
							answered++
							assert.True(t, got.Complete, "the stream ends as its dialect ends one: %v", got.Events)
							assert.Equal(t, want.Events, withoutDeviations(got.Events, dev))
						}
					})
				}
			}
			if tmpl.name == "chatml" {
				// Every shrunk request is answered on chatml.
				assert.GreaterOrEqual(t, answered, len(recs))
			}
		})
	}
}
