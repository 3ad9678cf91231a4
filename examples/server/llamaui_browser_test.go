//go:build browser

package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/internal/browsertest"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/lib"
)

// TestLlamaCppWebUI drives llama.cpp's own web UI (tools/ui of the pinned
// source, built by go run ./lib/cmd/llama-install -ui) in chromium, served
// with --path by this server and by the reference llama-server, the same
// way on both: the page loads, the sampler settings reach the request, a
// message's reply streams in, it is regenerated, the user message is
// edited and sent again, a text file is attached, a new conversation joins
// the list, and a long reply is stopped. The page must make the same API
// requests in the same order against both servers, load the same files,
// and show the same (greedy) replies.
func TestLlamaCppWebUI(t *testing.T) {
	ui, err := lib.UIPath(testenv.LibraryDir(t))
	require.NoError(t, err, "llama.cpp's web UI is not built: go run ./lib/cmd/llama-install -ui")
	models := testenv.ModelsDir(t)
	args := []string{"-m", "stories260K.gguf", "-c", "2048", "-np", "1", "-t", "1", "--path", ui}
	runs := map[string]*uiRun{}
	for _, srv := range []struct{ name, bin string }{
		{"llama-server", testenv.LlamaServer(t)},
		{"ours", buildServer(t)},
	} {
		t.Run(srv.name, func(t *testing.T) {
			runs[srv.name] = driveLlamaUI(t, testenv.RunHTTPServer(t, srv.bin, models, args...))
		})
	}
	ref, ours := runs["llama-server"], runs["ours"]
	require.NotNil(t, ref, "the run against llama-server failed")
	require.NotNil(t, ours, "the run against this server failed")
	t.Logf("API requests of the page, step by step:\n%s", strings.Join(ref.api, "\n"))
	assert.Equal(t, ref.api, ours.api, "the page's API requests, step by step")
	assert.Equal(t, ref.tools, ours.tools, "the page's /tools requests")
	assert.Equal(t, ref.files, ours.files, "the files the page loads")
	assert.Equal(t, ref.replies, ours.replies, "the greedy replies shown")
}

var uuidRe = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// uiRun is what one drive of the page saw.
type uiRun struct {
	api     []string // per step in order, "step: METHOD /path?query, ..." of its API requests, sorted
	tools   []string // the kinds of /tools requests, with their status
	files   []string // "METHOD /path status" of the page's files, sorted
	replies []string // the replies shown, in order
}

// request is one request the page made.
type request struct {
	method, path string
	body         []byte
	status       int64
	ended        bool // the browser has the whole response, or gave up on it
}

// recorder keeps the requests the page makes to one origin.
type recorder struct {
	base string
	mu   sync.Mutex
	reqs []*request
	byID map[network.RequestID]*request
	// next, when not nil, is closed at the next event (see changed).
	next chan struct{}
}

func (r *recorder) event(ev any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.next != nil {
		close(r.next)
		r.next = nil
	}
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		if !strings.HasPrefix(ev.Request.URL, r.base+"/") {
			return
		}
		req := &request{method: ev.Request.Method, path: strings.TrimPrefix(ev.Request.URL, r.base)}
		for _, e := range ev.Request.PostDataEntries {
			req.body = append(req.body, e.Bytes...)
		}
		r.reqs = append(r.reqs, req)
		r.byID[ev.RequestID] = req
	case *network.EventResponseReceived:
		if req := r.byID[ev.RequestID]; req != nil {
			req.status = ev.Response.Status
		}
	case *network.EventLoadingFinished:
		if req := r.byID[ev.RequestID]; req != nil {
			req.ended = true
		}
	case *network.EventLoadingFailed:
		if req := r.byID[ev.RequestID]; req != nil {
			req.ended = true
		}
	}
}

// mark starts a step of the drive: the requests the page makes during a
// step are compared with the other server's as a set (the page's own
// flows run concurrently, so their order within a step varies), the
// steps in order.
func (r *recorder) mark(step string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, &request{method: "step", path: step})
}

// changed returns a channel closed at the recorder's next event: take it
// before looking at the requests, and wait on it for them to change.
func (r *recorder) changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.next == nil {
		r.next = make(chan struct{})
	}
	return r.next
}

// chats returns the page's chat completion requests so far.
func (r *recorder) chats() []*request {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*request
	for _, q := range r.reqs {
		if q.method == http.MethodPost && q.path == "/v1/chat/completions" {
			c := *q
			out = append(out, &c)
		}
	}
	return out
}

// chatBody is the part of a chat request the test reads.
type chatBody struct {
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Stream      bool     `json:"stream"`
	Temperature *float64 `json:"temperature"`
	MaxTokens   *int     `json:"max_tokens"`
}

