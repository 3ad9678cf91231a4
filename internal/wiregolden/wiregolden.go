// Package wiregolden writes the wire transcripts of server requests that
// the completion golden files hold: the request, the status and the body,
// with what differs by nature between two runs or two servers (ids,
// creation times, timings, slot numbers) replaced by placeholders. The
// recorder (internal/cmd/record-completion) writes llama-server's; the
// test of package server compares its own with them.
package wiregolden

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// File is server/testdata/completion/cases.json: the requests and the
// flags of llama-server they are recorded with.
type File struct {
	Comment string `json:"comment"`
	// Args are llama-server's flags besides -m, --host and --port;
	// PlainArgs are added for the cases without Tools, ToolsArgs (and
	// --chat-template-file with ToolsTemplate) for those with.
	Args      []string `json:"args"`
	PlainArgs []string `json:"plain_args"`
	ToolsArgs []string `json:"tools_args"`
	Cases     []Case   `json:"cases"`
}

// Case is one request.
type Case struct {
	Name string          `json:"name"`
	Path string          `json:"path"`
	Body json.RawMessage `json:"body"`
	// Tools serves the case with a chat template that knows of tools
	// (ToolsTemplate beside the cases).
	Tools bool `json:"tools,omitempty"`
}

// ToolsTemplate is the file, beside the cases, of the chat template of
// the cases with Tools.
const ToolsTemplate = "tools.jinja"

// ReadFile reads a cases file.
func ReadFile(path string) (*File, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f File
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &f, nil
}

// Golden returns the golden file of case name in dir.
func Golden(dir, name string) string { return filepath.Join(dir, name+".golden") }

// Normalize replaces what differs by nature between runs and servers with
// placeholders: creation times, ids, timings, the build
// (system_fingerprint), the slot a request ran on and what that slot had
// cached, and the model's folder. Numbers are
// rounded to 4 decimals, and long strings are replaced by their length.
func Normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			switch k {
			case "created":
				x[k] = 0
			case "model":
				if s, ok := val.(string); ok {
					x[k] = filepath.Base(s)
				}
			case "tokens_cached", "cached_tokens", "id_slot":
				if _, ok := val.(float64); ok {
					x[k] = "<n>"
				}
			case "timings":
				x[k] = "<timings>"
			case "id":
				if _, ok := val.(string); ok {
					x[k] = "<id>"
				}
			case "system_fingerprint":
				x[k] = "<build>"
			default:
				x[k] = Normalize(val)
			}
		}
	case []any:
		for i := range x {
			x[i] = Normalize(x[i])
		}
	case float64:
		return math.Round(x*1e4) / 1e4
	case string:
		if len(x) > 200 {
			return fmt.Sprintf("<%d bytes>", len(x))
		}
	}
	return v
}

// NormalizedJSON is data normalized, indented or on one line.
func NormalizedJSON(data []byte, indent bool) (string, error) {
	return rewriteJSON(string(data), Normalize, indent)
}

// Transcript posts body to base+path and writes the exchange as text: the
// request, the status and the body (indented JSON, or one line per
// Server-Sent Event), normalized.
func Transcript(base, path string, body json.RawMessage) (string, error) {
	req, err := NormalizedJSON(body, false)
	if err != nil {
		return "", err
	}
	resp, err := http.Post(base+path, "application/json", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var sb strings.Builder
	fmt.Fprintf(&sb, "POST %s\n%s\n\n%d %s\n", path, req, resp.StatusCode, contentType(resp.Header.Get("Content-Type")))
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if line == "" {
				continue
			}
			field, payload, _ := strings.Cut(line, ": ")
			if payload != "[DONE]" && strings.HasPrefix(payload, "{") {
				if payload, err = NormalizedJSON([]byte(payload), false); err != nil {
					return "", err
				}
			}
			fmt.Fprintf(&sb, "%s: %s\n", field, payload)
		}
		return sb.String(), sc.Err()
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	out, err := NormalizedJSON(data, true)
	if err != nil {
		return "", err
	}
	sb.WriteString(out + "\n")
	return sb.String(), nil
}

// contentType is the media type of a Content-Type, lower-case, without
// its parameters: servers differ in the charset they name.
func contentType(v string) string {
	mt, _, _ := strings.Cut(v, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// Rewrite applies fn to every JSON value of a transcript (the request,
// the body or each event's data) and writes the transcript again.
func Rewrite(text string, fn func(any) any) (string, error) {
	head, rest, ok := strings.Cut(text, "\n\n")
	if !ok {
		return "", fmt.Errorf("not a transcript: %q", text)
	}
	method, req, _ := strings.Cut(head, "\n")
	req, err := rewriteJSON(req, fn, false)
	if err != nil {
		return "", err
	}
	status, body, _ := strings.Cut(rest, "\n")
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s\n%s\n\n%s\n", method, req, status)
	if !strings.HasSuffix(status, " text/event-stream") {
		out, err := rewriteJSON(body, fn, true)
		if err != nil {
			return "", err
		}
		sb.WriteString(out + "\n")
		return sb.String(), nil
	}
	for line := range strings.Lines(body) {
		line = strings.TrimSuffix(line, "\n")
		field, payload, _ := strings.Cut(line, ": ")
		if strings.HasPrefix(payload, "{") {
			if payload, err = rewriteJSON(payload, fn, false); err != nil {
				return "", err
			}
		}
		fmt.Fprintf(&sb, "%s: %s\n", field, payload)
	}
	return sb.String(), nil
}

func rewriteJSON(text string, fn func(any) any, indent bool) (string, error) {
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return "", fmt.Errorf("%w: %s", err, text)
	}
	v = fn(v)
	var out []byte
	var err error
	if indent {
		out, err = json.MarshalIndent(v, "", "  ")
	} else {
		out, err = json.Marshal(v)
	}
	return string(out), err
}
