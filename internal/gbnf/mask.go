package gbnf

import (
	"cmp"
	"errors"
	"slices"
	"sort"
)

// Vocab is a model's vocabulary as llama.cpp's grammar engine reads it to
// filter candidate tokens (llama_grammar_apply_impl): each token's text
// decoded into characters from a clean start, the tokens sorted by their
// characters into a trie. Make one per model with NewVocab; it is
// immutable and safe for concurrent use.
type Vocab struct {
	piece func(t int) []byte
	cps   []uint32      // every token's characters, token after token
	off   []int32       // token t's characters: cps[off[t]:off[t+1]]
	end   []partialUTF8 // the cut character a token's text ends with
	bad   []bool        // refused whatever the stacks: empty text, NUL first, invalid UTF-8
	cont  []int32       // the tokens whose text starts with a UTF-8 continuation byte
	nodes []trieNode
	order []int32 // token ids in trie order
	at    []int32 // token id → index in order
}

// trieNode is a prefix of characters shared by the tokens order[lo:hi];
// those of order[lo:mid] end with it.
type trieNode struct {
	c              uint32 // the character that leads here from the parent
	child, sibling int32  // -1: none
	lo, mid, hi    int32
}

// NewVocab reads a vocabulary of n tokens, piece(t) being the text the
// engine has for token t (the vocabulary's token_to_piece, special tokens
// rendered). The function is kept for texts that a cut character before
// them changes (see Masker) and must stay valid and safe for concurrent
// use.
func NewVocab(n int, piece func(t int) []byte) *Vocab {
	v := &Vocab{piece: piece, off: make([]int32, n+1), end: make([]partialUTF8, n), bad: make([]bool, n)}
	for t := range n {
		p := piece(t)
		if len(p) == 0 || p[0] == 0 {
			v.bad[t] = true
		} else {
			cps, end := decodeUTF8(p, partialUTF8{})
			v.cps = append(v.cps, cps...)
			v.end[t] = end
			v.bad[t] = end.remain < 0
			if p[0]>>6 == 2 {
				v.cont = append(v.cont, int32(t))
			}
		}
		v.off[t+1] = int32(len(v.cps))
	}
	v.order = make([]int32, n)
	for t := range v.order {
		v.order[t] = int32(t)
	}
	sort.Slice(v.order, func(i, j int) bool {
		return slices.Compare(v.chars(v.order[i]), v.chars(v.order[j])) < 0
	})
	v.at = make([]int32, n)
	for i, t := range v.order {
		v.at[t] = int32(i)
	}
	v.nodes = []trieNode{{child: -1, sibling: -1, hi: int32(n)}}
	v.build(0, 0)
	return v
}

func (v *Vocab) chars(t int32) []uint32 { return v.cps[v.off[t]:v.off[t+1]] }

// build makes the children of node (its tokens sorted, depth characters
// in), depth first.
func (v *Vocab) build(node int32, depth int) {
	n := &v.nodes[node]
	lo, hi := n.lo, n.hi
	i := lo
	for i < hi && len(v.chars(v.order[i])) == depth {
		i++
	}
	v.nodes[node].mid = i
	last := int32(-1)
	for i < hi {
		c := v.chars(v.order[i])[depth]
		j := i + 1
		for j < hi && v.chars(v.order[j])[depth] == c {
			j++
		}
		k := int32(len(v.nodes))
		v.nodes = append(v.nodes, trieNode{c: c, child: -1, sibling: -1, lo: i, hi: j})
		if last < 0 {
			v.nodes[node].child = k
		} else {
			v.nodes[last].sibling = k
		}
		last = k
		v.build(k, depth+1)
		i = j
	}
}

// Piece returns token t's text (NewVocab's piece).
func (v *Vocab) Piece(t int) []byte { return v.piece(t) }

// Len returns the number of tokens.
func (v *Vocab) Len() int { return len(v.bad) }

// MaxMaskWork bounds the Go work of one Masker call (characters tried on
// stacks, and stacks advanced and made, weighted by their time): about a
// second of a core.
const MaxMaskWork = 100_000_000

