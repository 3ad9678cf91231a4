package engine

import (
	"log/slog"
	"slices"

	"github.com/x/llama"
)

// promptCache keeps the KV states of prompts in host RAM, as llama-server's
// prompt cache (--cache-ram): a slot about to drop most of its cached
// prompt for a new request saves it here, and a later prompt that shares more
// with a saved entry than with its slot restores that entry. It belongs to
// the engine loop (no locking).
type promptCache struct {
	limit   int64 // bytes; <= 0: no limit
	entries []promptCacheEntry
	size    int64
	log     *slog.Logger
}

type promptCacheEntry struct {
	tokens []llama.Token
	state  []byte
	ckpts  []ckpt // the slot's context checkpoints (see checkpoint.go)
	mtp    []byte // the draft-mtp head's memory of the sequence (nil: none)
}

// bytes is what the entry counts against the cache's limit.
func (en *promptCacheEntry) bytes() int64 {
	return int64(len(en.state)) + int64(len(en.mtp)) + ckptBytes(en.ckpts)
}

// defaultCacheRAMMiB is llama-server's --cache-ram default.
const defaultCacheRAMMiB = 8192

// newPromptCache returns the prompt cache o asks for, or nil when off.
func newPromptCache(o Options, log *slog.Logger) *promptCache {
	if o.NoPromptCache {
		return nil
	}
	mib := int64(o.PromptCacheMiB)
	if mib == 0 {
		mib = defaultCacheRAMMiB
	}
	return &promptCache{limit: mib << 20, log: log}
}

// save copies slot s's sequence state into the cache, unless an entry
// already holds its whole prompt. Entries the new one contains are dropped,
// and the oldest ones make room. It reports whether an entry was added.
func (c *promptCache) save(e *Engine, s *engSlot) bool {
	if len(s.cache) == 0 {
		return false
	}
	for _, en := range c.entries {
		if engCommonPrefix(en.tokens, s.cache) == len(s.cache) {
			return false // already cached
		}
	}
	state, err := e.lctx.SeqState(s.id)
	if err != nil || len(state) == 0 {
		return false
	}
	e.ckptValid(s)
	en := promptCacheEntry{tokens: slices.Clone(s.cache), state: state, ckpts: slices.Clone(s.ckpts)}
	if e.spec != nil && e.spec.mtp != nil {
		// As llama-server: the head's memory goes with the target's.
		en.mtp, _ = e.spec.mtp.Seq(s.id).State()
	}
	n := en.bytes()
	if c.limit > 0 && n > c.limit {
		c.log.Warn("prompt state exceeds the prompt cache size, not cached", "slot", s.id, "bytes", n)
		return false
	}
	c.entries = slices.DeleteFunc(c.entries, func(en promptCacheEntry) bool {
		if engCommonPrefix(en.tokens, s.cache) == len(en.tokens) {
			c.size -= en.bytes()
			return true
		}
		return false
	})
	for c.limit > 0 && len(c.entries) > 0 && c.size+n > c.limit {
		c.size -= c.entries[0].bytes()
		c.entries = c.entries[1:]
	}
	c.entries = append(c.entries, en)
	c.size += n
	c.log.Debug("prompt cache", "slot", s.id, "saved_tokens", len(s.cache), "entries", len(c.entries), "bytes", c.size)
	return true
}

// load restores into slot s the cached entry that best continues prompt,
// when it keeps more of itself and covers more of the prompt than what the
// slot holds (llama-server's rule; entries keeping under a quarter of
// themselves are passed over). The entry leaves the cache.
func (c *promptCache) load(e *Engine, s *engSlot, prompt []llama.Token) {
	if len(prompt) == 0 {
		return
	}
	lcp := engCommonPrefix(s.cache, prompt)
	keepBest := float64(-1) // an empty slot takes any entry
	if len(s.cache) > 0 {
		keepBest = float64(lcp) / float64(len(s.cache))
	}
	simBest := float64(lcp) / float64(len(prompt))
	best := -1
	for i, en := range c.entries {
		l := engCommonPrefix(en.tokens, prompt)
		keep, sim := float64(l)/float64(len(en.tokens)), float64(l)/float64(len(prompt))
		if keep < 0.25 {
			continue
		}
		if keepBest < keep && simBest < sim {
			keepBest, simBest, best = keep, sim, i
		}
	}
	if best < 0 {
		return
	}
	en := c.entries[best]
	c.entries = slices.Delete(c.entries, best, best+1)
	c.size -= en.bytes()
	e.lctx.Memory().Remove(s.id, 0, -1)
	s.cache, s.ckpts = s.cache[:0], nil
	if err := e.lctx.SetSeqState(s.id, en.state); err != nil {
		c.log.Warn("failed to load a prompt from the prompt cache", "slot", s.id, "err", err)
		e.lctx.Memory().Remove(s.id, 0, -1)
		return
	}
	s.cache = append(s.cache, en.tokens...)
	s.ckpts = en.ckpts
	if q := e.spec.mtpSeq(s.id); q != nil {
		if en.mtp == nil {
			q.Reset()
		} else if err := q.SetState(en.mtp, en.tokens); err != nil {
			c.log.Warn("draft-mtp: failed to load the head's memory from the prompt cache", "slot", s.id, "err", err)
			q.Reset()
		}
	}
	c.log.Debug("prompt cache: loaded a prompt", "slot", s.id, "tokens", len(en.tokens))
}

// update runs when a completion request starts on slot s: if the slot would
// lose more than half of what it holds (or holds nothing), its prompt is
// saved and, with load (the request's CachePrompt), the best cached prompt
// for the request is loaded.
func (c *promptCache) update(e *Engine, s *engSlot, prompt []llama.Token, load bool) {
	lcp := engCommonPrefix(s.cache, prompt)
	if len(s.cache) > 0 && float64(lcp)/float64(len(s.cache)) >= 0.5 {
		return
	}
	// llama-server's log line, which its test suite looks for.
	c.log.Debug("updating prompt cache", "slot", s.id)
	c.save(e, s)
	if load {
		c.load(e, s, prompt)
	}
}

// cacheIdleSlots saves every idle slot's prompt to the cache when a request
// starts, and with a unified KV cache frees their memory for the busy
// slots (llama-server's --cache-idle-slots).
func (c *promptCache) cacheIdleSlots(e *Engine) {
	for _, s := range e.slots {
		if s.tk != nil || len(s.cache) == 0 {
			continue
		}
		if c.save(e, s) {
			// llama-server's debug marker, which its test suite looks for.
			c.log.Debug("__TEST_TAG_CACHE_IDLE_SLOT__ idle slot saved to the prompt cache", "slot", s.id)
		}
		if e.opts.Context.KVUnified {
			e.lctx.Memory().Remove(s.id, 0, -1)
			s.cache = s.cache[:0]
		}
	}
}
