package chat

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/internal/testenv"
)

// What llama.cpp's llama-server (v0.4.0, built from the pinned source)
// makes of tools with each chat template is recorded in
// testdata/llama-server-tool-formats.json. Record it again with
//
//	go test ./chat -run TestToolFormatsAsLlamaServer -args -record-tool-formats
//
// which runs the reference llama-server on stories260K once per template
// with --jinja --chat-template-file, sends a chat with two tools (tool
// choice auto, then required) and reads the request's grammar from GET
// /slots (LLAMA_SERVER_SLOTS_DEBUG shows a slot's full parameters).
var recordToolFormats = flag.Bool("record-tool-formats", false, "record llama-server's tool handling per template into testdata")

const toolFormatsFile = "testdata/llama-server-tool-formats.json"

// toolFormatReading is llama-server's handling of one tool choice: whether
// a grammar constrains the answer, whether it waits for a trigger, and
// the trigger words; Error is its answer when it refused the request.
type toolFormatReading struct {
	Grammar  bool     `json:"grammar"`
	Lazy     bool     `json:"lazy"`
	Triggers []string `json:"triggers"`
	Error    string   `json:"error,omitempty"`
}

type toolFormatRecording struct {
	Auto     toolFormatReading `json:"auto"`
	Required toolFormatReading `json:"required"`
}

