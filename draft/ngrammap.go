package draft

import (
	"context"
	"slices"

	"github.com/x/llama"
)

// NgramMap drafts by self-speculation like NgramSimple, and keeps
// statistics of the n-grams it finds (llama.cpp's common_ngram_map):
//
//   - Without Values (llama.cpp's ngram-map-k) it remembers, for each key
//     n-gram it drafted from, how many tokens of that draft the target
//     accepted, and drafts no more than that from it next time.
//   - With Values (ngram-map-k4v) it also counts the continuations (up to
//     four different m-grams of SizeM tokens) seen after each key. It
//     drafts only once the key was found MinHits times, and only when its
//     most frequent continuation was seen at least twice as often as all
//     the others together: it drafts less, and what it drafts is accepted
//     more often, on text that repeats itself with variations.
//
// An earlier occurrence of the key is found through a hash table of the
// n-grams of the history (256Ki entries, 1 MiB, made at the first Draft),
// then by a backward scan, as in llama.cpp, whose drafts, and so
// timings.draft_n and draft_n_accepted, it reproduces.
//
// The statistics outlive a sequence: Begin starts a new one, keeping what
// was learned of the tokens it shares with the last (llama-server keeps
// one map per slot, so the turns of a conversation build on each other).
// A Draft whose history is shorter than the last one's begins a new
// sequence by itself. Like NgramSimple it drafts nothing, and never fails,
// when the history is too short. One NgramMap drafts for one sequence at a
// time.
type NgramMap struct {
	// SizeN is the length of the key n-gram (default 12,
	// --spec-ngram-map-k-size-n; at most 1024, larger values count as 1024).
	SizeN int
	// SizeM is the most tokens drafted, and the length of the counted
	// continuations (default 48, --spec-ngram-map-k-size-m; at most 1024
	// likewise).
	SizeM int
	// Values counts the continuations of each key (ngram-map-k4v).
	Values bool
	// MinHits is how many times a key must have been found before it
	// drafts, with Values (0 or 1: at once, llama.cpp's default for
	// --spec-ngram-map-k4v-min-hits). A key counts at most 16380 times, as
	// in llama.cpp, so a larger MinHits never drafts.
	MinHits int

	keys     []mapKey
	hash     []uint32 // n-gram hash -> index of an occurrence (0: none)
	hashLast int      // the n-grams starting after it are not hashed yet

	lastBegin int // tokens of the sequence at the last Begin
	lastCheck int // tokens of the sequence at the last Draft or Begin

	drafted          bool // the last Draft made a draft, from
	draftKey, draftV int  // keys[draftKey].values[draftV]
}

// mapValues is how many continuations a key counts, and mapCountMax the
// most a key or a continuation counts (llama.cpp's).
const (
	mapValues   = 4
	mapCountMax = 16380
	mapHashSize = 1 << 18
)

type mapKey struct {
	at     int // index of the key in the history
	statAt int // the occurrences up to it are counted
	hits   int
	values [mapValues]mapValue
}

type mapValue struct {
	at       int // index of the continuation in the history (0: unused)
	seen     int
	accepted int // tokens accepted of its last draft
}

func (s *NgramMap) sizes() (n, m int) { return ngramSizes(s.SizeN, s.SizeM) }

// mapHash is llama.cpp's n-gram hash (a multiplicative hash of 32 bits).
func mapHash(toks []llama.Token) uint32 {
	var h uint32
	for _, t := range toks {
		h = h*2654435761 + uint32(t)
	}
	return h % mapHashSize
}

// Begin implements llama.DraftBeginner: it starts a new sequence whose
// tokens so far are prompt. When prompt is shorter than the last sequence,
// what the map learned past the last sequence's prompt (past prompt's
// length less SizeN+SizeM, when that is shorter still) is forgotten, and
// the rest kept, as llama.cpp does: it takes the new sequence to go on
// from the old one's prompt, as a conversation's next turn does.
func (s *NgramMap) Begin(prompt []llama.Token) {
	n, m := s.sizes()
	size := len(prompt)
	cut := s.lastBegin
	if cut > size {
		cut = max(size-n-m, 0)
	}
	if size < s.lastCheck {
		if s.hash != nil {
			for i, at := range s.hash {
				if at != 0 && int(at) >= cut {
					s.hash[i] = 0
				}
			}
			s.hashLast = max(cut-1, 0)
		}
		for i := len(s.keys) - 1; i >= 0; i-- {
			k := &s.keys[i]
			if k.at >= cut {
				s.keys = append(s.keys[:i], s.keys[i+1:]...)
				continue
			}
			if !s.Values {
				continue
			}
			for j := mapValues - 1; j >= 0; j-- {
				if v := k.values[j]; v.at != 0 && v.at >= cut {
					copy(k.values[j:], k.values[j+1:])
					k.values[mapValues-1].at, k.values[mapValues-1].seen = 0, 0
				}
			}
			if k.values[0].at == 0 {
				s.keys = append(s.keys[:i], s.keys[i+1:]...)
			}
		}
	}
	s.lastCheck, s.lastBegin = size, size
}

