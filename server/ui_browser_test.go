//go:build browser

package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/x/llama"
	"github.com/x/llama/engine"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/internal/browsertest"
	"github.com/x/llama/internal/testenv"
)

// newBrowser starts a headless chromium with a fresh profile and returns a
// tab's context; everything is closed by t.Cleanup.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	return browsertest.New(t, browsertest.Options{})
}

// do runs browser actions and fails the test on error.
func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx, steps...))
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	require.NoError(t, err, expr)
	return v
}

// text is the visible text of the first element matching a CSS selector.
func text(t *testing.T, ctx context.Context, css string) string {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(css)))
	require.NoError(t, err, css)
	return v
}

// js runs a JavaScript statement for its effect.
func js(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](expr)
}

// waitJS waits until the JavaScript expression is true.
func waitJS(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(5*time.Millisecond), chromedp.WithPollingTimeout(90*time.Second))
}

// storedMessage is a message as the page keeps it in localStorage.
type storedMessage struct {
	ID       string         `json:"id"`
	Role     string         `json:"role"`
	Content  string         `json:"content"`
	Done     bool           `json:"done"`
	Finish   string         `json:"finish"`
	Stopped  bool           `json:"stopped"`
	Error    string         `json:"error"`
	Timings  map[string]any `json:"timings"`
	Model    string         `json:"model"`
	Attached []struct {
		Kind, Name, Text string
	} `json:"attachments"`
}

type storedConv struct {
	ID       string          `json:"id"`
	Title    string          `json:"title"`
	Messages []storedMessage `json:"messages"`
}

func storedConvs(t *testing.T, ctx context.Context) []storedConv {
	t.Helper()
	raw := eval[string](t, ctx, `localStorage.getItem('llama-ui.conversations') || '[]'`)
	var convs []storedConv
	require.NoError(t, json.Unmarshal([]byte(raw), &convs))
	return convs
}

// recordPartials starts recording, in the page, the lengths of the last
// assistant message's text seen while a reply streams.
const recordPartials = `
window.__partials = [];
new MutationObserver(() => {
  const c = document.querySelector('.msg.assistant:last-of-type .content');
  if (document.body.dataset.busy === '1' && c) {
    const n = c.textContent.length;
    if (n > 0 && window.__partials[window.__partials.length - 1] !== n) window.__partials.push(n);
  }
}).observe(document.getElementById('messages'), {subtree: true, childList: true, characterData: true});
true`

// pacedFlush makes every flush of h's responses wait d first, as a slow
// model or network would.
func pacedFlush(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&pacedWriter{ResponseWriter: w, d: d}, r)
	})
}

type pacedWriter struct {
	http.ResponseWriter
	d time.Duration
}