func decodeChat(t *testing.T, q *request) chatBody {
	t.Helper()
	var b chatBody
	require.NoError(t, json.Unmarshal(q.body, &b), "%s", q.body)
	require.NotEmpty(t, b.Messages)
	return b
}

// The page's JavaScript probes.
const (
	jsReplies = `[...document.querySelectorAll('[aria-label="Assistant message with actions"] .markdown-content')].map(e => e.innerText)`
	jsReply   = `(() => { const a = ` + jsReplies + `; return a.length ? a[a.length - 1] : '' })()`
	jsBusy    = `!!document.querySelector('[aria-label="Stop generation"]')`
	// jsRows is the length of the conversation list, the navigation
	// expanded first.
	jsRows = `(() => { const b = document.querySelector('[aria-label="Expand navigation"]'); if (b) b.click();
  return document.querySelectorAll('[data-conversation-row]').length })()`
	// recordPartials keeps the lengths of the last reply seen while a
	// reply streams.
	jsRecordPartials = `window.__partials = [];
new MutationObserver(() => {
  const n = ` + jsReply + `.length;
  if (` + jsBusy + ` && n > 0 && window.__partials[window.__partials.length - 1] !== n) window.__partials.push(n);
}).observe(document.body, {subtree: true, childList: true, characterData: true});
true`
)

// clickLast clicks the last element matching a CSS selector, in the page
// (action buttons show on hover only).
func clickLast(css string) chromedp.Action[chromedp.Void] {
	b, _ := json.Marshal(css)
	return chromedp.Evaluate[chromedp.Void](`(() => { const a = document.querySelectorAll(` + string(b) + `);
  if (!a.length) throw new Error('nothing matches ' + ` + string(b) + `); a[a.length - 1].click(); })()`)
}

// until waits until the JavaScript expression is true; the bound only
// detects a page that never gets there.
func until(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(10*time.Millisecond), chromedp.WithPollingTimeout(90*time.Second))
}

// waitChats waits until the page has made n chat requests, their
// responses have ended, and it shows no reply in progress. (A reply can
// show whole while its stream's last events are still on their way; the
// next step's click would cut that stream, and the page would ask to
// resume it.)
func waitChats(t *testing.T, ctx context.Context, rec *recorder, n int) []*request {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx, chromedp.Poll[chromedp.Void](`!`+jsBusy,
		chromedp.WithPollingInterval(10*time.Millisecond), chromedp.WithPollingTimeout(90*time.Second))))
	var chats []*request
	deadline := time.After(time.Minute)
wait:
	for {
		next := rec.changed()
		chats = rec.chats()
		if len(chats) >= n && !slices.ContainsFunc(chats, func(q *request) bool { return !q.ended }) {
			break
		}
		select {
		case <-next:
		case <-deadline:
			break wait
		}
	}
	require.Len(t, chats, n, "chat requests")
	for i, q := range chats {
		require.True(t, q.ended, "chat request %d has not ended", i)
	}
	require.NoError(t, chromedp.Do(ctx, until(`!`+jsBusy)))
	return chats
}

// waitChatRequests waits up to d for the page to have made n chat
// requests, and says whether it did.
func waitChatRequests(rec *recorder, n int, d time.Duration) bool {
	deadline := time.After(d)
	for {
		next := rec.changed()
		if len(rec.chats()) >= n {
			return true
		}
		select {
		case <-next:
		case <-deadline:
			return false
		}
	}
}

