package gbnf

// MaxStackWork bounds the work of one step of llama.cpp's grammar engine,
// in stack comparisons. The engine keeps one parse stack per way the text
// so far can go on. After each character it advances every stack that
// matched through the rules that may match nothing, and keeps the new
// stacks in a list it searches linearly; before each token it filters the
// candidate tokens by advancing every stack, and every stack those
// advances make, one list per advance. A grammar of a few lines (root ::=
// a, a ::= b b b b b b b b b b, and so on for five levels down to e ::=
// "x"*) makes a step 10^12 comparisons, and 1,000 optional items ("x"?
// repeated) 10^11: they keep a core busy for minutes to hours a token, in
// C, where nothing can interrupt it. The parser bounds the work from the
// grammar's shape, counted for the worst text; a grammar above the bound
// (a few seconds a token on a slow core) is an error of Kind KindLimit.
// Real grammars stay below it, and so do JSON Schemas with 5,000 optional
// properties (less than half of it), enums of thousands of values and
// hundreds of tools. What one step costs can also grow with the text (a
// bounded repetition x{0,m} may hold m stacks where the text can enter it
// at m places); that is bounded while generating, see [Stacks].
const MaxStackWork = 1_000_000_000

// stackCap saturates the counts.
const stackCap = 1 << 40

func satAdd(a, b int64) int64 { return min(a+b, stackCap) }

func satMul(a, b int64) int64 {
	if a != 0 && b > stackCap/a {
		return stackCap
	}
	return a * b
}

// quad is a sum over stacks that depends on the frames below the one it
// was counted in, as a polynomial in the stacks those frames add (k, the
// continuation): a + b·k + c·k². A stack's own advance creates n + k
// stacks when the rest of its rule can match nothing (n otherwise), so sums
// of counts are linear in k and sums of squared counts quadratic.
type quad struct{ a, b, c int64 }

func (q quad) add(o quad) quad { return quad{satAdd(q.a, o.a), satAdd(q.b, o.b), satAdd(q.c, o.c)} }

// at evaluates q for a continuation of k stacks.
func (q quad) at(k int64) int64 {
	return satAdd(q.a, satAdd(satMul(q.b, k), satMul(q.c, satMul(k, k))))
}

// in rewrites q, counted in a callee's frame, for the caller's frame: the
// callee's continuation is the n stacks the rest of the caller creates,
// plus the caller's own continuation k when that rest can match nothing.
func (q quad) in(n int64, pass bool) quad {
	r := quad{a: q.at(n)}
	if pass {
		r.b = satAdd(q.b, satMul(2, satMul(q.c, n)))
		r.c = q.c
	}
	return r
}

// stackInfo is what advancing a stack whose top is one position of a rule
// body gives within the rule's own frame: the stacks it creates with a
// character or token on top, each counted with its weight (v, as a function
// of the rule's continuation), and whether the rest of the alternative can
// match nothing, so that the advance goes on into the frame below (pass).
type stackInfo struct {
	v     quad
	pass  bool
	state uint8 // 0: not computed, 1: in progress, 2: done
}

// stackPass counts the stacks advances create, each stack weighted by
// leaf (of the rule and position of its top). The count of stacks itself
// (cont nil, every leaf weighing 1) is the continuation the other passes
// are counted in: their leaves' weights depend on it.
type stackPass struct {
	p     *parser
	leaf  func(r uint32, i int) quad
	cont  *stackPass // the count of stacks; nil in that count itself
	memo  [][]stackInfo
	below []int64 // by rule: the most the frames below its frame add
	// alts' results, by rule
	altSum  []quad
	altNull []bool
	altDone []bool
}

func newStackPass(p *parser, leaf func(r uint32, i int) quad, cont *stackPass) *stackPass {
	n := len(p.rules)
	return &stackPass{p: p, leaf: leaf, cont: cont, memo: make([][]stackInfo, n),
		altSum: make([]quad, n), altNull: make([]bool, n), altDone: make([]bool, n)}
}

// at returns the stackInfo of position i of rule r.
func (s *stackPass) at(r uint32, i int) stackInfo {
	s.p.step()
	if s.memo[r] == nil {
		s.memo[r] = make([]stackInfo, len(s.p.rules[r]))
	}
	switch m := s.memo[r][i]; m.state {
	case 2:
		return m
	case 1:
		return stackInfo{} // a leftmost cycle of last references (growingCycle refused the others): llama.cpp's advance sees its stacks again
	}
	s.memo[r][i].state = 1
	var v stackInfo
	switch e := s.p.rules[r][i]; e.kind {
	case eAlt, eEnd:
		v.pass = true
	case eRef:
		q, null := s.alts(e.val)
		if s.cont != nil {
			k := s.cont.at(r, i+1)
			q = q.in(k.v.a, k.pass)
		}
		v.v = q
		if null {
			next := s.at(r, i+1)
			v.v = v.v.add(next.v)
			v.pass = next.pass
		}
	default: // a character, class or token
		v.v = s.leaf(r, i)
	}
	v.state = 2
	s.memo[r][i] = v
	return v
}