// toolFormatTemplates are the templates compared: llama.cpp's test cases
// in testdata, Gemma 3's (server/testdata) and those bundled with
// llama.cpp, by a name -> source.
func toolFormatTemplates(t *testing.T) map[string]string {
	out := map[string]string{}
	var cases []struct {
		Name string `json:"name"`
		Src  string `json:"template_str"`
	}
	b, err := os.ReadFile(filepath.Join("testdata", "template_llama", "chat_template_cases.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &cases))
	for _, c := range cases {
		out["case: "+c.Name] = c.Src
	}
	b, err = os.ReadFile(filepath.Join("..", "server", "testdata", "gemma3-chat-template.jinja"))
	require.NoError(t, err)
	out["gemma3-chat-template.jinja"] = string(b)
	out["hermesTemplate (prepare_test.go)"] = hermesTemplate
	files, err := filepath.Glob(filepath.Join(templatesDir(t), "*.jinja"))
	require.NoError(t, err)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		out[filepath.Base(f)] = string(b)
	}
	return out
}

// toolFormatsMissing are the templates for which llama.cpp v0.4.0 has a
// tool-call format this package lacks (its specialized handlers, or markers
// its template analysis finds that DetectFormat does not know). With them
// the answer to a chat offering tools is free text here.
var toolFormatsMissing = map[string]string{
	"muse-glimmer.jinja": "Muse Glimmer: to=<recipient> headers and <|eom|>",
}

var toolFormatTools = []Tool{
	{Name: "get_weather", Description: "Weather of a city", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
	{Name: "get_time", Description: "The time", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)},
}

const toolFormatQuestion = "What is the weather in Paris?"

// TestToolFormatsAsLlamaServer: for every template, a chat offering tools
// is constrained as llama-server v0.4.0 constrains it. With tool choice
// required a grammar forces a call exactly when llama-server's chat
// parser finds a tool-call format in the template; with auto the grammar
// is lazy and waits for the same trigger words. A template whose tool
// calls llama-server cannot place gets no grammar: the answer is free
// text, not a generic JSON envelope.
func TestToolFormatsAsLlamaServer(t *testing.T) {
	tmpls := toolFormatTemplates(t)
	if *recordToolFormats {
		recordToolFormatsFile(t, tmpls)
		return
	}
	b, err := os.ReadFile(toolFormatsFile)
	require.NoError(t, err, "record it with -record-tool-formats")
	var want map[string]toolFormatRecording
	require.NoError(t, json.Unmarshal(b, &want))
	for name, src := range tmpls {
		t.Run(name, func(t *testing.T) {
			rec, ok := want[name]
			require.True(t, ok, "%s is not recorded: record again", name)
			if why, ok := toolFormatsMissing[name]; ok {
				// A format this package does not have: the tools are
				// shown, the answer is free text, no grammar is made.
				assert.True(t, rec.Required.Grammar, "%s has a format in llama-server (%s)", name, why)
				parsed, err := ParseTemplate(src)
				require.NoError(t, err)
				ts := &Templates{Default: NewJinjaRenderer(parsed)}
				assert.Equal(t, FormatContentOnly, ts.Default.Format())
				return
			}
			parsed, err := ParseTemplate(src)
			require.NoError(t, err)
			ts := &Templates{Default: NewJinjaRenderer(parsed)}
			for _, c := range []struct {
				mode string
				want toolFormatReading
			}{{"auto", rec.Auto}, {"required", rec.Required}} {
				if c.want.Error != "" {
					// Refused by llama-server for a reason of its own
					// (noted in the file); nothing to compare.
					continue
				}
				plan, err := ts.Prepare(Request{Messages: []Message{{Role: RoleUser, Content: toolFormatQuestion}},
					Tools: toolFormatTools, ToolChoice: ToolChoice{Mode: c.mode}, FreeTextToolChoice: true})
				require.NoError(t, err, c.mode)
				assert.Equal(t, c.want.Grammar, plan.Grammar != "", "%s: grammar (our format: %s)", c.mode, ts.Default.Format())
				if c.want.Grammar && plan.Grammar != "" {
					assert.Equal(t, c.want.Lazy, plan.GrammarLazy, "%s: lazy grammar", c.mode)
				}
			}
		})
	}
}

func recordToolFormatsFile(t *testing.T, tmpls map[string]string) {
	bin, model := testenv.LlamaServer(t), testenv.Model(t, "stories260K.gguf")
	t.Setenv("LLAMA_SERVER_SLOTS_DEBUG", "1")
	var tools []map[string]any
	for _, tl := range toolFormatTools {
		tools = append(tools, map[string]any{"type": "function", "function": map[string]any{
			"name": tl.Name, "description": tl.Description, "parameters": tl.Parameters}})
	}
	names := make([]string, 0, len(tmpls))
	for n := range tmpls {
		names = append(names, n)
	}
	sort.Strings(names)
	out := map[string]toolFormatRecording{}
	dir := t.TempDir()
	for i, name := range names {
		file := filepath.Join(dir, fmt.Sprintf("t%d.jinja", i))
		require.NoError(t, os.WriteFile(file, []byte(tmpls[name]), 0o644))
		var rec toolFormatRecording
		t.Run(name, func(t *testing.T) {
			base := testenv.RunHTTPServer(t, bin, filepath.Dir(model), "-m", model, "-t", "1", "-np", "1", "-c", "8192",
				"--slots", "--jinja", "--chat-template-file", file)
			for _, c := range []struct {
				mode string
				dst  *toolFormatReading
			}{{"auto", &rec.Auto}, {"required", &rec.Required}} {
				body, _ := json.Marshal(map[string]any{"messages": []any{map[string]any{"role": "user", "content": toolFormatQuestion}},
					"tools": tools, "tool_choice": c.mode, "max_tokens": 4, "temperature": 0})
				resp, err := http.Post(base+"/v1/chat/completions", "application/json", bytes.NewReader(body))
				require.NoError(t, err)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					var e struct {
						Error struct{ Message string } `json:"error"`
					}
					_ = json.Unmarshal(b, &e)
					c.dst.Error = cmpOr(e.Error.Message, fmt.Sprint(resp.StatusCode))
					continue
				}
				resp, err = http.Get(base + "/slots")
				require.NoError(t, err)
				var slots []struct {
					Params struct {
						Grammar  string `json:"grammar"`
						Lazy     bool   `json:"grammar_lazy"`
						Triggers []struct {
							Value string `json:"value"`
						} `json:"grammar_triggers"`
					} `json:"params"`
				}
				require.NoError(t, json.NewDecoder(resp.Body).Decode(&slots))
				resp.Body.Close()
				require.Len(t, slots, 1)
				p := slots[0].Params
				c.dst.Grammar, c.dst.Lazy, c.dst.Triggers = p.Grammar != "", p.Lazy, []string{}
				for _, tr := range p.Triggers {
					c.dst.Triggers = append(c.dst.Triggers, tr.Value)
				}
			}
		})
		out[name] = rec
		t.Logf("%s: %+v", name, rec)
	}
	b, err := json.MarshalIndent(out, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(toolFormatsFile, append(b, '\n'), 0o644))
}

func cmpOr(a, b string) string {
	if strings.TrimSpace(a) != "" {
		return a
	}
	return b
}