// Masker filters candidate tokens as llama.cpp's grammar engine does
// (llama_grammar_apply_impl), in Go, with the engine's own stacks (see
// Stacks). The engine checks each candidate against each stack path by
// path, and a path branches wherever the grammar is ambiguous: for a
// grammar of a few ambiguous repetitions and a long token it refuses,
// the paths are exponentially many (16 groups of [^s]{0,100} held a core
// for minutes on one candidate). The Masker works on sets of stacks
// instead: the stacks a prefix of characters leads to, kept once by
// content, the step from a set on a character computed once, and the
// vocabulary walked as a trie; where the engine's work multiplies with
// the paths, the Masker's grows with the distinct stacks.
//
// One difference is deliberate: where a stack with a token element on top
// is reached inside a token's characters, the engine's filter allows the
// token when its id matches, and its accept then finds no stack and
// throws (which aborts the process); the Masker refuses such a token.
//
// A Masker keeps what it has computed for the next calls: a generation
// goes back to the same sets (a JSON string's characters all lead to one)
// and their masks. It is not safe for concurrent use.
type Masker struct {
	v       *Vocab
	w       *Stacks // works the steps: its rules, its scratch
	sets    []maskSet
	byHash  map[uint64][]int32
	entries int   // stacks held by sets
	masks   int   // full masks held
	work    int64 // this call's work
	limit   int64
	canon   []*node
	match   []int32
}

// maskSet is a set of stacks: the stacks some prefix of characters leads
// to.
type maskSet struct {
	list     []*node                 // by hash
	lit      map[uint32][]int32      // of a large set, the stacks topped by one literal character, by it
	classes  []int32                 // and the other stacks topped by a character class
	tok      bool                    // a stack of list has a token element on top
	bySubset map[uint64][]subsetStep // steps by the stacks that take the character
	few      []maskStep              // the first steps from here; then:
	ascii    *[128]int32
	more     map[uint32]int32 // steps on other characters
	partial  map[partialUTF8]bool
	mask     []uint64 // the full mask from here (clean start), once made
}

// subsetStep is the step of the stacks match (indices into a set's list)
// past their character: to set next (-1: none).
type subsetStep struct {
	match []int32
	next  int32
}

// maskStep is a step on character c to set next (-1: none).
type maskStep struct {
	c    uint32
	next int32
}

// Limits on what a Masker keeps: past them between calls it starts over,
// and within a call (one mask) the call fails as too much work.
const (
	maskerMaxEntries = 1 << 20 // stacks in sets
	maskerMaxSets    = 1 << 16
	maskerMaxMasks   = 32
	maskerFewSteps   = 8
	maskerFewStacks  = 16 // larger sets are indexed by character
)

// stepWeight is what a step of advance (a stack expanded, a node made)
// counts in a Masker's work, against 1 for a character tried on a stack:
// about their ratio in time.
const stepWeight = 4

// classWeight is how many elements of a character class scanned count
// one unit.
const classWeight = 4

// NewMasker returns a Masker for grammar g and vocabulary v.
func NewMasker(g *Grammar, v *Vocab) *Masker {
	m := &Masker{v: v, w: &Stacks{rules: g.rules, alts: g.alts, start: g.start}}
	m.reset()
	return m
}

func (m *Masker) reset() {
	m.sets = m.sets[:0]
	m.byHash = map[uint64][]int32{}
	m.entries, m.masks = 0, 0
	m.w.scratch = nil
	// The sets keep a few of the nodes the steps make, for many calls: a
	// block of nodes would stay alive for each.
	m.w.work0().single = true
}

// errMaskWork is the Masker's ErrWork.
var errMaskWork = errors.Join(ErrWork, errors.New("gbnf: filtering the candidate tokens passes the Masker's limit"))