// equalAt reports whether toks[i:i+len(key)] is key (false past the end).
func equalAt(toks []llama.Token, i int, key []llama.Token) bool {
	return i >= 0 && i+len(key) <= len(toks) && slices.Equal(toks[i:i+len(key)], key)
}

// Draft implements llama.Drafter.
func (s *NgramMap) Draft(_ context.Context, history []llama.Token, limit int) ([]llama.Token, error) {
	s.drafted = false
	if limit <= 0 || len(history) == 0 {
		return nil, nil
	}
	n, m := s.sizes()
	inp := history[:len(history)-1]
	cur := len(inp)
	if cur < 2*n+m || uint64(cur) >= 1<<32-1 {
		return nil, nil
	}
	if s.lastCheck > cur || s.lastBegin > cur {
		s.Begin(inp)
	}
	s.lastCheck = cur
	key := history[len(history)-n:]
	top := cur - n - m - 1 // the last position a key may start at

	if s.hash == nil {
		s.hash = make([]uint32, mapHashSize)
	}
	at := 0
	if i := int(s.hash[mapHash(key)]); i != 0 && i < top && equalAt(inp, i, key) {
		at = i
	}
	scan := func(from, above int) int {
		for j := from; j > above && j > s.hashLast; j-- {
			if equalAt(inp, j, key) {
				return j
			}
		}
		return 0
	}
	if at == 0 && s.lastBegin > n+m+1 {
		at = scan(s.lastBegin-n-m-1, 0)
	}
	if at == 0 {
		at = scan(top, s.lastBegin)
	}
	// Hash the n-grams not hashed yet, in the order of the scans; an
	// entry already taken keeps its index.
	put := func(from, above int) {
		for j := from; j > above && j > s.hashLast; j-- {
			if h := mapHash(inp[j : j+n]); s.hash[h] == 0 {
				s.hash[h] = uint32(j)
			}
		}
	}
	if s.lastBegin > n+m+1 {
		put(s.lastBegin-n-m-1, 0)
	}
	put(top, s.lastBegin)
	s.hashLast = max(top, s.hashLast)
	if at == 0 {
		return nil, nil
	}

	ki := len(s.keys)
	for i := range s.keys {
		if equalAt(inp, s.keys[i].at, key) {
			ki = i
			break
		}
	}
	if ki == len(s.keys) {
		k := mapKey{at: at}
		for v := range k.values {
			k.values[v].accepted = m
		}
		s.keys = append(s.keys, k)
	}
	k := &s.keys[ki]
	k.hits = min(k.hits+1, mapCountMax)

	v := 0
	if s.Values {
		if k.hits < s.MinHits {
			return nil, nil
		}
		s.countValues(k, inp, key, at, m)
		v = bestValue(k)
		if v < 0 {
			return nil, nil
		}
	}
	count := min(m, k.values[v].accepted, limit)
	if count < 0 || at+n+count > cur {
		return nil, nil
	}
	s.drafted, s.draftKey, s.draftV = true, ki, v
	out := make([]llama.Token, count)
	copy(out, inp[at+n:])
	return out, nil
}

// countValues counts the continuations after the occurrences of key from
// k.statAt to at.
func (s *NgramMap) countValues(k *mapKey, inp, key []llama.Token, at, m int) {
	for i := k.statAt; i <= at; i++ {
		if !equalAt(inp, i, key) {
			continue
		}
		begin := i + len(key)
		for v := range k.values {
			val := &k.values[v]
			if val.at == 0 {
				*val = mapValue{at: begin, accepted: m}
			} else if begin+m > len(inp) || val.at+m > len(inp) || !equalAt(inp, val.at, inp[begin:begin+m]) {
				continue
			}
			val.seen = min(val.seen+1, mapCountMax)
			break
		}
	}
	k.statAt = at
}

// bestValue is the continuation seen at least twice as often as the
// others together (the first of the most seen), or -1.
func bestValue(k *mapKey) int {
	best, most, rest := 0, 0, 0
	for v, val := range k.values {
		if val.seen > most {
			best, most = v, val.seen
		}
	}
	for v, val := range k.values {
		if v != best {
			rest += val.seen
		}
	}
	if rest > 0 && most < 2*rest {
		return -1
	}
	return best
}

// Accepted implements llama.Drafter: the key and continuation of the last
// draft draft no more than n tokens next time. A count outside [0, SizeM]
// is taken as the nearest bound.
func (s *NgramMap) Accepted(n int) {
	if !s.drafted || s.draftKey >= len(s.keys) {
		return
	}
	_, m := s.sizes()
	s.keys[s.draftKey].values[s.draftV].accepted = min(max(n, 0), m)
}
