package gbnf

import (
	"errors"
	"math/bits"
	"sync"
)

// MaxAcceptWork bounds the comparisons llama.cpp's grammar engine may make
// to accept one token (see Stacks.Work): about half a second of a slow
// core. JSON Schemas of 5,000 optional properties or alternatives stay
// below half of it; a grammar whose readings multiply with the text passes
// it after a few dozen characters, where each token would otherwise cost
// more (the cost of a token grows with the cube of its length there).
const MaxAcceptWork = 250_000_000

// Stacks follows llama.cpp's grammar engine through the text it accepts:
// it keeps the set of parse stacks the engine keeps, built by the same
// algorithm (the engine's advance, accept and UTF-8 decoding), so that
// what the engine's next step will cost is known before the engine runs
// it. It is what bounds the work that grows with the text, which the
// parser's check (see MaxStackWork) cannot see: x{0,1000} x{0,1000} ...
// passes it, yet after n characters each repetition can be in n places at
// once, and a step that took microseconds takes minutes.
//
// Stacks are shared persistent lists with hashes, and sets are hashed, so
// following the text costs Go time linear in the stacks where the engine's
// costs are quadratic. A Stacks is not safe for concurrent use; Clone
// gives an independent copy.
type Stacks struct {
	rules   [][]elem
	alts    [][]int32
	start   uint32
	live    []*node // nil: the empty stack (the text may end here)
	partial partialUTF8
	scratch *scratch
	work    int64 // comparisons the engine made in the last AcceptToken
	steps   int64 // the Go work of advance, pushes included (Masker's count)
}

// node is one element of a stack: the position of a rule body, on top of
// its parent. The empty stack is nil.
type node struct {
	parent *node
	pos    uint64 // rule<<32 | index
	hash   uint64
	depth  int32
}

// push returns parent with position i of rule r on top.
func (s *Stacks) push(parent *node, r uint32, i int) *node {
	pos := uint64(r)<<32 | uint64(i)
	h := uint64(14695981039346656037)
	var d int32 = 1
	if parent != nil {
		h, d = parent.hash, parent.depth+1
	}
	h = (h ^ pos) * 1099511628211
	h ^= h >> 29
	w := s.work0()
	s.steps++
	if w.single {
		return &node{parent: parent, pos: pos, hash: h, depth: d}
	}
	if len(w.slab) == 0 {
		// Nodes come in blocks, fewer allocations; small ones first, as
		// most copies of a Stacks push only a few.
		w.block = min(max(2*w.block, 8), 256)
		w.slab = make([]node, w.block)
	}
	n := &w.slab[0]
	w.slab = w.slab[1:]
	*n = node{parent: parent, pos: pos, hash: h, depth: d}
	return n
}

func depthOf(n *node) int32 {
	if n == nil {
		return 0
	}
	return n.depth
}

// depthWeight is what copying or comparing a stack costs, in comparisons
// of short stacks: stacks of one size are compared element by element up
// from the bottom, which stacks in one list mostly share, as a block of
// memory (measured: a stack 2,000 deep costs about 60 short ones).
func depthWeight(st *node) int64 { return 1 + int64(depthOf(st))/32 }

// searchCost is what the engine's linear search of list for st costs.
func searchCost(list *stackSet, st *node) int64 {
	return int64(len(list.list)) * depthWeight(st)
}

// top returns the rule and position of n's top element.
func (n *node) top() (uint32, int) { return uint32(n.pos >> 32), int(uint32(n.pos)) }

// isToken reports whether an element kind matches tokens, not characters.
func isToken(k elemKind) bool { return k == eToken || k == eTokenNot }

func hashOf(n *node) uint64 {
	if n == nil {
		return 0
	}
	return n.hash
}

func sameStack(a, b *node) bool {
	for a != b {
		if a == nil || b == nil || a.pos != b.pos || a.hash != b.hash {
			return false
		}
		a, b = a.parent, b.parent
	}
	return true
}