// intern returns the id of the set holding the stacks of list (-1: none).
func (m *Masker) intern(list []*node) int32 {
	if len(list) == 0 {
		return -1
	}
	canon := append(m.canon[:0], list...)
	slices.SortFunc(canon, func(a, b *node) int { return cmp.Compare(hashOf(a), hashOf(b)) })
	m.canon = canon
	h := uint64(len(canon))
	for _, n := range canon {
		h = (h ^ hashOf(n)) * 1099511628211
	}
	for _, id := range m.byHash[h] {
		if slices.EqualFunc(m.sets[id].list, canon, sameStack) {
			return id
		}
	}
	if len(m.sets) >= maskerMaxSets || m.entries+len(canon) > maskerMaxEntries {
		m.work = max(m.work, m.limit+1) // the caller stops
		return -1
	}
	id := int32(len(m.sets))
	tok := false
	for _, st := range canon {
		if st != nil {
			r, i := st.top()
			tok = tok || isToken(m.w.rules[r][i].kind)
		}
	}
	m.sets = append(m.sets, maskSet{list: append([]*node(nil), canon...), tok: tok})
	m.byHash[h] = append(m.byHash[h], id)
	m.entries += len(canon)
	m.work += int64(len(canon))
	return id
}

// step returns the set that set leads to on character c (-1: none).
func (m *Masker) step(set int32, c uint32) int32 {
	if s := &m.sets[set]; s.ascii == nil {
		for _, st := range s.few {
			if st.c == c {
				return st.next
			}
		}
	} else if c < 128 {
		if s.ascii[c] != 0 {
			return s.ascii[c] - 2
		}
	} else if next, ok := s.more[c]; ok {
		return next
	}
	// Which stacks take c: what they lead to depends on nothing else (a
	// stack past its character is the same whatever the character), so
	// the characters that the same stacks take share one step.
	w := m.w
	match := m.match[:0]
	try := func(k int32) {
		st := m.sets[set].list[k]
		if st == nil {
			return
		}
		r, i := st.top()
		if isToken(w.rules[r][i].kind) {
			return
		}
		ok, j := w.matchChar(r, i, c)
		m.work += 1 + int64(j-i)/classWeight // a class of many characters costs its length
		if ok {
			match = append(match, k)
		}
	}
	if s := &m.sets[set]; len(s.list) > maskerFewStacks {
		// A large set (a choice among many words) is looked up by
		// character: only the stacks that may take c are tried.
		if s.lit == nil {
			m.index(s)
		}
		for _, k := range s.lit[c] {
			try(k)
		}
		for _, k := range s.classes {
			try(k)
		}
		slices.Sort(match)
	} else {
		for k := range s.list {
			try(int32(k))
		}
	}
	m.match = match
	h := uint64(14695981039346656037)
	for _, k := range match {
		h = (h ^ uint64(k)) * 1099511628211
	}
	next, known := int32(-1), false
	for _, e := range m.sets[set].bySubset[h] {
		if slices.Equal(e.match, match) {
			next, known = e.next, true
			break
		}
	}
	if !known && len(match) > 0 {
		sc := w.work0()
		out := sc.next.cleared()
		for _, k := range match {
			st := m.sets[set].list[k]
			r, i := st.top()
			_, j := w.matchChar(r, i, c)
			before := w.steps
			w.advance(w.after(st, j), out, &sc.seen)
			m.work += stepWeight * (w.steps - before)
		}
		next = m.intern(out.list)
	}
	if s := &m.sets[set]; !known {
		if s.bySubset == nil {
			s.bySubset = map[uint64][]subsetStep{}
		}
		s.bySubset[h] = append(s.bySubset[h], subsetStep{slices.Clone(match), next})
		m.entries += 1 + len(match)
	}
	s := &m.sets[set]
	m.entries++ // each step kept counts, as a stack in a set does
	if s.ascii == nil && len(s.few) < maskerFewSteps {
		s.few = append(s.few, maskStep{c, next})
		return next
	}
	if s.ascii == nil {
		m.entries += 64 // the table of ASCII steps
		s.ascii, s.more = new([128]int32), map[uint32]int32{}
		for _, st := range s.few {
			s.remember(st.c, st.next)
		}
		s.few = nil
	}
	s.remember(c, next)
	return next
}

func (s *maskSet) remember(c uint32, next int32) {
	if c < 128 {
		s.ascii[c] = next + 2
	} else {
		s.more[c] = next
	}
}