func (w *pacedWriter) FlushError() error {
	time.Sleep(w.d) // the subject: a slow model or network
	return http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *pacedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestWebUIInBrowser drives the chat page in a real chromium: the page
// loads under a prefix, a message streams stories260K's answer in (partial
// text is seen before the end), a long reply is stopped mid-way, a reload
// keeps the conversation, and the Markdown renderer is safe. It saves
// screenshots of both themes (in testdata with -update).
func TestWebUIInBrowser(t *testing.T) {
	s, _ := newTestServer(t, Options{Engine: engine.Options{Parallel: 1, Context: llama.ContextOptions{ContextSize: 2048}}})
	mux := http.NewServeMux()
	mux.Handle("/llm/", http.StripPrefix("/llm", s.Handler()))
	// Streams paced at 5 ms a flush: stories260K writes a 96-token reply in
	// a few milliseconds, which a loaded machine's browser may render in
	// one frame (no partial text to see) and a long one may finish before
	// the Stop click lands.
	ts := httptest.NewServer(pacedFlush(mux, 5*time.Millisecond)) // 127.0.0.1
	t.Cleanup(ts.Close)
	page := ts.URL + "/llm/"
	ctx := newBrowser(t)

	do(t, ctx,
		chromedp.Navigate(page),
		chromedp.WaitVisible(chromedp.ID("input")),
		// Greedy, short replies, then a fresh page with those settings.
		js(`localStorage.setItem('llama-ui.settings', JSON.stringify({temperature: 0, max_tokens: 96}))`),
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.ID("input")),
		waitJS(`document.body.dataset.ready === '1' && document.getElementById('model-name').textContent !== ''`),
	)

	assert.Equal(t, "stories260K.gguf", text(t, ctx, "#model-name"))

	t.Run("stream", func(t *testing.T) {
		do(t, ctx,
			js(recordPartials),
			chromedp.SendKeys(chromedp.ID("input"), "Once upon a time"),
			chromedp.Click(chromedp.ID("send-btn")),
			waitJS(`document.body.dataset.busy === '0' && !!document.querySelector('.msg.assistant.done')`),
		)
		partials := eval[[]int](t, ctx, `window.__partials`)
		convs := storedConvs(t, ctx)
		require.Len(t, convs, 1)
		require.Len(t, convs[0].Messages, 2)
		reply := convs[0].Messages[1]
		require.Empty(t, reply.Error)
		require.NotEmpty(t, reply.Content)
		// The reply grew in the page while it streamed: several partial
		// lengths, each shorter than the whole reply.
		require.GreaterOrEqual(t, len(partials), 2, "partial text seen while streaming: %v", partials)
		assert.Less(t, partials[0], len(reply.Content))
		assert.Equal(t, "Once upon a time", convs[0].Title)

		// It is stories260K's greedy answer, as the API gives it.
		want := chatContent(t, ts.URL+"/llm/v1/chat/completions", map[string]any{
			"messages":    []map[string]string{{"role": "user", "content": "Once upon a time"}},
			"temperature": 0, "max_tokens": 96,
		})
		assert.Equal(t, want, reply.Content)

		// The timings of the last chunk are shown.
		require.NotNil(t, reply.Timings)
		stats := text(t, ctx, ".msg.assistant .stats")
		assert.Equal(t, "length", reply.Finish)
		assert.Regexp(t, `^Prompt: \d+ tokens, [\d.]+ s, [\d.]+ t/s · Generation: 96 tokens, [\d.]+ s, [\d.]+ t/s · Token limit reached$`, stats)
		shown := text(t, ctx, ".msg.assistant .content")
		assert.Equal(t, strings.Join(strings.Fields(want), " "), strings.Join(strings.Fields(shown), " "))
	})

	t.Run("stop", func(t *testing.T) {
		// A reply that would run to the end of the context, stopped as soon
		// as some of it is shown.
		do(t, ctx,
			js(`localStorage.setItem('llama-ui.settings', JSON.stringify({temperature: 0, max_tokens: -1, custom: '{"ignore_eos": true}'}))`),
			chromedp.Reload(),
			chromedp.WaitVisible(chromedp.CSS(".msg.assistant")),
			js(recordPartials),
			chromedp.SendKeys(chromedp.ID("input"), "Tell me a long story"),
			chromedp.Click(chromedp.ID("send-btn")),
			waitJS(`document.body.dataset.busy === '1' && document.querySelector('.msg.assistant:last-of-type .content').textContent.length > 40`),
			chromedp.Click(chromedp.ID("stop-btn")),
			waitJS(`document.body.dataset.busy === '0'`),
		)
		partials := eval[[]int](t, ctx, `window.__partials`)
		convs := storedConvs(t, ctx)
		require.Len(t, convs[0].Messages, 4)
		reply := convs[0].Messages[3]
		assert.True(t, reply.Stopped, "marked stopped")
		assert.Empty(t, reply.Finish, "the last chunk never came: the reply was cut mid-way")
		assert.Nil(t, reply.Timings, "the last chunk never came: the reply was cut mid-way")
		assert.Empty(t, reply.Error)
		require.NotEmpty(t, partials)
		assert.GreaterOrEqual(t, len(reply.Content), partials[len(partials)-1])

		// The server sees the client go and frees the slot.
		require.Eventually(t, func() bool { return !slotBusy(t, ts.URL+"/llm/slots") }, 30*time.Second, 20*time.Millisecond)
		// The page is idle: the partial text stays, Send is back.
		shown := text(t, ctx, ".msg.assistant:last-of-type .content")
		stats := text(t, ctx, ".msg.assistant:last-of-type .stats")
		sendVisible := eval[bool](t, ctx, `!document.getElementById('send-btn').hidden && document.getElementById('stop-btn').hidden`)
		assert.Equal(t, strings.Join(strings.Fields(reply.Content), " "), strings.Join(strings.Fields(shown), " "))
		assert.Equal(t, "Stopped", stats)
		assert.True(t, sendVisible)
	})

	t.Run("reload keeps the conversation", func(t *testing.T) {
		before := storedConvs(t, ctx)
		do(t, ctx,
			chromedp.Reload(),
			chromedp.WaitVisible(chromedp.CSS(".msg.assistant")),
		)
		texts := eval[[]string](t, ctx, `Array.from(document.querySelectorAll('.msg')).map(m => m.querySelector(m.classList.contains('user') ? '.bubble' : '.content').innerText)`)
		listed := eval[[]string](t, ctx, `Array.from(document.querySelectorAll('#conv-list .conv-open')).map(b => b.textContent)`)
		assert.Equal(t, before, storedConvs(t, ctx))
		require.Len(t, texts, 4)
		assert.Equal(t, "Once upon a time", texts[0])
		assert.Equal(t, strings.Join(strings.Fields(before[0].Messages[1].Content), " "), strings.Join(strings.Fields(texts[1]), " "))
		assert.Equal(t, "Tell me a long story", texts[2])
		assert.Equal(t, []string{"Once upon a time"}, listed)
	})

	t.Run("markdown", func(t *testing.T) {
		for _, tc := range []struct{ in, want string }{
			{"# Title\n\nSome **bold**, *italic*, `code` and ~~gone~~.",
				`<h1>Title</h1><p>Some <strong>bold</strong>, <em>italic</em>, <code>code</code> and <del>gone</del>.</p>`},
			{"<img src=x onerror=alert(1)><script>alert(1)</script>",
				`<p>&lt;img src=x onerror=alert(1)&gt;&lt;script&gt;alert(1)&lt;/script&gt;</p>`},
			{"[a](javascript:alert(1)) [b](https://example.com/?q=1&r=\"2\")",
				`<p>a <a href="https://example.com/?q=1&amp;r=&quot;2&quot;" target="_blank" rel="noopener noreferrer">b</a></p>`},
			{"- one\n- two\n  - nested\n1. first",
				`<ul><li>one</li><li>two<ul><li>nested</li></ul></li></ul><ol><li>first</li></ol>`},
			{"```go\nfmt.Println(\"<b>\") // **not bold**\n```\nafter",
				`<div class="codeblock"><div class="code-head"><span>go</span><button type="button" class="copy">Copy</button></div>` +
					`<pre><code class="language-go">fmt.Println(&quot;&lt;b&gt;&quot;) // **not bold**</code></pre></div><p>after</p>`},
			{"```\nunclosed <while> streaming", `<div class="codeblock"><div class="code-head"><span>text</span><button type="button" class="copy">Copy</button></div>` +
				`<pre><code>unclosed &lt;while&gt; streaming</code></pre></div>`},
			{"> quoted\n\n---\nline one\nline two", `<blockquote>quoted</blockquote><hr><p>line one<br>line two</p>`},
			{"see https://x.org/*a*_b_ and [**x**](https://y.org/a*b*c) `*c*`\u0000",
				`<p>see <a href="https://x.org/*a*_b_" target="_blank" rel="noopener noreferrer">https://x.org/*a*_b_</a> and ` +
					`<a href="https://y.org/a*b*c" target="_blank" rel="noopener noreferrer"><strong>x</strong></a> <code>*c*</code></p>`},
		} {
			in, _ := json.Marshal(tc.in)
			got := eval[string](t, ctx, fmt.Sprintf(`window.llamaUI.renderMarkdown(%s)`, in))
			assert.Equal(t, tc.want, got, "markdown of %q", tc.in)
		}
	})

	t.Run("screenshots", func(t *testing.T) {
		for _, theme := range []string{"light", "dark"} {
			do(t, ctx,
				js(fmt.Sprintf(`localStorage.setItem('llama-ui.theme', '"%s"')`, theme)),
				chromedp.Reload(),
				chromedp.WaitVisible(chromedp.CSS(".msg.assistant")),
				waitJS(fmt.Sprintf(`document.documentElement.dataset.theme === '%s' && document.getElementById('model-name').textContent !== ''`, theme)),
			)
			png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
			require.NoError(t, err)
			name := "webui-screenshot.png"
			if theme == "dark" {
				name = "webui-screenshot-dark.png"
			}
			// The kept screenshots under testdata change only with -update;
			// every run writes its own where $LLAMA_TEST_ARTIFACTS says
			// (CI keeps them), else in the test's temporary folder.
			dir := os.Getenv("LLAMA_TEST_ARTIFACTS")
			if updatingGolden() {
				dir = "testdata"
			} else if dir == "" {
				dir = t.TempDir()
			}
			require.NoError(t, os.MkdirAll(dir, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
			require.NotEmpty(t, png)
		}
	})
}

// chatContent answers a non-streamed chat completion and returns the
// message's content.
func chatContent(t *testing.T, url string, body any) string {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(url, "application/json", strings.NewReader(string(b)))
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	require.Equal(t, http.StatusOK, decodeAnswer(t, resp, err, &out))
	require.Len(t, out.Choices, 1)
	return out.Choices[0].Message.Content
}

// slotBusy reports whether a slot of the server is processing.
func slotBusy(t *testing.T, url string) bool {
	t.Helper()
	resp, err := http.Get(url)
	var slots []struct {
		IsProcessing bool `json:"is_processing"`
	}
	require.Equal(t, http.StatusOK, decodeAnswer(t, resp, err, &slots))
	for _, s := range slots {
		if s.IsProcessing {
			return true
		}
	}
	return false
}

// openPage loads the page of a test server in a new browser.
func openPage(t *testing.T, url string) context.Context {
	t.Helper()
	ctx := newBrowser(t)
	do(t, ctx,
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.ID("input")),
		waitJS(`document.body.dataset.ready === '1'`),
	)
	return ctx
}

// sendMessage types a message, sends it and waits for the reply's end.
func sendMessage(t *testing.T, ctx context.Context, msg string) storedMessage {
	t.Helper()
	n := eval[int](t, ctx, `document.querySelectorAll('.msg.assistant.done').length`)
	do(t, ctx,
		chromedp.SendKeys(chromedp.ID("input"), msg),
		chromedp.Click(chromedp.ID("send-btn")),
		waitJS(fmt.Sprintf(`document.body.dataset.busy === '0' && document.querySelectorAll('.msg.assistant.done').length === %d`, n+1)),
	)
	convs := storedConvs(t, ctx)
	require.NotEmpty(t, convs)
	for _, c := range convs {
		if len(c.Messages) == 0 {
			continue
		}
		if last := c.Messages[len(c.Messages)-1]; last.Role == "assistant" && !last.Stopped {
			return last
		}
	}
	t.Fatalf("no reply stored: %+v", convs)
	return storedMessage{}
}

// TestWebUIReasoningAndToolCalls streams a scripted Qwen 3 answer through
// the real server: the page shows the reasoning in a collapsible block,
// the Markdown content and the tool call.
func TestWebUIReasoningAndToolCalls(t *testing.T) {
	ts, inst, real := newScriptServer(t)
	inst.Engine = scriptEngine{engineAPI: real, stop: engine.StopTypeEOS, pieces: []string{
		"<think>", "The user wants", " the weather.", "</think>",
		"Let me **check** that.\n",
		"<tool_call>\n{\"name\": \"get_weather\", ", "\"arguments\": {\"city\": \"Rome\"}}\n</tool_call>",
	}}
	ctx := openPage(t, ts.URL+"/")
	tools := `[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]`
	custom, err := json.Marshal(map[string]string{"custom": `{"tools": ` + tools + `}`})
	require.NoError(t, err)
	do(t, ctx, js(fmt.Sprintf(`localStorage.setItem('llama-ui.settings', %q)`, custom)), chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("input")))

	reply := sendMessage(t, ctx, "Weather in Rome?")
	require.Empty(t, reply.Error)
	assert.Equal(t, "Let me **check** that.", strings.TrimSpace(reply.Content))

	type view struct {
		Reasoning, Summary, Strong, Call, Args string
		Open                                   bool
	}
	got := eval[view](t, ctx, `(() => {
	  const m = document.querySelector('.msg.assistant');
	  const d = m.querySelector('details.reasoning');
	  const c = m.querySelector('details.tool-call');
	  return {Reasoning: d.querySelector('.reasoning-body').textContent, Summary: d.querySelector('summary').textContent, Open: d.open,
	          Strong: m.querySelector('.content strong').textContent,
	          Call: c.querySelector('summary').textContent, Args: c.querySelector('code').textContent};
	})()`)
	assert.Equal(t, view{
		Reasoning: "The user wants the weather.", Summary: "Reasoning", Open: false, Strong: "check",
		Call: "Tool call: get_weather", Args: "{\n  \"city\": \"Rome\"\n}",
	}, got)
}