// scratch holds what a Stacks and its forks work with: the sets they
// search in, and the block of nodes new stacks take from.
type scratch struct {
	seen, cur, next, memo, adv stackSet
	memoN                      []int64
	slab                       []node
	block                      int  // the size of the last block of nodes
	single                     bool // no blocks: each node its own (a node kept keeps no block alive)
}

// work0 returns the scratch space, made on first use.
func (s *Stacks) work0() *scratch {
	if s.scratch == nil {
		s.scratch = &scratch{}
		for _, set := range []*stackSet{&s.scratch.seen, &s.scratch.cur, &s.scratch.next, &s.scratch.memo, &s.scratch.adv} {
			set.stamp = 1
		}
	}
	return s.scratch
}

// stackSet is a set of stacks in insertion order: an open-addressing
// table of indices into list, emptied in constant time by a new stamp.
type stackSet struct {
	list   []*node
	slots  []int32 // index into list + 1, valid where stamps matches stamp
	stamps []uint32
	stamp  uint32
}

func newStackSet() *stackSet { return &stackSet{stamp: 1} }

// add adds n unless the set holds an equal stack, and reports whether it
// did.
func (s *stackSet) add(n *node) bool {
	if 2*(len(s.list)+1) > len(s.slots) {
		s.grow()
	}
	mask := uint64(len(s.slots) - 1)
	for i := hashOf(n) & mask; ; i = (i + 1) & mask {
		if s.stamps[i] != s.stamp {
			s.stamps[i], s.slots[i] = s.stamp, int32(len(s.list)+1)
			s.list = append(s.list, n)
			return true
		}
		if sameStack(s.list[s.slots[i]-1], n) {
			return false
		}
	}
}

func (s *stackSet) grow() {
	size := max(16, 2*len(s.slots))
	s.slots, s.stamps, s.stamp = make([]int32, size), make([]uint32, size), 1
	mask := uint64(size - 1)
	for k, n := range s.list {
		i := hashOf(n) & mask
		for s.stamps[i] == s.stamp {
			i = (i + 1) & mask
		}
		s.stamps[i], s.slots[i] = s.stamp, int32(k+1)
	}
}

// cleared resets s and returns it.
func (s *stackSet) cleared() *stackSet {
	s.reset()
	return s
}

func (s *stackSet) reset() {
	s.list = s.list[:0]
	s.stamp++
	if s.stamp == 0 { // wrapped: old stamps could match again
		clear(s.stamps)
		s.stamp = 1
	}
}

// index returns the position in list of a stack equal to n, or -1.
func (s *stackSet) index(n *node) int {
	if len(s.slots) == 0 {
		return -1
	}
	mask := uint64(len(s.slots) - 1)
	for i := hashOf(n) & mask; s.stamps[i] == s.stamp; i = (i + 1) & mask {
		if k := int(s.slots[i] - 1); sameStack(s.list[k], n) {
			return k
		}
	}
	return -1
}

// firstStep holds what Start returns, made on its first call.
type firstStep struct {
	once   sync.Once
	stacks *Stacks
	cost   int64
}

// Start returns the stacks llama.cpp's grammar engine starts with (as
// Stacks) and the cost of its first step (their Cost, up to MaxStackWork).
// Both are made on the first call and kept: every later call, from any
// goroutine, returns a fresh copy of the same stacks, so a grammar used by
// many requests is set up once.
func (g *Grammar) Start() (*Stacks, int64) {
	if g.first == nil { // a Grammar not made by Parse
		s := g.Stacks()
		return s, s.Cost(MaxStackWork)
	}
	f := g.first
	f.once.Do(func() {
		f.stacks = g.Stacks()
		f.cost = f.stacks.Cost(MaxStackWork)
	})
	return f.stacks.Clone(), f.cost
}

// Stacks returns the stacks llama.cpp's grammar engine starts with.
func (g *Grammar) Stacks() *Stacks {
	s := &Stacks{rules: g.rules, alts: g.alts, start: g.start}
	out := newStackSet()
	seen := s.work0().seen.cleared()
	s.alternatives(s.start, func(i int) {
		var st *node
		if !s.isEnd(s.start, i) {
			st = s.push(nil, s.start, i)
		}
		s.advance(st, out, seen)
	})
	s.live = out.list
	return s
}