// index sorts the stacks of a large set by what their top takes.
func (m *Masker) index(s *maskSet) {
	s.lit = map[uint32][]int32{}
	for k, st := range s.list {
		if st == nil {
			continue
		}
		r, i := st.top()
		body := m.w.rules[r]
		switch {
		case isToken(body[i].kind):
		case body[i].kind == eChar && body[i+1].kind != eRangeUpper && body[i+1].kind != eCharAlt:
			s.lit[body[i].val] = append(s.lit[body[i].val], int32(k))
		default:
			s.classes = append(s.classes, int32(k))
		}
	}
	m.work += int64(len(s.list))
}

// partialOK reports whether a stack of set takes the cut character p
// (llama_grammar_match_partial_char): a token may end in one where a
// stack's character class allows a character it could complete to.
func (m *Masker) partialOK(set int32, p partialUTF8) bool {
	s := &m.sets[set]
	if ok, done := s.partial[p]; done {
		return ok
	}
	ok := false
	for _, st := range s.list {
		if st == nil {
			continue
		}
		r, i := st.top()
		if isToken(m.w.rules[r][i].kind) {
			continue
		}
		_, j := m.w.matchChar(r, i, 0)
		m.work += 1 + int64(j-i)/classWeight
		if m.w.matchPartial(r, i, p) {
			ok = true
			break
		}
	}
	if s.partial == nil {
		s.partial = map[partialUTF8]bool{}
	}
	s.partial[p] = ok
	return ok
}

// begin starts a call on stacks s: the set of their stacks.
func (m *Masker) begin(s *Stacks) (int32, error) {
	if m.entries > maskerMaxEntries/2 || len(m.sets) > maskerMaxSets/2 {
		m.reset()
	}
	m.work, m.limit = 0, MaxMaskWork
	set := m.intern(s.live)
	if m.work > m.limit {
		return -1, errMaskWork
	}
	return set, nil
}

// Mask returns, as a bitset over the vocabulary (bit t of word t/64), the
// tokens the engine's filter allows after stacks s, end-of-generation
// tokens aside (the engine allows those where s.AtEnd). The bitset is the
// Masker's, valid until its next call. It returns an error matching
// ErrWork, and no mask, where the work would pass MaxMaskWork.
func (m *Masker) Mask(s *Stacks) ([]uint64, error) {
	set, err := m.begin(s)
	if err != nil {
		return nil, err
	}
	words := (m.v.Len() + 63) / 64
	if set < 0 {
		return make([]uint64, words), nil
	}
	if s.partial.remain == 0 {
		if mask := m.sets[set].mask; mask != nil {
			return mask, nil
		}
	}
	mask := make([]uint64, words)
	if s.partial.remain != 0 {
		// The cut character changes every token's first characters: token
		// by token, those that can complete it (the others are invalid
		// UTF-8 there, refused).
		for _, t := range m.v.cont {
			ok, err := m.allows(set, s.partial, t)
			if err != nil {
				return nil, err
			}
			if ok {
				mask[t/64] |= 1 << (t % 64)
			}
		}
		return mask, nil
	}
	if err := m.walk(0, set, mask); err != nil {
		return nil, err
	}
	if m.masks >= maskerMaxMasks {
		for i := range m.sets {
			m.sets[i].mask = nil
		}
		m.masks = 0
	}
	m.sets[set].mask = mask
	m.masks++
	return mask, nil
}

// walk marks in mask the tokens of trie node (its characters have led to
// set) that the engine allows.
func (m *Masker) walk(node, set int32, mask []uint64) error {
	v := m.v
	n := v.nodes[node]
	m.work++
	allow := func(t int32) { mask[t/64] |= 1 << (t % 64) }
	// The tokens whose characters end here: allowed unless they end in a
	// cut character no stack's class could complete.
	for _, t := range v.order[n.lo:n.mid] {
		switch p := v.end[t]; {
		case v.bad[t]:
		case p.remain == 0 || m.partialOK(set, p):
			allow(t)
		}
	}
	if node == 0 && m.sets[set].tok {
		m.tokenTops(set, n, allow, false)
	}
	if m.work > m.limit {
		return errMaskWork
	}
	for c := n.child; c >= 0; c = v.nodes[c].sibling {
		next := m.step(set, v.nodes[c].c)
		if m.work > m.limit {
			return errMaskWork
		}
		if next >= 0 {
			if err := m.walk(c, next, mask); err != nil {
				return err
			}
		}
	}
	return nil
}

