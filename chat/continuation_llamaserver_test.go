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

// How llama-server v0.4.0 renders a new turn (whole) and ends a prompt
// after the user's message, for a new turn and for an assistant message
// continued (its content, its reasoning, or by prefill), is recorded per
// template in
// testdata/llama-server-continuations.json. Record it again with
//
//	go test ./chat -run TestContinuationsAsLlamaServer -args -record-continuations
//
// which runs the reference llama-server on stories260K once per template
// with --jinja --chat-template-file and asks /apply-template.
var recordContinuations = flag.Bool("record-continuations", false, "record llama-server's prompt ends per template into testdata")

const continuationsFile = "testdata/llama-server-continuations.json"

// continuationUser is the user's message: a prompt's end is what follows
// its last occurrence.
const continuationUser = "Bonjour"

// continuationCases are the chats compared, as our Request and as
// llama-server's request body.
var continuationCases = []struct {
	name  string
	last  *Message // the assistant message at the end, if any
	cont  string   // continue_final_message ("": none, or prefill)
	whole bool     // compare the whole prompt (the system block too)
}{
	{name: "new turn"},
	{name: "new turn, whole", whole: true},
	{name: "content", last: &Message{Role: RoleAssistant, Content: "Hello, ", ReasoningContent: "I'm thinking"}, cont: "content"},
	{name: "reasoning", last: &Message{Role: RoleAssistant, ReasoningContent: "I'm"}, cont: "reasoning_content"},
	{name: "prefill", last: &Message{Role: RoleAssistant, Content: "Hello, ", ReasoningContent: "I'm thinking"}},
}

// continuationDeviations are the prompt ends where ours differs from
// llama-server's, and why; the test checks they still differ.
var continuationDeviations = map[string]string{
	"Apriel-1.6-15b-Thinker-fixed.jinja/content":   "llama-server drops the generation prompt's 'Here are my reasoning steps:' line; ours drops the reasoning, which the template does not show",
	"Apriel-1.6-15b-Thinker-fixed.jinja/reasoning": "as content",
	"Apriel-1.6-15b-Thinker-fixed.jinja/prefill":   "as content",
	"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja/content": "ours closes the block as the template closes an earlier turn's " +
		"(\\n</think>\\n), llama-server's analysis with \\n</think>\\n\\n",
	"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja/prefill": "as content",
	"StepFun3.5-Flash.jinja/content":                    "as Nemotron 3 Nano's",
	"StepFun3.5-Flash.jinja/prefill":                    "as content",
	"poolside-Laguna-XS-2.1.jinja/content":              "ours closes the block as the template closes an earlier turn's (\\n</think>\\n), llama-server's analysis without the newlines",
	"poolside-Laguna-XS-2.1.jinja/prefill":              "as content",
	"poolside-Laguna-XS.2.jinja/content":                "as XS-2.1's",
	"poolside-Laguna-XS.2.jinja/prefill":                "as content",
	"NVIDIA-Nemotron-Nano-v2.jinja/content":             "llama-server keeps the newline after the generation prompt's <think>; ours opens the block with <think> alone, as for the R1 distills, where llama-server does too",
	"NVIDIA-Nemotron-Nano-v2.jinja/reasoning":           "as content",
	"NVIDIA-Nemotron-Nano-v2.jinja/prefill":             "as content",
	"llama-cpp-rwkv-world.jinja/content":                "llama-server writes <think> twice (the generation prompt's and its own)",
	"llama-cpp-rwkv-world.jinja/reasoning":              "as content",
	"llama-cpp-rwkv-world.jinja/prefill":                "as content",
	"muse-glimmer.jinja/content":                        "Muse Glimmer's format is not supported (toolFormatsMissing): its reasoning is dropped",
	"muse-glimmer.jinja/reasoning":                      "as content",
	"muse-glimmer.jinja/prefill":                        "as content",
}

