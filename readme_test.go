package llama_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/chat"
	"github.com/x/llama/engine"
	"github.com/x/llama/internal/gguf/gguftest"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/schema"
	"github.com/x/llama/server"
)

// The README's Go blocks are tests. Each ```go block of README.md follows
// a marker line
//
//	<!-- readme-test: FUNC in FILE -->
//
// naming a function of a test file of this package whose body holds the
// block: each line of the block, as Go tokens (comments included, their
// spacing and the line breaks and semicolons gofmt changes left aside), in
// order, with lines of the test's own (checks of the results) allowed
// between them. TestReadmeBlocks fails when a block has no marker or its
// function drifted from it; TestReadmeSnippets runs the functions on the
// test models, the files the blocks name ("model.gguf", "lora.gguf")
// linked to them in a temporary working folder.

var readmeMarker = regexp.MustCompile(`^<!-- readme-test: (\w+) in ([\w./-]+) -->$`)

type readmeBlock struct {
	line       int // of the opening fence
	fn, file   string
	lines      []string
	firstLines []int // README line of each of lines
}

// readmeBlocks returns README.md's Go blocks and their markers.
func readmeBlocks(t *testing.T) []readmeBlock {
	f, err := os.Open(filepath.Join(testenv.RepoRoot(t), "README.md"))
	require.NoError(t, err)
	defer f.Close()
	var blocks []readmeBlock
	var cur *readmeBlock
	prev := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur != nil && strings.HasPrefix(line, "```"):
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, line)
			cur.firstLines = append(cur.firstLines, n)
		case strings.TrimSpace(line) == "```go":
			cur = &readmeBlock{line: n}
			if m := readmeMarker.FindStringSubmatch(strings.TrimSpace(prev)); m != nil {
				cur.fn, cur.file = m[1], m[2]
			}
		}
		prev = line
	}
	require.NoError(t, sc.Err())
	require.Nil(t, cur, "README.md: a ```go block is not closed")
	return blocks
}

type goTok struct {
	tok token.Token
	lit string
}

// goTokens scans src as Go: its tokens but semicolons, comments with
// their spacing normalized.
func goTokens(src string) []goTok {
	var s scanner.Scanner
	fset := token.NewFileSet()
	s.Init(fset.AddFile("", -1, len(src)), []byte(src), func(token.Position, string) {}, scanner.ScanComments)
	var out []goTok
	for {
		_, tok, lit := s.Scan()
		switch tok {
		case token.EOF:
			return out
		case token.SEMICOLON:
			continue
		case token.COMMENT:
			lit = strings.Join(strings.Fields(lit), " ")
		}
		out = append(out, goTok{tok, lit})
	}
}

// funcBody returns the source of the body of function name in file.
func funcBody(t *testing.T, file, name string) string {
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
	require.NoError(t, err)
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == name && fd.Body != nil {
			return string(src[fset.Position(fd.Body.Lbrace).Offset+1 : fset.Position(fd.Body.Rbrace).Offset])
		}
	}
	t.Fatalf("%s: no function %s", file, name)
	return ""
}

// TestReadmeBlocks: every Go block of the README has a marker, and the
// function it names holds the block's lines in order.
func TestReadmeBlocks(t *testing.T) {
	blocks := readmeBlocks(t)
	require.NotEmpty(t, blocks)
	for _, b := range blocks {
		t.Run(fmt.Sprint("README.md:", b.line), func(t *testing.T) {
			require.NotEmpty(t, b.fn, "README.md:%d: a ```go block without a <!-- readme-test: FUNC in FILE --> line before it", b.line)
			body := goTokens(funcBody(t, b.file, b.fn))
			at := 0
			for i, line := range b.lines {
				want := goTokens(line)
				if len(want) == 0 {
					continue
				}
				found := -1
				for j := at; j+len(want) <= len(body); j++ {
					if equalToks(body[j:j+len(want)], want) {
						found = j
						break
					}
				}
				require.GreaterOrEqual(t, found, 0, "README.md:%d: %q is not in %s (%s) after the block's previous lines",
					b.firstLines[i], strings.TrimSpace(line), b.fn, b.file)
				at = found + len(want)
			}
		})
	}
}

func equalToks(a, b []goTok) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestReadmeDriftCaught: the comparison TestReadmeBlocks makes sees a
// changed line, and ignores only what gofmt changes.
func TestReadmeDriftCaught(t *testing.T) {
	body := goTokens("x, err := f(1,\n\t2)\nif err != nil {\n\treturn err\n}\n// a  comment\ng(); h()")
	for _, tc := range []struct {
		line string
		ok   bool
	}{
		{"x, err := f(1, 2)", true},
		{"if err != nil { return err }", true},
		{"// a comment", true},
		{"g(); h()", true},
		{"x, err := f(1, 3)", false},
		{"if err == nil { return err }", false},
		{"// another comment", false},
	} {
		want := goTokens(tc.line)
		found := false
		for j := 0; j+len(want) <= len(body); j++ {
			found = found || equalToks(body[j:j+len(want)], want)
		}
		assert.Equal(t, tc.ok, found, tc.line)
	}
}

