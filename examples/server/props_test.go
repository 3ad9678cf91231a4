package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/testenv"
)

// The /props answers of llama.cpp's llama-server (v0.4.0, built from the
// pinned source) are recorded in testdata/llama-server-props, one file per
// set of arguments. Record them again with
//
//	go test ./examples/server -run TestPropsAsLlamaServer -args -record-props
//
// which runs the reference llama-server (go run ./lib/cmd/llama-install
// -server builds it) with each case's arguments in the test models' folder.
var recordProps = flag.Bool("record-props", false, "record /props of the reference llama-server into testdata")

// propsRecording is one recorded answer and the arguments that produced
// it; "{src}" in an argument stands for the llama.cpp source folder.
type propsRecording struct {
	Args  []string       `json:"args"`
	Props map[string]any `json:"props"`
}

// propsCases are the argument sets recorded: the defaults; the flags that
// /props reports (--props, the MCP proxy, the endpoints, the alias, the
// UI and its settings); a Jinja template with tools and reasoning.
var propsCases = []struct {
	name string
	args []string
}{
	{"default", []string{"-m", "stories260K.gguf", "-c", "2048", "-np", "1"}},
	{"flags", []string{"-m", "stories260K.gguf", "-c", "1024", "-np", "2", "--props", "--ui-mcp-proxy", "--metrics",
		"--no-slots", "-a", "tiny-stories", "--no-ui", "--ui-config", `{"theme":"dark","showTokensPerSecond":true}`}},
	{"qwen3-template", []string{"-m", "stories260K.gguf", "-c", "1024", "-np", "1", "--jinja",
		"--chat-template-file", "{src}/models/templates/Qwen-Qwen3-0.6B.jinja"}},
	{"gpt-oss-template", []string{"-m", "stories260K.gguf", "-c", "1024", "-np", "1", "--jinja",
		"--chat-template-file", "{src}/models/templates/openai-gpt-oss-120b.jinja"}},
}

// propsValuesEqual are the fields whose values, not only types, must be
// llama-server's. build_info and media_marker differ by design (checked
// by pattern); default_generation_settings.params is compared value by
// value below.
var propsValuesEqual = []string{"total_slots", "model_alias", "model_path", "model_ftype", "modalities",
	"endpoint_slots", "endpoint_props", "endpoint_metrics", "ui", "ui_settings", "chat_template",
	"chat_template_caps", "chat_template_tool_use", "bos_token", "eos_token", "is_sleeping", "cors_proxy_enabled"}

// TestPropsAsLlamaServer compares GET /props of this server with
// llama-server's recorded answer for the same arguments: the same keys at
// every level with values of the same JSON types, and the same values for
// what describes the model, the template and the flags.
func TestPropsAsLlamaServer(t *testing.T) {
	models := testenv.ModelsDir(t)
	src := testenv.LlamaSrc(t)
	var bin string
	if *recordProps {
		bin = testenv.LlamaServer(t)
	} else {
		bin = buildServer(t)
	}
	for _, tc := range propsCases {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join("testdata", "llama-server-props", tc.name+".json")
			args := make([]string, len(tc.args))
			for i, a := range tc.args {
				args[i] = strings.ReplaceAll(a, "{src}", src)
			}
			base := testenv.RunHTTPServer(t, bin, models, append(args, "-t", "1")...)
			got := getJSON(t, base+"/props")
			if *recordProps {
				b, err := json.MarshalIndent(propsRecording{Args: tc.args, Props: got}, "", "  ")
				require.NoError(t, err)
				require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
				require.NoError(t, os.WriteFile(file, append(b, '\n'), 0o644))
				return
			}
			b, err := os.ReadFile(file)
			require.NoError(t, err, "record it with -record-props")
			var want propsRecording
			require.NoError(t, json.Unmarshal(b, &want))
			require.Equal(t, tc.args, want.Args, "%s was recorded with other arguments: record it again", file)

			var diffs []string
			shapeDiff("", want.Props, got, &diffs)
			assert.Empty(t, diffs, "keys or types that differ from llama-server's")
			for _, k := range propsValuesEqual {
				assert.Equal(t, want.Props[k], got[k], k)
			}
			wantDGS, gotDGS := want.Props["default_generation_settings"].(map[string]any), got["default_generation_settings"].(map[string]any)
			assert.Equal(t, wantDGS["n_ctx"], gotDGS["n_ctx"], "default_generation_settings.n_ctx")
			// The sampling defaults, value by value. llama-server prints
			// its float32 settings widened to double (0.800000011920929),
			// this server as float32 (0.8): numbers match to float32.
			wantParams, gotParams := wantDGS["params"].(map[string]any), gotDGS["params"].(map[string]any)
			for k, w := range wantParams {
				if wf, ok := w.(float64); ok {
					if gf, ok := gotParams[k].(float64); assert.True(t, ok, "params.%s: %v", k, gotParams[k]) {
						assert.Equal(t, float32(wf), float32(gf), "params.%s", k)
					}
					continue
				}
				assert.Equal(t, w, gotParams[k], "params.%s", k)
			}
			assert.Regexp(t, `^b`, got["build_info"], "build_info: clients read a build number after the b")
			assert.Regexp(t, regexp.MustCompile(`^<__media_[A-Za-z0-9]{32}__>$`), got["media_marker"])
		})
	}
}

// shapeDiff lists where b differs from a in its keys or JSON types.
func shapeDiff(path string, a, b any, out *[]string) {
	if jsonType(a) != jsonType(b) {
		*out = append(*out, fmt.Sprintf("%s: %s, llama-server's is %s", path, jsonType(b), jsonType(a)))
		return
	}
	am, ok := a.(map[string]any)
	if !ok {
		return
	}
	bm := b.(map[string]any)
	keys := map[string]bool{}
	for k := range am {
		keys[k] = true
	}
	for k := range bm {
		keys[k] = true
	}
	var sorted []string
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		p := k
		if path != "" {
			p = path + "." + k
		}
		av, inA := am[k]
		bv, inB := bm[k]
		switch {
		case !inB:
			*out = append(*out, p+": missing")
		case !inA:
			*out = append(*out, p+": not in llama-server's")
		default:
			shapeDiff(p, av, bv, out)
		}
	}
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func getJSON(t *testing.T, url string) map[string]any {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", url, b)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m), "%s", b)
	return m
}