// alts returns what a reference to rule r creates within r's frame (the sum
// over its alternatives) and whether r can match nothing. It is kept: a
// rule referred to from many places is read once.
func (s *stackPass) alts(r uint32) (quad, bool) {
	if s.altDone[r] {
		return s.altSum[r], s.altNull[r]
	}
	body := s.p.rules[r]
	var q quad
	null := false
	for i := 0; i < len(body); i++ {
		a := s.at(r, i)
		q = q.add(a.v)
		null = null || a.pass
		for i < len(body) && body[i].kind != eAlt && body[i].kind != eEnd {
			i++
		}
	}
	s.altSum[r], s.altNull[r], s.altDone[r] = q, null, true
	return q, null
}

// worst evaluates v, counted in r's frame, for the most stacks the frames
// below r's may add.
func (s *stackPass) worst(r uint32, v quad) int64 {
	if s.cont == nil {
		return v.a
	}
	return v.at(s.cont.below[r])
}

// advance returns what advancing a stack whose top is position i of rule r
// creates, in the worst context below the frame.
func (s *stackPass) advance(r uint32, i int) int64 {
	a := s.at(r, i)
	n := s.worst(r, a.v)
	if a.pass {
		return satAdd(n, s.below[r])
	}
	return n
}

// solve fills below for the rules in order (those the start rule
// reaches): below[r] is at least what the rule's callers' frames add when
// an advance passes through r, over every call site; the start rule's
// frame is on an empty stack, which weighs empty.
func (s *stackPass) solve(order []uint32, start uint32, empty int64) {
	n := len(s.p.rules)
	base := make([]int64, n)
	in := make([][]stackEdge, n)
	base[start] = empty
	for _, r := range order {
		for i, e := range s.p.rules[r] {
			if e.kind != eRef {
				continue
			}
			next := s.at(r, i+1)
			w := s.worst(r, next.v)
			base[e.val] = max(base[e.val], w)
			if next.pass {
				in[e.val] = append(in[e.val], stackEdge{r, w})
			}
		}
	}
	s.below = s.p.longestBelow(order, base, in)
}

// checkStacks refuses a grammar whose grammar-engine steps could take more
// than MaxStackWork. It runs after the left-recursion checks: the leftmost
// cycles left are of last references, which add no stack.
func (p *parser) checkStacks(root string) {
	if work, made, r := p.stackWork(root); work > MaxStackWork {
		p.fail(p.origin.at(r), KindLimit, "the grammar is too ambiguous: after one character llama.cpp's grammar engine may hold %d parse states (from rule %q), through items that may match nothing, and take about %d stack comparisons to go on from them (at most %d)", made, p.ownerOf(r), work, MaxStackWork)
	}
}

