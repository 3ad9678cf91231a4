package server

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/chat"
	"github.com/x/llama/internal/testenv"
)

// testdata/llama-server-template-caps.json holds, for every template of
// the pinned llama.cpp source's models/templates, the chat_template_caps
// that llama-server v0.4.0 reports in /props when given it with --jinja
// --chat-template-file. Record it again with
//
//	go test ./server -run TestTemplateCapsAsLlamaServer -args -record-caps
//
// which runs the reference llama-server (go run ./lib/cmd/llama-install
// -server builds it) once per template.
var recordCaps = flag.Bool("record-caps", false, "record the template caps of the reference llama-server into testdata")

// TestTemplateCapsAsLlamaServer compares the chat_template_caps this
// server reports for each of llama.cpp's templates with llama-server's.
func TestTemplateCapsAsLlamaServer(t *testing.T) {
	src := testenv.LlamaSrc(t)
	files, err := filepath.Glob(filepath.Join(src, "models", "templates", "*.jinja"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	sort.Strings(files)
	file := filepath.Join("testdata", "llama-server-template-caps.json")
	if *recordCaps {
		bin := testenv.LlamaServer(t)
		model := testenv.Model(t, "stories260K.gguf")
		rec := map[string]map[string]bool{}
		for _, f := range files {
			name := filepath.Base(f)
			t.Run(name, func(t *testing.T) {
				url := testenv.RunHTTPServer(t, bin, "", "-m", model, "-c", "512", "-np", "1", "-t", "1", "--jinja", "--chat-template-file", f)
				var props struct {
					Caps map[string]bool `json:"chat_template_caps"`
				}
				code, body := call(t, "GET", url+"/props", "", nil)
				require.Equal(t, 200, code)
				require.NoError(t, json.Unmarshal(body, &props))
				rec[name] = props.Caps
			})
		}
		b, err := json.MarshalIndent(rec, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(file, append(b, '\n'), 0o644))
		return
	}
	b, err := os.ReadFile(file)
	require.NoError(t, err, "record it with -record-caps")
	var want map[string]map[string]bool
	require.NoError(t, json.Unmarshal(b, &want))
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(strings.TrimSuffix(name, ".jinja"), func(t *testing.T) {
			w, ok := want[name]
			require.True(t, ok, "%s is not recorded: record again", name)
			text, err := os.ReadFile(f)
			require.NoError(t, err)
			tmpl, err := chat.ParseTemplate(patchTemplate(string(text)))
			require.NoError(t, err)
			assert.Equal(t, w, templateCapsJSON(tmpl.Caps()))
		})
	}
}