// Clone returns an independent copy.
func (s *Stacks) Clone() *Stacks {
	c := s.Fork()
	c.scratch = nil
	return c
}

// Fork returns a copy that shares its scratch space and its block of new
// nodes with s: cheaper than Clone, but s and the copy must then be used
// from one goroutine, one call at a time.
func (s *Stacks) Fork() *Stacks {
	c := *s
	c.live = append([]*node(nil), s.live...)
	return &c
}

// Work returns the comparisons llama.cpp's engine made to accept the last
// token (AcceptToken): the searches of its lists of stacks for duplicates,
// and the copies and ordered-set lookups of the stacks it pushes, each
// weighted by the stacks' depth (see depthWeight).
func (s *Stacks) Work() int64 { return s.work }

// Len returns the number of stacks.
func (s *Stacks) Len() int { return len(s.live) }

func (s *Stacks) isEnd(r uint32, i int) bool {
	k := s.rules[r][i].kind
	return k == eEnd || k == eAlt
}

// altStarts returns, by rule, where each alternative starts.
func altStarts(rules [][]elem) [][]int32 {
	n := 0
	for _, body := range rules {
		for _, e := range body {
			if e.kind == eAlt || e.kind == eEnd {
				n++
			}
		}
	}
	all := make([]int32, 0, n) // one allocation for all rules
	alts := make([][]int32, len(rules))
	for r, body := range rules {
		first := len(all)
		all = append(all, 0)
		for i, e := range body {
			if e.kind == eAlt {
				all = append(all, int32(i+1))
			}
		}
		alts[r] = all[first:len(all):len(all)]
	}
	return alts
}

// alternatives calls f with the start of each alternative of rule r.
func (s *Stacks) alternatives(r uint32, f func(i int)) {
	for _, i := range s.alts[r] {
		f(int(i))
	}
}

// advance adds to out the stacks st leads to once every reference on top
// is expanded (llama_grammar_advance_stack); seen is scratch.
func (s *Stacks) advance(st *node, out, seen *stackSet) {
	seen.reset()
	todo := []*node{st}
	for len(todo) > 0 {
		cur := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		// The engine copies each stack it pushes and looks it up in a
		// set ordered by comparing stacks: both grow with its depth.
		s.work += depthWeight(cur) * int64(1+bits.Len(uint(len(seen.list))))
		s.steps++
		if !seen.add(cur) {
			continue
		}
		if cur == nil {
			s.work += int64(len(out.list))
			out.add(nil)
			continue
		}
		r, i := cur.top()
		switch e := s.rules[r][i]; e.kind {
		case eRef:
			// The engine reads the whole rule to find its alternatives.
			s.work += int64(len(s.rules[e.val]))
			s.alternatives(e.val, func(a int) {
				next := cur.parent
				if !s.isEnd(r, i+1) {
					next = s.push(next, r, i+1)
				}
				if !s.isEnd(e.val, a) {
					next = s.push(next, e.val, a)
				}
				todo = append(todo, next)
			})
		case eChar, eCharNot, eAny, eToken, eTokenNot:
			s.work += searchCost(out, cur)
			out.add(cur)
		}
	}
}

// matchChar reports whether the character element at the top of st
// takes c, and the position after its class (llama_grammar_match_char).
func (s *Stacks) matchChar(r uint32, i int, c uint32) (bool, int) {
	body := s.rules[r]
	positive := body[i].kind == eChar || body[i].kind == eAny
	found := false
	for {
		switch {
		case body[i+1].kind == eRangeUpper:
			found = found || (body[i].val <= c && c <= body[i+1].val)
			i += 2
		case body[i].kind == eAny:
			found = true
			i++
		default:
			found = found || body[i].val == c
			i++
		}
		if body[i].kind != eCharAlt {
			break
		}
	}
	return found == positive, i
}

