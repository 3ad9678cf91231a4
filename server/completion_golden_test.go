package server

import (
	"flag"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/wiregolden"
)

// -update rewrites the golden files this server's tests record of
// themselves (testdata/completion/own, the web UI's screenshots).
var _ = func() bool {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files")
	}
	return true
}()

func updatingGolden() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// goldenOwn are the cases whose answers by this server differ from
// llama-server's as a whole, with why. Their golden files under
// testdata/completion/own are this server's own answers (go test ./server
// -run TestCompletionGolden -update rewrites them), kept to hold its wire
// format; llama-server's answers stay beside the others.
var goldenOwn = map[string]string{
	"chat_tool_call": "llama-server v0.4.0 finds no tool-call format in tools.jinja (it warns that the template " +
		"does not describe tools) and answers free text even under tool_choice required; this server finds the " +
		"Hermes format in the calls the template renders and constrains them, which this case covers",
	"chat_tool_call_stream": "the same as chat_tool_call, streamed",
	"error_unknown_role": "llama-server renders a message of an unknown role as the template does and answers it; " +
		"this server refuses it with a 400 naming the roles it knows",
}

// goldenAside are the fields in which this server's answers differ from
// llama-server's, with why; they are taken out of both answers before
// they are compared. In names a case, or is empty for every case; Parent
// is the name of the objects holding Fields, "" for the top-level ones.
var goldenAside = []struct {
	In, Parent string
	Fields     []string
	Why        string
}{
	{"", "generation_settings", []string{"cache_prompt", "id_slot", "model", "n_ctx", "t_max_predict_ms"},
		"fields of generation_settings this server reports and the pinned llama-server does not"},
	{"", "generation_settings", []string{"chat_format", "generation_prompt", "grammar_lazy", "grammar_triggers", "n_discard",
		"preserved_tokens", "reasoning_format", "reasoning_in_content"},
		"fields of generation_settings of llama-server's chat parsing and context shift this server does not report"},
	{"", "generation_settings", []string{"dry_penalty_last_n"},
		"the default (-1, the whole context) is reported resolved: to the slot's context here (512), to 64 by the pinned llama-server"},
	{"chat", "", []string{"model"},
		"this server names the request's model, as OpenAI does; llama-server its loaded model"},
	{"error_invalid_grammar", "error", []string{"message"},
		"this server says where the grammar is wrong; llama-server only that the samplers failed"},
	{"error_n_predict_string", "error", []string{"message"},
		"this server's message names the field and the type it wants in its own words"},
}

// asideFor returns the function that takes goldenAside's fields of case
// name out of a JSON value.
func asideFor(name string) func(any) any {
	var drop func(v any, parent string)
	drop = func(v any, parent string) {
		switch x := v.(type) {
		case map[string]any:
			for _, a := range goldenAside {
				if (a.In == "" || a.In == name) && a.Parent == parent {
					for _, f := range a.Fields {
						delete(x, f)
					}
				}
			}
			for k, val := range x {
				drop(val, k)
			}
		case []any:
			for _, val := range x {
				drop(val, parent)
			}
		}
	}
	return func(v any) any { drop(v, ""); return v }
}

// Wire transcripts of the generation endpoints against llama-server's,
// recorded by go run ./internal/cmd/record-completion from the requests
// of testdata/completion/cases.json, but for the fields goldenAside lists
// and the cases goldenOwn does.
func TestCompletionGolden(t *testing.T) {
	dir := filepath.Join("testdata", "completion")
	f, err := wiregolden.ReadFile(filepath.Join(dir, "cases.json"))
	require.NoError(t, err)
	require.Len(t, f.Cases, 16)
	tools, err := os.ReadFile(filepath.Join(dir, wiregolden.ToolsTemplate))
	require.NoError(t, err)
	require.Equal(t, genericToolsTemplate, string(tools), "the tool cases' template is the tests' generic one")
	// As llama-server is recorded (args): -t 1 -np 2 -c 1024, chatml
	// without Jinja; the tool cases with tools.jinja.
	_, ts := newTestServer(t, Options{ChatTemplate: "chatml"})
	_, toolsTS := newTestServer(t, Options{ChatTemplate: string(tools)})
	for _, c := range f.Cases {
		t.Run(c.Name, func(t *testing.T) {
			base := ts.URL
			if c.Tools {
				base = toolsTS.URL
			}
			got, err := wiregolden.Transcript(base, c.Path, c.Body)
			require.NoError(t, err)
			if why, own := goldenOwn[c.Name]; own {
				t.Logf("compared with this server's own answer: %s", why)
				file := wiregolden.Golden(filepath.Join(dir, "own"), c.Name)
				if updatingGolden() {
					require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
					require.NoError(t, os.WriteFile(file, []byte(got), 0o644))
					return
				}
				want, err := os.ReadFile(file)
				require.NoError(t, err, "run with -update to create it")
				requireGoldenClose(t, string(want), got)
				return
			}
			want, err := os.ReadFile(wiregolden.Golden(dir, c.Name))
			require.NoError(t, err, "record it with go run ./internal/cmd/record-completion")
			aside := asideFor(c.Name)
			wantText, err := wiregolden.Rewrite(string(want), aside)
			require.NoError(t, err)
			gotText, err := wiregolden.Rewrite(got, aside)
			require.NoError(t, err)
			requireGoldenClose(t, wantText, gotText)
		})
	}
}

// goldenFloat matches a JSON number with a fraction.
var goldenFloat = regexp.MustCompile(`-?[0-9]+\.[0-9]+(?:[eE][-+]?[0-9]+)?`)

// requireGoldenClose requires got to be want but for numbers with a
// fraction, which may differ by 0.002: log-probabilities differ in their
// last digits between the CPU variants of ggml the library picks.
func requireGoldenClose(t *testing.T, want, got string) {
	t.Helper()
	shape := func(s string) (string, []float64) {
		var nums []float64
		text := goldenFloat.ReplaceAllStringFunc(s, func(m string) string {
			f, err := strconv.ParseFloat(m, 64)
			require.NoError(t, err)
			nums = append(nums, f)
			return "<f>"
		})
		return text, nums
	}
	wantText, wantNums := shape(want)
	gotText, gotNums := shape(got)
	if wantText != gotText || len(wantNums) != len(gotNums) {
		require.Equal(t, want, got)
	}
	for i := range wantNums {
		if math.Abs(wantNums[i]-gotNums[i]) > 0.002 {
			require.Equal(t, want, got, "number %d: %v against %v", i, gotNums[i], wantNums[i])
		}
	}
}