// tokenTops allows, by id, the tokens with characters in order[n.mid:n.hi]
// that the set's stacks with a token element on top take.
func (m *Masker) tokenTops(set int32, n trieNode, allow func(t int32), valid bool) {
	v := m.v
	for _, st := range m.sets[set].list {
		if st == nil {
			continue
		}
		r, i := st.top()
		e := m.w.rules[r][i]
		switch e.kind {
		case eToken:
			if int(e.val) < v.Len() {
				if k := v.at[e.val]; k >= n.mid && k < n.hi && (valid || !v.bad[e.val]) {
					allow(int32(e.val))
				}
			}
		case eTokenNot:
			m.work += int64(n.hi - n.mid)
			for _, t := range v.order[n.mid:n.hi] {
				if uint32(t) != e.val && (valid || !v.bad[t]) {
					allow(t)
				}
			}
		}
	}
}

// Allows reports whether the engine's filter allows token t after stacks
// s (an end-of-generation token aside: see AtEnd). It returns an error
// matching ErrWork where the work would pass MaxMaskWork.
func (m *Masker) Allows(s *Stacks, t int32) (bool, error) {
	var ok [1]bool
	err := m.Filter(s, []int32{t}, ok[:])
	return ok[0], err
}

// Filter sets ok[i] to whether the engine's filter allows token ts[i]
// after stacks s (Allows, the tokens taken one by one, within one
// MaxMaskWork for them all).
func (m *Masker) Filter(s *Stacks, ts []int32, ok []bool) error {
	clear(ok)
	set, err := m.begin(s)
	if set < 0 {
		return err
	}
	for i, t := range ts {
		if t < 0 || int(t) >= m.v.Len() {
			continue
		}
		if ok[i], err = m.allows(set, s.partial, t); err != nil {
			return err
		}
	}
	return nil
}

// allows follows token t's characters (after the cut character partial)
// from set.
func (m *Masker) allows(set int32, partial partialUTF8, t int32) (bool, error) {
	v := m.v
	cps, end := v.chars(t), v.end[t]
	if partial.remain != 0 {
		p := v.piece(int(t))
		if len(p) == 0 || p[0] == 0 {
			return false, nil
		}
		cps, end = decodeUTF8(p, partial)
	} else if v.bad[t] {
		return false, nil
	}
	m.work++
	if end.remain < 0 {
		return false, nil
	}
	if len(cps) > 0 && m.sets[set].tok {
		ok := false
		m.tokenTops(set, trieNode{mid: v.at[t], hi: v.at[t] + 1}, func(int32) { ok = true }, partial.remain != 0)
		if ok {
			return true, nil
		}
	}
	for _, c := range cps {
		set = m.step(set, c)
		if m.work > m.limit {
			return false, errMaskWork
		}
		if set < 0 {
			return false, nil
		}
	}
	return end.remain == 0 || m.partialOK(set, end), nil
}

// AtEnd reports whether the text may end here (a stack is empty): where
// the engine allows end-of-generation tokens.
func (s *Stacks) AtEnd() bool {
	return slices.Contains(s.live, nil)
}

// matchPartial reports whether the character class on top at position i
// of rule r allows a character that the cut character p could complete to
// (llama_grammar_match_partial_char).
func (s *Stacks) matchPartial(r uint32, i int, p partialUTF8) bool {
	body := s.rules[r]
	positive := body[i].kind == eChar || body[i].kind == eAny
	if p.remain < 0 || (p.remain == 1 && p.value < 2) {
		return false
	}
	low := p.value << (uint(p.remain) * 6)
	high := low | (1<<(uint(p.remain)*6) - 1)
	if low == 0 {
		switch p.remain {
		case 2:
			low = 1 << 11
		case 3:
			low = 1 << 16
		}
	}
	for {
		switch {
		case body[i+1].kind == eRangeUpper:
			if body[i].val <= high && low <= body[i+1].val {
				return positive
			}
			i += 2
		case body[i].kind == eAny:
			return true
		default:
			if low <= body[i].val && body[i].val <= high {
				return positive
			}
			i++
		}
		if body[i].kind != eCharAlt {
			return !positive
		}
	}
}