// TestWebUIAPIKey: with an API key the page still loads, asks for the key
// when the server answers 401, keeps it and chats with it.
func TestWebUIAPIKey(t *testing.T) {
	_, ts := newTestServer(t, Options{APIKeys: []string{"sk-browser"}})
	ctx := openPage(t, ts.URL+"/")
	do(t, ctx,
		waitJS(`document.getElementById('key-dlg').open`),
		chromedp.SendKeys(chromedp.ID("key-input"), "sk-browser"),
		chromedp.Click(chromedp.ID("key-save")),
		waitJS(`!document.getElementById('key-dlg').open && document.getElementById('model-name').textContent === 'stories260K.gguf'`),
	)
	assert.Equal(t, `"sk-browser"`, eval[string](t, ctx, `localStorage.getItem('llama-ui.apiKey')`))
	reply := sendMessage(t, ctx, "Once upon a time")
	assert.Empty(t, reply.Error)
	assert.NotEmpty(t, reply.Content)
}

// TestWebUIRouterModels: in router mode the page lists the models and
// sends the chosen one, with the defaults of --ui-config (a dark theme and
// a system prompt).
func TestWebUIRouterModels(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"alpha.gguf", "beta.gguf"} {
		require.NoError(t, os.Symlink(testenv.Model(t, "stories260K.gguf"), filepath.Join(dir, n)))
	}
	_, ts := newTestServer(t, Options{ModelsDir: dir, ChatTemplate: "chatml",
		UIConfig: `{"theme": "dark", "systemMessage": "You tell stories.", "max_tokens": 8}`,
		Engine:   engine.Options{Parallel: 1, Context: llama.ContextOptions{ContextSize: 512, Threads: 1, ThreadsBatch: 1}}})
	ctx := openPage(t, ts.URL+"/")
	do(t, ctx,
		waitJS(`!document.getElementById('model-label').hidden && document.getElementById('model-select').options.length === 2`),
		waitJS(`document.documentElement.dataset.theme === 'dark'`),
	)
	assert.Equal(t, []string{"alpha", "beta"}, eval[[]string](t, ctx, `Array.from(document.getElementById('model-select').options).map(o => o.value)`))
	do(t, ctx, chromedp.SetValue(chromedp.ID("model-select"), "beta"),
		js(`document.getElementById('model-select').dispatchEvent(new Event('change'))`))
	do(t, ctx, js(`window.__bodies = [];
		const f = window.fetch;
		window.fetch = (u, i) => { if (i && i.body) window.__bodies.push(JSON.parse(i.body)); return f(u, i); }`))
	reply := sendMessage(t, ctx, "Once upon a time")
	assert.Empty(t, reply.Error)
	assert.Equal(t, "beta", reply.Model)
	assert.NotEmpty(t, reply.Content)
	type body struct {
		Model     string
		MaxTokens int `json:"max_tokens"`
		Messages  []struct{ Role, Content string }
	}
	bodies := eval[[]body](t, ctx, `window.__bodies`)
	require.Len(t, bodies, 1)
	assert.Equal(t, "beta", bodies[0].Model)
	assert.Equal(t, 8, bodies[0].MaxTokens)
	require.Len(t, bodies[0].Messages, 2)
	assert.Equal(t, "You tell stories.", bodies[0].Messages[0].Content)
}

