package engine

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"slices"
	"unsafe"

	"github.com/x/llama"
)

// Context checkpoints, as llama-server keeps them for a model with
// sliding-window layers without Context.SWAFull (whether or not the
// context is small enough for llama.cpp to give those layers the whole
// context anyway: llama-server's rules follow the model's window).
//
// A windowed cache forgets the sliding-window layers' entries older than
// about a window, so a slot whose new prompt shares only a part of what it
// holds cannot simply drop the rest and go on: the window would lack the
// entries the next position attends to. While a prompt is decoded, the
// slot therefore takes checkpoints: copies of the window's part of its
// memory (llama.Context.SeqStatePartial) at chosen positions. A later
// prompt sharing a prefix that ends past a checkpoint restores it, keeps
// the full-context layers' entries up to it and decodes from there; one
// with no usable checkpoint is decoded again from its start.
//
// The rules are llama-server's (v0.4.0): a checkpoint is taken before the
// batch that ends the prompt, and before the batches that start
// 4+UBatchSize and 4 tokens before its end, which are cut there for it
// (so a follow-up prompt that adds a turn finds one just before the end of
// the previous one), and at the start of a chat's user messages
// (Request.UserStarts); a slot keeps at most ContextCheckpoints of them, the
// oldest going first, and a new request drops the previous requests'
// checkpoints that lie within CheckpointMinStep tokens of an earlier one.
// They move with the slot's prompt into and out of the prompt cache, where
// their bytes count against PromptCacheMiB; restoring or erasing a slot
// file drops them, as llama-server clears the slot's prompt then.
//
// Recurrent and hybrid models (Mamba, RWKV, Jamba, Granite hybrids,
// Qwen3-Next, ...) take them too, as llama-server does: their recurrent
// state holds the last position only and cannot drop a tail, so a
// checkpoint is a copy of that state (for a hybrid model, the attention
// layers' entries stay in the cache and lose their tail as usual). The
// same rules apply with no window: a prompt that continues all the slot
// holds goes on from there, one that leaves it earlier restores the newest
// checkpoint at or before where it leaves it, or is decoded again from 0.
// Cache reuse (Options.CacheReuse) is off for them: a recurrent state
// cannot forget the tokens it would skip.

// DefaultContextCheckpoints and DefaultCheckpointMinStep are llama-server's
// defaults for --ctx-checkpoints and --checkpoint-min-step.
const (
	DefaultContextCheckpoints = 32
	DefaultCheckpointMinStep  = 8192
	// MaxContextCheckpoints bounds Options.ContextCheckpoints: each
	// checkpoint holds a window's worth of KV entries in host memory.
	MaxContextCheckpoints = 1024
)

// ckpt is one context checkpoint of a slot.
type ckpt struct {
	nTokens        int    // the slot's cached tokens when it was taken
	posMin, posMax int    // the window's positions then
	task           int64  // the request that took it
	sum            uint64 // hash of the slot's first nTokens tokens
	state          []byte // llama.Context.SeqStatePartial
}

// ckptBytes is the size of the checkpoints' states.
func ckptBytes(cs []ckpt) int64 {
	var n int64
	for _, c := range cs {
		n += int64(len(c.state))
	}
	return n
}

// ckptCount and ckptStep are the engine's settings: ContextCheckpoints and
// CheckpointMinStep with their defaults.
func ckptSettings(o Options) (count, step int, err error) {
	count, step = o.ContextCheckpoints, o.CheckpointMinStep
	switch {
	case count == 0:
		count = DefaultContextCheckpoints
	case count < 0:
		count = 0
	case count > MaxContextCheckpoints:
		return 0, 0, fmt.Errorf("engine: ContextCheckpoints %d is more than %d: %w", count, MaxContextCheckpoints, llama.ErrInvalid)
	}
	switch {
	case step == 0:
		step = DefaultCheckpointMinStep
	case step < 0:
		step = 0
	}
	return count, step, nil
}

// tokSum hashes a token prefix, so that a checkpoint is used only while
// the slot's memory holds the tokens it was taken on (a slot's tokens may
// be replaced by a slot file, the prompt cache or an error).
func (e *Engine) tokSum(toks []llama.Token) uint64 {
	var h maphash.Hash
	h.SetSeed(e.ckptSeed)
	h.Write(tokBytes(toks))
	return h.Sum64()
}

// tokBytes is toks's memory (the sums are compared within one process
// only, so the byte order does not matter).
func tokBytes(toks []llama.Token) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(toks))), 4*len(toks))
}

// ckptValid drops the slot's checkpoints that were not taken on the tokens
// its memory holds now. The prefixes are hashed in one pass over the
// tokens (a hash's sum depends only on the bytes written so far).
func (e *Engine) ckptValid(s *engSlot) {
	if len(s.ckpts) == 0 {
		return
	}
	order := make([]int, len(s.ckpts))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(s.ckpts[a].nTokens, s.ckpts[b].nTokens) })
	valid := make([]bool, len(s.ckpts))
	var h maphash.Hash
	h.SetSeed(e.ckptSeed)
	hashed := 0
	for _, i := range order {
		c := s.ckpts[i]
		if c.nTokens > len(s.cache) {
			break // and so are the rest
		}
		h.Write(tokBytes(s.cache[hashed:c.nTokens]))
		hashed = c.nTokens
		valid[i] = h.Sum64() == c.sum
	}
	kept := s.ckpts[:0]
	for i, c := range s.ckpts {
		if valid[i] {
			kept = append(kept, c)
		}
	}
	clear(s.ckpts[len(kept):]) // their states go
	s.ckpts = kept
}