// after returns st with its top element, matched, replaced by the
// position after it (the element ends its alternative: popped).
func (s *Stacks) after(st *node, j int) *node {
	r, _ := st.top()
	if s.isEnd(r, j) {
		return st.parent
	}
	return s.push(st.parent, r, j)
}

// AcceptToken follows llama.cpp's engine accepting token id, whose text
// is piece (llama_grammar_accept_token): a stack with a token element on
// top takes the token, the others take the piece's characters one by one.
// It reports false when no stack is left, which the engine treats as an
// error (the token should have been refused first).
func (s *Stacks) AcceptToken(id int32, piece []byte) bool {
	return s.AcceptTokenLimit(id, piece, stackCap) == nil
}

// ErrWork is AcceptTokenLimit's error when the engine's work would pass
// the limit.
var ErrWork = errors.New("gbnf: the grammar engine's work passes the limit")

// errNoStack is AcceptTokenLimit's error when no stack takes the token.
var errNoStack = errors.New("gbnf: no stack takes the token")

// AcceptTokenLimit is AcceptToken that gives up, returning ErrWork, once
// the comparisons llama.cpp's engine would make (Work) pass limit; the
// stacks are then left in no useful state (accept on a Clone). It returns
// a non-nil error other than ErrWork when no stack takes the token.
func (s *Stacks) AcceptTokenLimit(id int32, piece []byte, limit int64) error {
	cps, partial := decodeUTF8(piece, s.partial)
	s.work = 0
	out := newStackSet()
	w := s.work0()
	seen, cur, next := &w.seen, &w.cur, &w.next
	for _, st := range s.live {
		if st == nil {
			continue
		}
		r, i := st.top()
		if k := s.rules[r][i].kind; isToken(k) {
			if (k == eToken) == (s.rules[r][i].val == uint32(id)) {
				s.advance(s.after(st, i+1), out, seen)
				if s.work > limit {
					return ErrWork
				}
			}
			continue
		}
		cur.reset()
		cur.add(st)
		for _, c := range cps {
			next.reset()
			for _, t := range cur.list {
				s.acceptChar(t, c, next, seen)
				if s.work > limit {
					return ErrWork
				}
			}
			cur, next = next, cur
			if len(cur.list) == 0 {
				break
			}
		}
		for _, t := range cur.list {
			s.work += searchCost(out, t)
			out.add(t)
		}
		if s.work > limit {
			return ErrWork
		}
	}
	s.live = out.list
	s.partial = partial
	if len(s.live) == 0 {
		return errNoStack
	}
	return nil
}

// FilterPaths bounds the work of llama.cpp's filter on the one candidate
// token whose text is piece (llama_grammar_apply_impl with one token): the
// stacks it visits, path by path, each counted as often as paths lead to
// it, and the stacks each visit makes. The engine follows a path only as
// far as the token's characters match and stops at the first path that
// takes the token; the bound follows every path. It stops counting past
// limit, returning a figure above it.
func (s *Stacks) FilterPaths(piece []byte, limit int64) int64 {
	cps, _ := decodeUTF8(piece, s.partial)
	w := s.work0()
	saved := s.work
	defer func() { s.work = saved }()
	cur, next := w.cur.cleared(), w.next.cleared()
	counts := make([]int64, 0, len(s.live))
	for _, st := range s.live {
		if cur.add(st) {
			counts = append(counts, 1)
		}
	}
	var total int64
	var nextCounts []int64
	for k := 0; len(cur.list) > 0; k++ {
		next.reset()
		nextCounts = nextCounts[:0]
		for x, st := range cur.list {
			n := counts[x]
			total = satAdd(total, n)
			if total > limit {
				return total
			}
			if st == nil || k >= len(cps) {
				continue
			}
			r, i := st.top()
			if isToken(s.rules[r][i].kind) {
				continue
			}
			ok, j := s.matchChar(r, i, cps[k])
			if !ok {
				continue
			}
			adv := w.adv.cleared()
			s.advance(s.after(st, j), adv, &w.seen)
			total = satAdd(total, satMul(n, int64(len(adv.list))))
			for _, u := range adv.list {
				if y := next.index(u); y >= 0 {
					nextCounts[y] = satAdd(nextCounts[y], n)
				} else {
					next.add(u)
					nextCounts = append(nextCounts, n)
				}
			}
		}
		cur, next = next, cur
		counts, nextCounts = nextCounts, counts
	}
	return total
}