// TestWebUIConversations drives the conversation list and attachments: a
// text file is inlined into the message sent, a second conversation is
// started, one is renamed, all are exported, one is deleted, and the
// export is imported back.
func TestWebUIConversations(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	ctx := openPage(t, ts.URL+"/")
	do(t, ctx,
		js(`localStorage.setItem('llama-ui.settings', JSON.stringify({temperature: 0, max_tokens: 16}))`),
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.ID("input")),
		waitJS(`document.getElementById('model-name').textContent !== ''`),
		// Record the requests the page makes, and the files it exports.
		js(`window.__bodies = [];
		    const f = window.fetch;
		    window.fetch = (u, i) => { if (i && i.body) window.__bodies.push(JSON.parse(i.body)); return f(u, i); };
		    const c = URL.createObjectURL;
		    URL.createObjectURL = (b) => { window.__blob = b; return c(b); };
		    window.confirm = () => true`),
	)
	// stories260K has no projector: no image button.
	assert.True(t, eval[bool](t, ctx, `document.getElementById('image-btn').hidden`))

	notes := filepath.Join(t.TempDir(), "notes.txt")
	require.NoError(t, os.WriteFile(notes, []byte("The secret word is plum."), 0o644))
	do(t, ctx,
		chromedp.SetUploadFiles(chromedp.ID("file-input"), []string{notes}),
		waitJS(`document.querySelector('#attachments .chip') !== null`),
	)
	reply := sendMessage(t, ctx, "Remember this")
	require.Empty(t, reply.Error)
	type message struct{ Role, Content string }
	type body struct{ Messages []message }
	bodies := eval[[]body](t, ctx, `window.__bodies`)
	require.Len(t, bodies, 1)
	assert.Equal(t, []message{{"user", "Remember this\n\n--- notes.txt ---\nThe secret word is plum."}}, bodies[0].Messages)
	assert.Equal(t, "notes.txt", text(t, ctx, ".msg.user .chip"))
	assert.Empty(t, eval[string](t, ctx, `document.getElementById('attachments').textContent`))

	// Regenerate: the same request again, the reply replaced (greedy: the
	// same text).
	first := storedConvs(t, ctx)[0].Messages[1].ID
	do(t, ctx,
		chromedp.Click(chromedp.CSS(".msg.assistant .regen")),
		waitJS(`window.__bodies.length === 2 && document.body.dataset.busy === '0' && document.querySelector('.msg.assistant.done') !== null`),
	)
	bodies = eval[[]body](t, ctx, `window.__bodies`)
	assert.Equal(t, bodies[0], bodies[1])
	again := storedConvs(t, ctx)[0].Messages
	require.Len(t, again, 2)
	assert.NotEqual(t, first, again[1].ID)
	assert.Equal(t, reply.Content, again[1].Content)

	do(t, ctx, chromedp.Click(chromedp.ID("new-chat")), waitJS(`document.querySelectorAll('.msg').length === 0`))
	sendMessage(t, ctx, "Once upon a time")
	titles := func() []string {
		return eval[[]string](t, ctx, `Array.from(document.querySelectorAll('#conv-list .conv-open')).map(b => b.textContent)`)
	}
	assert.Equal(t, []string{"Once upon a time", "Remember this"}, titles())

	// Rename the current conversation.
	do(t, ctx,
		chromedp.Click(chromedp.CSS("#conv-list li.active .rename")),
		waitJS(`document.getElementById('rename-dlg').open`),
		chromedp.SetValue(chromedp.ID("rename-input"), "A story"),
		chromedp.Click(chromedp.ID("rename-save")),
		waitJS(`document.getElementById('conv-title').textContent === 'A story'`),
	)
	assert.Equal(t, []string{"A story", "Remember this"}, titles())
	assert.Equal(t, "A story", text(t, ctx, "#conv-title"))

	// Export all, as JSON.
	do(t, ctx, chromedp.Click(chromedp.ID("export-all")))
	exported, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.__blob.text()`, chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	var convs []storedConv
	require.NoError(t, json.Unmarshal([]byte(exported), &convs))
	assert.Equal(t, storedConvs(t, ctx), convs)

	// Delete the renamed one; the other stays, in the page and in storage.
	do(t, ctx,
		chromedp.Click(chromedp.CSS("#conv-list li.active .delete")),
		waitJS(`document.querySelectorAll('#conv-list li').length === 1`),
	)
	assert.Equal(t, []string{"Remember this"}, titles())
	left := storedConvs(t, ctx)
	require.Len(t, left, 1)
	assert.Equal(t, "Remember this", left[0].Title)

	// Import the export: both come back (as new conversations).
	file := filepath.Join(t.TempDir(), "conversations.json")
	require.NoError(t, os.WriteFile(file, []byte(exported), 0o644))
	do(t, ctx,
		chromedp.SetUploadFiles(chromedp.ID("import-input"), []string{file}),
		waitJS(`document.querySelectorAll('#conv-list li').length === 3`),
	)
	assert.ElementsMatch(t, []string{"A story", "Remember this", "Remember this"}, titles())

	// The settings dialog: saved values go into the next request; bad
	// extra JSON keeps the dialog open with an error.
	do(t, ctx,
		chromedp.Click(chromedp.ID("settings-btn")),
		waitJS(`document.getElementById('settings-dlg').open`),
		chromedp.SetValue(chromedp.CSS(`#settings-form [name=temperature]`), "0.3"),
		chromedp.SetValue(chromedp.CSS(`#settings-form [name=systemMessage]`), "Be short."),
		chromedp.Click(chromedp.ID("settings-save")),
		waitJS(`!document.getElementById('settings-dlg').open`),
	)
	assert.JSONEq(t, `{"temperature": 0.3, "max_tokens": 16, "systemMessage": "Be short."}`,
		eval[string](t, ctx, `localStorage.getItem('llama-ui.settings')`))
	do(t, ctx,
		chromedp.Click(chromedp.ID("settings-btn")),
		waitJS(`document.getElementById('settings-dlg').open`),
		chromedp.SetValue(chromedp.CSS(`#settings-form [name=custom]`), "{bad"),
		chromedp.Click(chromedp.ID("settings-save")),
		waitJS(`!document.getElementById('settings-error').hidden`),
	)
	assert.True(t, eval[bool](t, ctx, `document.getElementById('settings-dlg').open`))
	do(t, ctx, js(`document.getElementById('settings-dlg').close()`))
	sendMessage(t, ctx, "Hello")
	type sampled struct {
		Temperature float64
		MaxTokens   int `json:"max_tokens"`
		Messages    []message
	}
	last := eval[[]sampled](t, ctx, `window.__bodies`)
	req := last[len(last)-1]
	assert.Equal(t, 0.3, req.Temperature)
	assert.Equal(t, 16, req.MaxTokens)
	assert.Equal(t, message{"system", "Be short."}, req.Messages[0])

	// The theme switch, kept.
	theme := eval[string](t, ctx, `document.documentElement.dataset.theme`)
	do(t, ctx, chromedp.Click(chromedp.ID("theme-btn")), chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("input")))
	assert.NotEqual(t, theme, eval[string](t, ctx, `document.documentElement.dataset.theme`))

	// A request the server refuses: its error is shown in the reply.
	do(t, ctx,
		js(`localStorage.setItem('llama-ui.settings', JSON.stringify({custom: '{"n_probs": "many"}'}))`),
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.ID("input")),
		chromedp.SendKeys(chromedp.ID("input"), "Once more"),
		chromedp.Click(chromedp.ID("send-btn")),
		waitJS(`document.body.dataset.busy === '0' && document.querySelector('.msg.assistant:last-of-type .error-text') !== null`),
	)
	assert.NotEmpty(t, text(t, ctx, ".msg.assistant:last-of-type .error-text"))
}