func driveLlamaUI(t *testing.T, server string) *uiRun {
	// Streams paced at 10 ms a flush, the same for both servers:
	// stories260K writes a reply in a few milliseconds, which a browser
	// may render in one frame (no partial text to see), and a long reply
	// could end before the Stop click lands.
	target, err := url.Parse(server)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	var pace atomic.Int64 // the time between two events, set per step
	pace.Store(int64(10 * time.Millisecond))
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxy.ServeHTTP(&pacedWriter{ResponseWriter: w, d: time.Duration(pace.Load())}, r)
	}))
	t.Cleanup(front.Close)
	base := front.URL

	ctx := browsertest.New(t, browsertest.Options{Timeout: 5 * time.Minute, Width: 1280, Height: 900})
	rec := &recorder{base: base, byID: map[network.RequestID]*request{}}
	require.NoError(t, chromedp.Listen(ctx, rec.event))
	do := func(t *testing.T, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		require.NoError(t, chromedp.Do(ctx, steps...))
	}
	evalString := func(t *testing.T, expr string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		require.NoError(t, err, expr)
		return v
	}
	textarea := chromedp.CSS(`textarea`)

	// Greedy, short replies; the UI's browser tools off (a template
	// without a tool-call format and the tools of a request are another
	// test's subject).
	do(t, chromedp.Navigate(base+"/"), chromedp.WaitVisible(textarea),
		chromedp.Evaluate[chromedp.Void](`localStorage.setItem('LlamaUi.config', JSON.stringify({temperature: 0, max_tokens: 48}));
localStorage.setItem('LlamaUi.userOverrides', JSON.stringify(['temperature', 'max_tokens']));
localStorage.setItem('LlamaUi.disabledToolCategories', JSON.stringify(['browser']))`),
		chromedp.Reload(), chromedp.WaitVisible(textarea),
		until(`document.body.innerText.includes('stories260K')`))

	run := &uiRun{}
	t.Run("stream", func(t *testing.T) {
		rec.mark(path.Base(t.Name()))
		do(t, chromedp.Evaluate[chromedp.Void](jsRecordPartials), chromedp.SendKeys(textarea, "Once upon a time\r"))
		chats := waitChats(t, ctx, rec, 1)
		b := decodeChat(t, chats[0])
		assert.True(t, b.Stream)
		assert.Equal(t, `"Once upon a time"`, string(b.Messages[len(b.Messages)-1].Content))
		// The sampler settings reach the request.
		if assert.NotNil(t, b.Temperature) && assert.NotNil(t, b.MaxTokens) {
			assert.Equal(t, 0.0, *b.Temperature)
			assert.Equal(t, 48, *b.MaxTokens)
		}
		reply := evalString(t, jsReply)
		require.NotEmpty(t, reply)
		partials, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`window.__partials`))
		require.NoError(t, err)
		assert.GreaterOrEqual(t, len(partials), 2, "partial replies seen while streaming: %v", partials)
	})
	t.Run("regenerate", func(t *testing.T) {
		rec.mark(path.Base(t.Name()))
		first := evalString(t, jsReply)
		do(t, clickLast(`[aria-label="Regenerate"]`))
		chats := waitChats(t, ctx, rec, 2)
		assert.Equal(t, `"Once upon a time"`, string(decodeChat(t, chats[1]).Messages[0].Content))
		do(t, until(`!!document.querySelector('[aria-label="Message version 2 of 2"]')`))
		assert.Equal(t, first, evalString(t, jsReply), "greedy: the same reply again")
	})
	t.Run("edit", func(t *testing.T) {
		rec.mark(path.Base(t.Name()))
		do(t, clickLast(`[aria-label="User message with actions"] [aria-label="Edit"]`),
			chromedp.WaitVisible(chromedp.CSS(`textarea[placeholder="Edit your message..."]`)),
			chromedp.Evaluate[chromedp.Void](`(() => { const e = document.querySelector('textarea[placeholder="Edit your message..."]');
  Object.getOwnPropertyDescriptor(HTMLTextAreaElement.prototype, 'value').set.call(e, 'The little dog');
  e.dispatchEvent(new Event('input', {bubbles: true})); })()`),
			chromedp.SendKeys(chromedp.CSS(`textarea[placeholder="Edit your message..."]`), "\r"))
		chats := waitChats(t, ctx, rec, 3)
		assert.Equal(t, `"The little dog"`, string(decodeChat(t, chats[2]).Messages[0].Content))
		assert.NotEmpty(t, evalString(t, jsReply))
	})
	t.Run("attachment", func(t *testing.T) {
		rec.mark(path.Base(t.Name()))
		file := filepath.Join(t.TempDir(), "notes.txt")
		require.NoError(t, os.WriteFile(file, []byte("The dragon is called Sparkle."), 0o644))
		do(t, clickLast(`[aria-label="New chat"]`), chromedp.WaitVisible(textarea),
			chromedp.SetUploadFiles(chromedp.CSS(`input[type="file"]`), []string{file}),
			until(`document.body.innerText.includes('notes.txt')`),
			chromedp.SendKeys(textarea, "Tell me a story\r"))
		chats := waitChats(t, ctx, rec, 4)
		assert.Contains(t, string(chats[3].body), "The dragon is called Sparkle.", "the file's text is sent")
		assert.Contains(t, string(chats[3].body), "Tell me a story")
		assert.NotEmpty(t, evalString(t, jsReply))
	})
	t.Run("conversations", func(t *testing.T) {
		rec.mark(path.Base(t.Name()))
		do(t, until(jsRows+` === 2`))
	})
	t.Run("stop", func(t *testing.T) {
		rec.mark(path.Base(t.Name()))
		// A long reply, stopped once some of it shows. Its events come
		// slower, so that a loaded machine still sees it streaming: at
		// 10 ms an event, a browser slow to draw has missed the whole
		// reply.
		pace.Store(int64(40 * time.Millisecond))
		defer pace.Store(int64(10 * time.Millisecond))
		const prompt = "Once upon a time"
		do(t, chromedp.Evaluate[chromedp.Void](`localStorage.setItem('LlamaUi.config', JSON.stringify({temperature: 0, max_tokens: 1500}))`),
			chromedp.Reload(), chromedp.WaitVisible(textarea),
			until(`document.body.innerText.includes('stories260K')`),
			clickLast(`[aria-label="New chat"]`), chromedp.WaitVisible(textarea),
			chromedp.SendKeys(textarea, prompt+"\r"))
		// Right after a reload the page can miss the Enter (it once never
		// started the reply). Only a request that never went out is sent
		// again, and only from the box: an Enter that lands while the
		// reply streams could reach another control.
		if !waitChatRequests(rec, 5, 10*time.Second) {
			v := evalString(t, `document.querySelector('textarea').value`)
			require.Contains(t, []string{"", prompt}, v, "the message box")
			keys := "\r"
			if v == "" {
				keys = prompt + "\r"
			}
			t.Logf("the page sent nothing; the message box held %q: pressing %q", v, keys)
			do(t, chromedp.SendKeys(textarea, keys))
		}
		do(t, until(jsBusy+` && `+jsReply+`.length > 0`),
			clickLast(`[aria-label="Stop generation"]`))
		chats := waitChats(t, ctx, rec, 5)
		assert.Equal(t, 1500, *decodeChat(t, chats[4]).MaxTokens)
		stopped := evalString(t, jsReply)
		assert.NotEmpty(t, stopped)
		// The whole reply to the same request, asked for directly, is
		// far longer than what shows: the stream was cut.
		var body map[string]any
		require.NoError(t, json.Unmarshal(chats[4].body, &body))
		body["stream"] = false
		data, err := json.Marshal(body)
		require.NoError(t, err)
		resp, err := http.Post(server+"/v1/chat/completions", "application/json", strings.NewReader(string(data)))
		require.NoError(t, err)
		var full struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		err = json.NewDecoder(resp.Body).Decode(&full)
		resp.Body.Close()
		require.NoError(t, err)
		require.NotEmpty(t, full.Choices)
		assert.Less(t, len(stopped), len(full.Choices[0].Message.Content)/2, "the stopped reply is a part of the whole")
		do(t, until(jsRows+` === 3`))
		assert.Equal(t, stopped, evalString(t, jsReply))
	})

	replies, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](jsReplies))
	require.NoError(t, err)
	if len(replies) > 0 {
		run.replies = replies[:len(replies)-1] // the stopped one ends wherever Stop landed
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	var step []string
	flush := func() {
		if len(step) > 0 {
			sort.Strings(step)
			run.api[len(run.api)-1] += ": " + strings.Join(step, ", ")
		}
		step = nil
	}
	run.api = []string{"load"}
	for _, q := range rec.reqs {
		p, _, _ := strings.Cut(q.path, "?")
		switch {
		case q.method == "step":
			flush()
			run.api = append(run.api, q.path)
		case p == "/" || path.Ext(p) != "":
			run.files = append(run.files, q.method+" "+p+" "+http.StatusText(int(q.status)))
		case p == "/tools":
			// The tool store's GET and POST /tools (both refused: the
			// servers run without --tools) race with the page's start.
			run.tools = append(run.tools, q.method+" "+p+" "+http.StatusText(int(q.status)))
		case q.method == "GET" && p == "/v1/stream" && strings.Contains(q.path, "&from="):
			// The page resumes a stream it saw cut: on a loaded machine
			// the test's next click can land while the last step's paced
			// stream is still coming, against either server (seen once on
			// each). Resuming is tested on its own (server's
			// TestResumableStream*); here it is only logged.
			t.Logf("the page resumed a stream before %s: %s", run.api[len(run.api)-1], uuidRe.ReplaceAllString(q.path, "{id}"))
		default:
			step = append(step, q.method+" "+uuidRe.ReplaceAllString(q.path, "{id}"))
		}
	}
	flush()
	sort.Strings(run.files)
	run.tools = slices.Compact(slices.Sorted(slices.Values(run.tools)))
	return run
}

// pacedWriter writes server-sent events one at a time, each flushed and
// d after the one before, as a slower model would send them.
type pacedWriter struct {
	http.ResponseWriter
	d time.Duration
}

func (w *pacedWriter) Write(p []byte) (int, error) {
	if !strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
		return w.ResponseWriter.Write(p)
	}
	n := 0
	for len(p) > 0 {
		i := strings.Index(string(p), "\n\n")
		end := len(p)
		if i >= 0 {
			end = i + 2
		}
		m, err := w.ResponseWriter.Write(p[:end])
		n += m
		if err != nil {
			return n, err
		}
		p = p[end:]
		if err := http.NewResponseController(w.ResponseWriter).Flush(); err != nil {
			return n, err
		}
		time.Sleep(w.d) // the subject: a stream paced as a slow model's
	}
	return n, nil
}

func (w *pacedWriter) FlushError() error {
	return http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *pacedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