// stackWork returns the most work of one step, counted as llama.cpp counts
// stacks (duplicates merged, and the stacks below a rule's frame included
// where the rest of the rule can match nothing), with the stacks live at
// that step and the rule it started from. Figures saturate at stackCap.
//
// A step starts from the stacks one advance left (live: those the advance
// after one stack's character created) and costs two things:
//   - accepting a character: every live stack advances into one list that
//     is searched for duplicates, about live × Σ N(t) comparisons, N(t)
//     being the stacks the advance of t creates;
//   - filtering the candidate tokens: llama.cpp advances each live stack t
//     (N(t)² comparisons) and, for the tokens whose first character t
//     takes, each stack u that advance made (N(u)² each), whatever tokens
//     remain: Σ N(t)² + Σ N(u)².
//
// A stack's N depends on the frames below it: the rule a stack is in may
// be referred to where little follows it (a JSON object's whitespace
// before a colon) and where much does (before its first key, one of
// thousands), so the sums are kept as functions of what follows the frame
// (quad) and evaluated where each reference puts them.
func (p *parser) stackWork(root string) (work, made int64, where uint32) {
	start := p.symbols[root]
	reach := make([]bool, len(p.rules))
	reach[start] = true
	order := []uint32{start}
	for k := 0; k < len(order); k++ {
		for _, e := range p.rules[order[k]] {
			if e.kind == eRef && !reach[e.val] {
				reach[e.val] = true
				order = append(order, e.val)
			}
		}
	}
	// next skips the class members after a character element.
	next := func(r uint32, i int) int {
		body := p.rules[r]
		j := i + 1
		for j < len(body) && (body[j].kind == eCharAlt || body[j].kind == eRangeUpper) {
			j++
		}
		return j
	}
	one := func(uint32, int) quad { return quad{a: 1} }
	count := newStackPass(p, one, nil)
	count.solve(order, start, 1)
	pass := func(leaf func(r uint32, i int) quad) *stackPass {
		s := newStackPass(p, leaf, count)
		s.solve(order, start, 0)
		return s
	}
	// n is N of a stack whose top is position i of rule r, in r's
	// continuation.
	n := func(r uint32, i int) quad {
		a := count.at(r, next(r, i))
		if a.pass {
			return quad{a: a.v.a, b: 1}
		}
		return quad{a: a.v.a}
	}
	square := func(v quad) quad { return quad{a: satMul(v.a, v.a), b: satMul(2, satMul(v.a, v.b)), c: v.b} }
	sq := pass(func(r uint32, i int) quad { return square(n(r, i)) }) // Σ N(u)² over one advance's stacks
	accept := pass(n)
	filter := pass(func(r uint32, i int) quad {
		j := next(r, i)
		a := sq.at(r, j)
		v := square(n(r, i)).add(a.v)
		if a.pass {
			v.a = satAdd(v.a, sq.below[r])
		}
		return v
	})

	where = start
	note := func(r uint32, s, a, f int64) {
		if v := satAdd(satMul(s, a), f); v > work {
			work, made, where = v, s, r
		}
	}
	s0, null := count.alts(start)
	if null {
		s0.a = satAdd(s0.a, 1)
	}
	a0, _ := accept.alts(start)
	f0, _ := filter.alts(start)
	note(start, s0.a, accept.worst(start, a0), filter.worst(start, f0))
	for _, r := range order {
		body := p.rules[r]
		for i := 0; i < len(body); i++ {
			switch body[i].kind {
			case eAlt, eEnd, eRef, eCharAlt, eRangeUpper:
				continue
			}
			j := next(r, i)
			note(r, count.advance(r, j), accept.advance(r, j), filter.advance(r, j))
		}
	}
	return work, made, where
}

// stackEdge is a reference from rule from, followed by a rest that can
// match nothing and creates w.
type stackEdge struct {
	from uint32
	w    int64
}

// longestBelow solves below[r] = max(base[r], max over in[r] of
// w+below[from]) for the rules in order, by the strongly connected
// components of the references (Tarjan's algorithm, without recursion): a
// component whose own edges add stacks (w > 0) grows with the text without
// bound, which fails the parse.
func (p *parser) longestBelow(order []uint32, base []int64, in [][]stackEdge) []int64 {
	n := len(base)
	index := make([]int32, n) // 0: not visited; else visit order + 1
	low := make([]int32, n)
	comp := make([]int32, n) // component number + 1 once assigned
	var stack []uint32
	var comps [][]uint32
	next := int32(1)
	type frame struct {
		r uint32
		k int
	}
	var calls []frame
	for _, s := range order {
		if index[s] != 0 {
			continue
		}
		calls = append(calls[:0], frame{s, 0})
		index[s], low[s] = next, next
		next++
		stack = append(stack, s)
		for len(calls) > 0 {
			p.step()
			f := &calls[len(calls)-1]
			if f.k < len(in[f.r]) {
				// Edges are walked backwards, to the rules whose frames lie
				// below: components come out after those they depend on.
				u := in[f.r][f.k].from
				f.k++
				switch {
				case index[u] == 0:
					index[u], low[u] = next, next
					next++
					stack = append(stack, u)
					calls = append(calls, frame{u, 0})
				case comp[u] == 0:
					low[f.r] = min(low[f.r], index[u])
				}
				continue
			}
			r := f.r
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				parent := calls[len(calls)-1].r
				low[parent] = min(low[parent], low[r])
			}
			if low[r] != index[r] {
				continue
			}
			var c []uint32
			for {
				u := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				comp[u] = int32(len(comps) + 1)
				c = append(c, u)
				if u == r {
					break
				}
			}
			comps = append(comps, c)
		}
	}
	below := make([]int64, n)
	for _, c := range comps {
		id := comp[c[0]]
		var v int64
		for _, r := range c {
			v = max(v, base[r])
			for _, e := range in[r] {
				if comp[e.from] == id {
					if e.w > 0 {
						p.fail(p.origin.at(r), KindLimit, "the grammar is too ambiguous: rule %q can be entered again with items that may match nothing after it, so llama.cpp's grammar engine holds more parse states the longer the text", p.ownerOf(r))
					}
					continue
				}
				v = max(v, satAdd(e.w, below[e.from]))
			}
		}
		for _, r := range c {
			below[r] = v
		}
	}
	return below
}
