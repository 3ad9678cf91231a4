package server

// A request's tasks: checked against the context, submitted to the
// engine together, their first events awaited (so that a task failing at
// once gets an HTTP error status) and their events collected into results.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/x/llama/engine"
	"github.com/x/llama/server/internal/wire"

	"github.com/x/llama"
)

// runTask checks the tasks' prompts against the context and submits them
// together. Cancelling ctx (the request's context) cancels them. arrived,
// if not nil, ends the request's engine.Engine.Expect once they are
// submitted (before their first event: the engine may wait for it).
func (s *Server) runTask(ctx context.Context, inst *instance, arrived func(), tasks ...*engine.Request) (eventStream, error) {
	for _, t := range tasks {
		if t.Kind != engine.KindCompletion {
			continue
		}
		if err := inst.limitTask(t); err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err // the client left while the request was prepared
		}
		if len(t.Prompt) == 0 {
			return nil, badRequest("the prompt is empty")
		}
		if n := inst.slotContext(); len(t.Prompt) >= n {
			return nil, exceedContext(len(t.Prompt), n)
		}
	}
	if s.opts.LogPromptsDir != "" {
		s.logPrompts(inst, tasks)
	}
	st, err := inst.Engine.Submit(ctx, tasks...)
	if arrived != nil {
		arrived()
	}
	if err != nil {
		if errors.Is(err, engine.ErrQueueFull) {
			return nil, &httpError{Status: http.StatusServiceUnavailable, Type: "unavailable_error", Msg: err.Error(), Err: err}
		}
		return nil, err
	}
	return st, nil
}

// endedEarly is the error of tasks that ended without their last event:
// ctx's, when the request is gone.
func endedEarly(ctx context.Context) error {
	return cmp.Or(ctx.Err(), errors.New("the engine ended the task without a result"))
}

// peekEvents waits for the first event of each of the n tasks of st, so
// that a task failing at once is answered with an HTTP error status rather
// than inside a stream already started (the first task's error, in order).
// It returns the events, those read included.
func peekEvents(ctx context.Context, st eventStream, n int) (eventStream, error) {
	p := &peekedStream{eventStream: st}
	seen, errs := make([]bool, n), make([]error, n)
	for k := 0; k < n; {
		if !st.Next() {
			return nil, endedEarly(ctx)
		}
		ev, i := st.Event(), st.Index()
		p.ahead = append(p.ahead, indexed{i, ev})
		if !seen[i] {
			seen[i], errs[i] = true, ev.Err
		}
		for ; k < n && seen[k]; k++ {
			if errs[k] != nil {
				return nil, errs[k]
			}
		}
	}
	return p, nil
}

// indexed is an event of the task at index i.
type indexed struct {
	i  int
	ev engine.Event
}

// peekedStream gives the events read ahead before the rest of its stream's.
type peekedStream struct {
	eventStream
	ahead []indexed
	cur   *indexed // the current event, when one read ahead
}

func (p *peekedStream) Next() bool {
	if len(p.ahead) > 0 {
		p.cur, p.ahead = &p.ahead[0], p.ahead[1:]
		return true
	}
	p.cur = nil
	return p.eventStream.Next()
}

func (p *peekedStream) Event() engine.Event {
	if p.cur != nil {
		return p.cur.ev
	}
	return p.eventStream.Event()
}

func (p *peekedStream) Index() int {
	if p.cur != nil {
		return p.cur.i
	}
	return p.eventStream.Index()
}

// completionResult is a finished task's output.
type completionResult struct {
	Text   string
	Tokens []llama.Token
	Steps  []wire.Step  // only with n_probs
	Final  engine.Event // the Done event
	// PromptProbs are the prompt's probabilities (Request.PromptProbs).
	PromptProbs []engine.PromptProb
}