// windowPrefix is llama-server's check of a kept prefix with a windowed
// cache: slot s holds n tokens of its prompt (n > 0) and will decode from
// there. When the window may lack what position n needs, the newest
// checkpoint that is usable there is restored and the prefix cut back to
// it, or failing one, the prompt is decoded again from 0. It returns the
// tokens kept (the caller drops the checkpoints past them).
func (e *Engine) windowPrefix(s *engSlot, n int) int {
	e.ckptValid(s)
	if n > 0 && n <= len(s.cache) {
		posNext := n
		newTokens := 0
		if n >= len(s.prompt) {
			newTokens = 1
		}
		thold := max(0, posNext-e.nSwa-newTokens)
		lo, _, err := e.lctx.Memory().PosRange(s.id)
		if err != nil || lo < 0 || lo >= thold {
			found := -1
			for i := len(s.ckpts) - 1; i >= 0; i-- {
				c := s.ckpts[i]
				if c.posMax > posNext {
					continue
				}
				if c.posMin < thold || c.posMin == 0 {
					found = i
					break
				}
			}
			n = 0
			if found >= 0 {
				c := s.ckpts[found]
				if err := e.lctx.SetSeqStatePartial(s.id, c.state); err == nil {
					n = min(posNext, max(c.posMin+1, c.posMax), c.nTokens)
				}
			}
		}
	}
	return n
}

// fullWindowPrefix checks a kept prefix of n tokens (n > 0) of slot s with
// a full-size cache of a model with sliding-window layers: llama.cpp
// saves and restores (slot files, the prompt cache) the window's entries
// of a sequence's last window only, so after a restore the window may
// lack what position n needs; the prompt is then decoded again from 0.
func (e *Engine) fullWindowPrefix(s *engSlot, n int) int {
	if n <= 0 {
		return n
	}
	p := n // the next position decoded
	if n >= len(s.prompt) {
		p = n - 1
	}
	lo, _, err := e.lctx.Memory().PosRange(s.id)
	if err != nil || lo < 0 || lo > max(0, p-e.modelSwa+1) {
		return 0
	}
	return n
}

// ckptOn reports whether slot s takes checkpoints for its prompt.
func (e *Engine) ckptOn(s *engSlot) bool {
	return e.nCkpt > 0 && (e.nSwa > 0 || e.recurrent) && !e.embedding && s.tk != nil && s.tk.t.Media == nil
}

// ckptRoom cuts a prompt chunk of slot s (room tokens) where llama-server
// cuts it for checkpoints: at the start of the last user message, or of
// another user message when the slot has no checkpoint yet or the last
// one is more than CheckpointMinStep tokens back; and so that 4+UBatchSize
// or 4 tokens of the prompt are left after it (each at most the batch
// size). Each cut leaves at least one token in the chunk.
func (e *Engine) ckptRoom(s *engSlot, room int) int {
	at := s.promptIdx
	left := len(s.prompt) - at
	for _, off := range [2]int{4 + e.nUBatch, 4} {
		if i := left - min(e.nBatch, off); i >= 1 && i < room {
			room = i
		}
	}
	us := s.tk.t.UserStarts
	lastUser := -1
	if len(us) > 0 {
		lastUser = us[len(us)-1]
	}
	for _, u := range us {
		if u <= at {
			continue
		}
		if u-at >= room {
			break
		}
		if u == lastUser || len(s.ckpts) == 0 || u > s.ckpts[len(s.ckpts)-1].nTokens+e.ckptStep {
			room = u - at
			break
		}
	}
	return room
}

// ckptTake takes a checkpoint of slot s, if llama-server would, before the
// batch that adds nCur prompt tokens to it is decoded: for the batch that
// ends the prompt, one that ends near it (within a micro-batch) or one
// that starts a user message, when the slot's memory holds something and
// the last checkpoint is not within CheckpointMinStep tokens (unless the
// batch starts the last user message or ends near the prompt's end).
func (e *Engine) ckptTake(s *engSlot, nCur int) {
	nStart := len(s.cache)
	total := len(s.prompt)
	nearEnd := total < nStart+nCur+e.nUBatch
	us := s.tk.t.UserStarts
	userStart := slices.Contains(us, nStart)
	lastUser := len(us) > 0 && us[len(us)-1] == nStart
	if !nearEnd && !userStart { // a mid-prompt batch (the last one is near the end)
		return
	}
	if len(s.ckpts) > 0 && !lastUser && !nearEnd && nStart <= s.ckpts[len(s.ckpts)-1].nTokens+e.ckptStep {
		return
	}
	lo, hi, err := e.lctx.Memory().PosRange(s.id)
	if err != nil || lo < 0 {
		return // nothing to keep yet
	}
	// Drop the earlier requests' checkpoints too close to an earlier one,
	// then the oldest, to make room.
	last := -1
	s.ckpts = slices.DeleteFunc(s.ckpts, func(c ckpt) bool {
		if c.task != s.tk.id && last >= 0 && c.nTokens <= last+e.ckptStep {
			return true
		}
		last = c.nTokens
		return false
	})
	if k := len(s.ckpts) - e.nCkpt + 1; k > 0 {
		s.ckpts = slices.Delete(s.ckpts, 0, k)
	}
	state, err := e.lctx.SeqStatePartial(s.id)
	if err != nil || len(state) == 0 {
		return
	}
	s.ckpts = append(s.ckpts, ckpt{nTokens: nStart, posMin: lo, posMax: hi, task: s.tk.id,
		sum: e.tokSum(s.cache[:nStart]), state: state})
	if e.opts.Logger != nil {
		e.opts.Logger.Debug("created context checkpoint", "slot", s.id, "n", len(s.ckpts), "max", e.nCkpt,
			"pos_min", lo, "pos_max", hi, "n_tokens", nStart, "bytes", len(state))
	}
}