// readmeDir makes a working folder where the README's file names lead to
// the test models, and moves there for the test.
func readmeDir(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Symlink(testenv.Model(t, "stories260K.gguf"), filepath.Join(dir, "model.gguf")))
	require.NoError(t, os.Symlink(gguftest.StoriesLoRA(t), filepath.Join(dir, "lora.gguf")))
	t.Chdir(dir)
}

// MyStruct is the README's Go type for a grammar.
type MyStruct struct {
	Name string `json:"name"`
	Age  int    `json:"age"`
}

// apiResult is what readmeAPI leaves for TestReadmeSnippets to check.
type apiResult struct {
	text      string
	generated strings.Builder
	gen       *llama.Generation
	tok       llama.Token
	vecs      [][]float32
	chain2    string
	adapter   *llama.Adapter
}

func readmeAPI(ctx context.Context, res *apiResult) error {
	model, err := llama.LoadModel(ctx, "model.gguf", llama.ModelOptions{}) // GPU layers, mmap, vocab only, KV overrides, progress
	if err != nil {
		return err
	}
	defer model.Close() // last: it closes every Context/SamplerChain/Adapter made from it
	toks, _ := model.Tokenize("Hello", llama.TokenizeOptions{AddSpecial: true})
	text, _ := model.Detokenize(toks, llama.DetokenizeOptions{})
	res.text = text

	lctx, _ := model.NewContext(llama.ContextOptions{ContextSize: 4096, Sequences: 4})
	chain, err := llama.NewSamplerChain(model, llama.SamplerChainOptions{},
		llama.Penalties(64, 1.1, 0, 0), llama.TopK(40), llama.TopP(0.95, 1), llama.MinP(0.05, 1),
		llama.Temp(0.8), llama.Dist(llama.DefaultSeed)) // the last sampler picks: Dist, Greedy, Mirostat...
	if err != nil {
		return err
	}

	for piece, err := range lctx.Generate(ctx, "Once upon a time", llama.GenerateOptions{
		MaxTokens: 128, Stop: []string{"\n\n"}, Sampler: chain}).Seq() {
		if err != nil {
			return err
		} // ctx cancellation interrupts llama.cpp mid-decode
		fmt.Print(piece.Text) // never split inside a UTF-8 character
		res.generated.WriteString(piece.Text)
	}
	gen := lctx.Generate(ctx, "Once upon a time", llama.GenerateOptions{MaxTokens: 16, Seq: 2})
	for _, err := range gen.Seq() {
		if err != nil {
			return err
		}
	}
	fmt.Println(gen.Reason(), gen.Stats().Generated, gen.Stats().GeneratedPerSecond()) // max-tokens 16 ...
	res.gen = gen

	// Low level: batches of several sequences, logits, KV memory, state.
	b := llama.NewBatch(512, 1)
	b.AddSequence(toks, 0, 1, true) // sequence 1: Generate filled sequence 0
	if err := lctx.Decode(ctx, b); err != nil {
		return err
	}
	tok, err := chain.Sample(lctx, -1)
	if err != nil {
		return err
	}
	res.tok = tok
	mem := lctx.Memory() // the KV memory: Remove, Copy, Keep, Shift, Divide, PosRange
	mem.Remove(0, 10, -1)
	mem.Shift(0, 10, -1, -5)
	mem.Copy(0, 3, 0, -1)
	state, err := lctx.SeqState(0)
	if err == nil {
		err = lctx.SetSeqState(1, state)
	}
	if err != nil {
		return err
	}

	// Embeddings: ContextSize 0 gives each of the 8 sequences the model's
	// training context (fitted to memory), room for any text it reads.
	ectx, _ := model.NewContext(llama.ContextOptions{Embeddings: true, Pooling: llama.PoolingMean, Sequences: 8})
	vecs, err := ectx.Embed(ctx, []string{"first text", "second text"}, llama.EmbedOptions{})
	if err != nil {
		return err
	}
	res.vecs = vecs

	// Grammars: GBNF, JSON Schema, or a Go type; a grammar only filters, so a
	// sampler that picks ends the chain.
	g, _ := schema.GrammarFor[MyStruct]()
	chain2, _ := llama.NewSamplerChain(model, llama.SamplerChainOptions{}, g.Sampler(), llama.Greedy())
	res.chain2 = chain2.String()

	// LoRA and control vectors, swapped without reloading the model.
	a, _ := model.LoadAdapter("lora.gguf")
	res.adapter = a
	return lctx.SetAdapters([]llama.AdapterScale{{Adapter: a, Scale: 0.5}})
}