// collect reads the events of st's n tasks until they end, and returns
// their results; end-of-generation tokens of m are left out of Tokens. An
// engine.Event.Err (the first task's, in order), or ctx ending first, is
// returned as the error.
func collect(ctx context.Context, m *llama.Model, st eventStream, n int) ([]*completionResult, error) {
	res := make([]*completionResult, n)
	text := make([]strings.Builder, n)
	errs := make([]error, n)
	ended := make([]bool, n)
	probs := 0 // token probabilities held, for maxAnswerProbs
	for k := 0; k < n; {
		if !st.Next() {
			return nil, endedEarly(ctx)
		}
		ev, i := st.Event(), st.Index()
		r := res[i]
		if r == nil {
			r = &completionResult{}
			res[i] = r
		}
		if ev.PromptProbs != nil && !ended[i] {
			for _, pp := range ev.PromptProbs {
				probs += 1 + len(pp.Top)
			}
			if probs > maxAnswerProbs {
				return nil, tooLarge("the answer's token probabilities pass %d entries (n_probs × tokens × prompts, the prompts' own included); ask for fewer, or stream the answer", maxAnswerProbs)
			}
			r.PromptProbs = ev.PromptProbs
		}
		switch {
		case ended[i]:
		case ev.Err != nil:
			errs[i], ended[i] = ev.Err, true
		case ev.Progress != nil:
		case ev.Done:
			r.Final, ended[i] = ev, true
			r.Text = text[i].String()
		default:
			text[i].WriteString(ev.Text)
			if m == nil || !m.IsEOG(ev.Token) {
				r.Tokens = append(r.Tokens, ev.Token)
			}
			if ev.Sampled != nil || len(ev.Probs) > 0 {
				if probs += 1 + len(ev.Probs); probs > maxAnswerProbs {
					return nil, tooLarge("the answer's token probabilities pass %d entries (n_probs × tokens × prompts); ask for fewer, or stream the answer", maxAnswerProbs)
				}
				r.Steps = append(r.Steps, wire.StepOf(ev))
			}
		}
		for ; k < n && ended[k]; k++ {
			if errs[k] != nil {
				return nil, errs[k]
			}
		}
	}
	return res, nil
}

// logPrompts writes the completion tasks' prompts to a new file in
// Options.LogPromptsDir.
func (s *Server) logPrompts(inst *instance, tasks []*engine.Request) {
	var prompts []string
	for _, t := range tasks {
		if t.Kind == engine.KindCompletion {
			prompts = append(prompts, promptText(inst.Model, t.Prompt, "<__media__>"))
		}
	}
	var data []byte
	switch len(prompts) {
	case 0:
		return
	case 1:
		data = []byte(prompts[0])
	default:
		data, _ = json.MarshalIndent(prompts, "", "  ")
	}
	ms := time.Now().UnixMilli()
	for n := 0; n < 100; n++ {
		name := fmt.Sprintf("%012d.txt", ms)
		if n > 0 {
			name = fmt.Sprintf("%012d-%d.txt", ms, n)
		}
		f, err := os.OpenFile(filepath.Join(s.opts.LogPromptsDir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err == nil {
			_, err = f.Write(data)
			err = errors.Join(err, f.Close())
		}
		if err != nil {
			s.log.Error("log prompts: cannot write a prompt", "err", err)
		}
		return
	}
	s.log.Error("log prompts: no free file name", "ms", ms)
}

// splitMedia yields the runs of tokens between media, and nil for each
// medium (a run of placeholders, one for each of its positions).
func splitMedia(toks []llama.Token) iter.Seq[[]llama.Token] {
	return func(yield func([]llama.Token) bool) {
		start := 0
		for i, t := range toks {
			if t != engine.MediaPlaceholder {
				continue
			}
			if i > start && !yield(toks[start:i]) {
				return
			}
			if (i == 0 || toks[i-1] != engine.MediaPlaceholder) && !yield(nil) {
				return
			}
			start = i + 1
		}
		if start < len(toks) {
			yield(toks[start:])
		}
	}
}