// acceptChar adds to out what st leads to after character c
// (llama_grammar_accept_chr).
func (s *Stacks) acceptChar(st *node, c uint32, out, seen *stackSet) {
	if st == nil {
		return
	}
	r, i := st.top()
	if isToken(s.rules[r][i].kind) {
		return
	}
	if ok, j := s.matchChar(r, i, c); ok {
		s.advance(s.after(st, j), out, seen)
	}
}

// Cost estimates, in the units of Work, the engine's pass over the
// candidate tokens before the next token: each stack advanced and, for the
// tokens whose first character it takes, each stack that advance made.
// The advances are run, so their costs are the engine's (the accept that
// follows is bounded token by token, see AcceptTokenLimit). It stops once
// the cost passes limit, returning a figure above limit. Work is left as
// it was.
func (s *Stacks) Cost(limit int64) int64 {
	saved := s.work
	defer func() { s.work = saved }()
	w := s.work0()
	seen := &w.seen
	// memo: the work of advancing stacks already advanced, by content.
	memo, adv := w.memo.cleared(), &w.adv
	memoN := w.memoN[:0]
	defer func() { w.memoN = memoN[:0] }()
	// advance returns the work of advancing st past its top, and the
	// stacks it makes (in adv, until the next call).
	advance := func(st *node) (int64, []*node) {
		adv.reset()
		if st == nil {
			return 0, nil
		}
		r, i := st.top()
		j := i + 1
		if !isToken(s.rules[r][i].kind) {
			_, j = s.matchChar(r, i, 0)
		}
		s.work = 0
		s.advance(s.after(st, j), adv, seen)
		return s.work, adv.list
	}
	var total int64
	var made []*node
	for _, st := range s.live {
		ws, list := advance(st)
		total = satAdd(total, ws)
		made = append(made[:0], list...)
		for _, t := range made {
			if total > limit {
				return total
			}
			var wt int64
			if k := memo.index(t); k >= 0 {
				wt = memoN[k]
			} else {
				wt, _ = advance(t)
				memo.add(t)
				memoN = append(memoN, wt)
			}
			total = satAdd(total, wt)
		}
	}
	return total
}

// partialUTF8 is a character cut by the end of a token's text: its bits so
// far and the bytes it still needs (-1: an invalid sequence was seen).
type partialUTF8 struct {
	value  uint32
	remain int
}

// decodeUTF8 decodes text after partial as llama.cpp's grammar engine does
// (decode_utf8 in llama-grammar.cpp): an invalid byte ends the decoding,
// the text read so far then counting as no characters; a text stops at a
// NUL byte, as a C string does.
func decodeUTF8(text []byte, partial partialUTF8) ([]uint32, partialUTF8) {
	lookup := [16]int{1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4}
	var cps []uint32
	value, remain := partial.value, partial.remain
	p := 0
	at := func(k int) byte {
		if k < len(text) {
			return text[k]
		}
		return 0
	}
	for at(p) != 0 && remain > 0 {
		b := at(p)
		if b>>6 != 2 {
			return nil, partialUTF8{0, -1}
		}
		value = value<<6 + uint32(b&0x3F)
		p++
		remain--
	}
	if partial.remain > 0 && remain == 0 {
		cps = append(cps, value)
	}
	for at(p) != 0 {
		first := at(p)
		remain = lookup[first>>4] - 1
		if remain < 0 {
			return nil, partialUTF8{0, remain}
		}
		mask := byte(1)<<(7-remain) - 1
		value = uint32(first & mask)
		p++
		for at(p) != 0 && remain > 0 {
			value = value<<6 + uint32(at(p)&0x3F)
			p++
			remain--
		}
		if remain == 0 {
			cps = append(cps, value)
		}
	}
	return cps, partialUTF8{value, remain}
}