func readmeEngine(ctx context.Context, model *llama.Model, toks []llama.Token, msgs []chat.Message, tools []chat.Tool, text string, out *chat.Message) error {
	eng, err := engine.New(model, engine.Options{Parallel: 4}) // 4 slots
	if err != nil {
		return err
	}
	defer eng.Close()                             // before model.Close
	req := engine.NewRequest(toks)                // llama-server's defaults
	req.NPredict = 256                            // default -1: until the context is full
	for ev, err := range eng.Generate(ctx, req) { // from as many goroutines as you like
		if err != nil {
			return err
		}
		fmt.Print(ev.Text)
	}

	// Chat with tools in process, as the server does it: template, tool grammar, parsed calls.
	tmpl, _ := chat.ForModel(model, nil)
	plan, _ := tmpl.Prepare(chat.Request{Messages: msgs, Tools: tools})
	req = engine.NewRequest(nil)
	req.SetChat(model, plan)      // then generate, and
	msg := plan.ParseOutput(text) // msg.ToolCalls, msg.ReasoningContent
	*out = msg
	return nil
}

// readmeHTTP stands for net/http in readmeServer: its ListenAndServe
// serves on a free port of the test's, asks /llm/health and
// /llm/completion, and returns, where net/http's would serve on
// 127.0.0.1:8080 until the process ends.
type readmeHTTP struct {
	health, completion string
}

func (*readmeHTTP) NewServeMux() *nethttp.ServeMux { return nethttp.NewServeMux() }
func (*readmeHTTP) StripPrefix(prefix string, h nethttp.Handler) nethttp.Handler {
	return nethttp.StripPrefix(prefix, h)
}
func (r *readmeHTTP) ListenAndServe(_ string, h nethttp.Handler) error {
	ts := httptest.NewServer(h)
	defer ts.Close()
	get := func(method, path, body string) (string, error) {
		req, err := nethttp.NewRequest(method, ts.URL+path, strings.NewReader(body))
		if err != nil {
			return "", err
		}
		resp, err := ts.Client().Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != nethttp.StatusOK {
			return "", fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, b)
		}
		return string(b), err
	}
	var err error
	if r.health, err = get("GET", "/llm/health", ""); err != nil {
		return err
	}
	r.completion, err = get("POST", "/llm/completion", `{"prompt": "Once upon a time", "n_predict": 8}`)
	return err
}

func readmeServer(ctx context.Context, http *readmeHTTP) error {
	srv, err := server.New(ctx, server.Options{Model: "model.gguf", Engine: engine.Options{Parallel: 4}})
	if err != nil {
		return err
	}
	defer srv.Close() // drains in-flight requests, frees the model
	mux := http.NewServeMux()
	mux.Handle("/llm/", http.StripPrefix("/llm", srv.Handler())) // mounted under a prefix
	return http.ListenAndServe("127.0.0.1:8080", mux)
}

// TestReadmeSnippets runs the README's blocks (see TestReadmeBlocks) on
// stories260K and checks what they produce.
func TestReadmeSnippets(t *testing.T) {
	ctx := context.Background()
	t.Run("api", func(t *testing.T) {
		readmeDir(t)
		var res apiResult
		require.NoError(t, readmeAPI(ctx, &res))
		assert.Equal(t, "Hello", strings.TrimSpace(res.text))
		assert.NotEmpty(t, res.generated.String())
		assert.Equal(t, llama.StopMaxTokens, res.gen.Reason())
		assert.Equal(t, 16, res.gen.Stats().Generated)
		assert.GreaterOrEqual(t, res.tok, llama.Token(0))
		require.Len(t, res.vecs, 2)
		assert.NotEqual(t, res.vecs[0], res.vecs[1])
		assert.Equal(t, "[grammar greedy]", res.chain2)
		assert.NotNil(t, res.adapter)
	})
	t.Run("engine", func(t *testing.T) {
		m := stories(t)
		toks, err := m.Tokenize("Once upon a time", llama.TokenizeOptions{AddSpecial: true})
		require.NoError(t, err)
		params, err := json.Marshal(map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}})
		require.NoError(t, err)
		msgs := []chat.Message{{Role: "user", Content: "What is the weather in Paris?"}}
		tools := []chat.Tool{{Name: "get_weather", Parameters: params}}
		var msg chat.Message
		require.NoError(t, readmeEngine(ctx, m, toks, msgs, tools, "It is sunny.", &msg))
		assert.Equal(t, "It is sunny.", msg.Content)
	})
	t.Run("server", func(t *testing.T) {
		readmeDir(t)
		var http readmeHTTP
		require.NoError(t, readmeServer(ctx, &http))
		assert.Contains(t, http.health, `"ok"`)
		var c struct {
			Content string `json:"content"`
		}
		require.NoError(t, json.Unmarshal([]byte(http.completion), &c))
		assert.NotEmpty(t, c.Content)
	})
}