// TestContinuationsAsLlamaServer: for every template of llama.cpp's
// folder, the prompt after the user's message ends as llama-server's,
// for a new turn and for each way of continuing an assistant message,
// but for the deviations listed.
func TestContinuationsAsLlamaServer(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(templatesDir(t), "*.jinja"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	if *recordContinuations {
		recordContinuationsFile(t, files)
		return
	}
	b, err := os.ReadFile(continuationsFile)
	require.NoError(t, err, "record it with -record-continuations")
	var want map[string]map[string]string
	require.NoError(t, json.Unmarshal(b, &want))
	same, deviating := 0, 0
	for _, f := range files {
		name := filepath.Base(f)
		rec, ok := want[name]
		require.True(t, ok, "%s is not recorded: record again", name)
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		tmpls := testTemplates(t, string(src))
		tmpls.AddBOS = true // stories260K's tokenizer adds <s>, which llama-server takes off the prompt
		for _, c := range continuationCases {
			key := name + "/" + c.name
			w, ok := rec[c.name]
			require.True(t, ok, key)
			msgs := []Message{{Role: RoleSystem, Content: "You are a helpful assistant."}, {Role: RoleUser, Content: continuationUser}}
			req := Request{}
			if c.last != nil {
				msgs = append(msgs, *c.last)
				req.Continue, req.NoGenerationPrompt = c.cont, c.cont != ""
			}
			req.Messages = msgs
			var got string
			if p, err := tmpls.Prepare(req); err != nil {
				got = "error"
			} else if got = promptEnd(p.Prompt); c.whole {
				got = p.Prompt
			}
			if why, ok := continuationDeviations[key]; ok {
				assert.NotEqual(t, w, got, "%s now matches llama-server: take it out of continuationDeviations (%s)", key, why)
				deviating++
				continue
			}
			assert.Equal(t, w, got, key)
			same++
		}
	}
	t.Logf("%d prompt ends as llama-server's, %d listed deviations", same, deviating)
}

// promptEnd is what follows the user's message in a prompt.
func promptEnd(prompt string) string {
	i := strings.LastIndex(prompt, continuationUser)
	if i < 0 {
		return "no user message"
	}
	return prompt[i+len(continuationUser):]
}

func recordContinuationsFile(t *testing.T, files []string) {
	bin, model := testenv.LlamaServer(t), testenv.Model(t, "stories260K.gguf")
	out := map[string]map[string]string{}
	sort.Strings(files)
	for _, f := range files {
		name := filepath.Base(f)
		rec := map[string]string{}
		t.Run(name, func(t *testing.T) {
			base := testenv.RunHTTPServer(t, bin, filepath.Dir(model), "-m", model, "-t", "1", "-np", "1", "-c", "2048",
				"--jinja", "--chat-template-file", f)
			for _, c := range continuationCases {
				msgs := []any{map[string]any{"role": "system", "content": "You are a helpful assistant."},
					map[string]any{"role": "user", "content": continuationUser}}
				body := map[string]any{}
				if c.last != nil {
					msgs = append(msgs, map[string]any{"role": "assistant", "content": c.last.Content, "reasoning_content": c.last.ReasoningContent})
					if c.cont != "" {
						body["continue_final_message"], body["add_generation_prompt"] = c.cont, false
					}
				}
				body["messages"] = msgs
				data, err := json.Marshal(body)
				require.NoError(t, err)
				resp, err := http.Post(base+"/apply-template", "application/json", bytes.NewReader(data))
				require.NoError(t, err)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					rec[c.name] = "error"
					continue
				}
				var r struct {
					Prompt string `json:"prompt"`
				}
				require.NoError(t, json.Unmarshal(b, &r), string(b))
				rec[c.name] = promptEnd(r.Prompt)
				if c.whole {
					rec[c.name] = r.Prompt
				}
			}
		})
		out[name] = rec
	}
	b, err := json.MarshalIndent(out, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(continuationsFile, append(b, '\n'), 0o644))
	fmt.Println("recorded", len(out), "templates")
}
