package gbnf

// MaxStackWork bounds the work of one step of llama.cpp's grammar engine,
// in stack comparisons. The engine keeps one parse stack per way the text
// so far can go on. After each character it advances every stack that
// matched through the rules that may match nothing, and keeps the new
// stacks in a list it searches linearly: a step costs about the stacks in
// the list times the stacks the advances create. A grammar of a few lines
// (root ::= a, a ::= b b b b b b b b b b, and so on for five levels down to
// e ::= "x"*) makes that 10^12, and keeps a core busy for hours on the
// first token, in C, where nothing can interrupt it. The parser bounds the
// work from the grammar's shape, counted for the worst text; a grammar
// above the bound (about a second of llama.cpp's time per character) is an
// error of Kind KindLimit. Real grammars stay orders of magnitude below
// it, and so do JSON Schemas with hundreds of optional properties, enums of
// thousands of values and hundreds of tools (5,000 optional properties
// reach a seventh of it).
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

// stackInfo is what advancing a stack whose top is one position of a rule
// body gives within the rule's own frame: the stacks it creates with a
// character or token on top, each counted with its weight (n), and whether
// the rest of the alternative can match nothing, so that the advance goes
// on into the frame below (pass).
type stackInfo struct {
	n     int64
	pass  bool
	state uint8 // 0: not computed, 1: in progress, 2: done
}

// stackPass counts the stacks advances create, each stack weighted by
// leaf (of the rule and position of its top).
type stackPass struct {
	p     *parser
	leaf  func(r uint32, i int) int64
	memo  [][]stackInfo
	below []int64 // by rule: the most the frames below its frame add
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
		n, null := s.alts(e.val)
		v.n = n
		if null {
			next := s.at(r, i+1)
			v.n = satAdd(v.n, next.n)
			v.pass = next.pass
		}
	default: // a character, class or token
		v.n = s.leaf(r, i)
	}
	v.state = 2
	s.memo[r][i] = v
	return v
}

// alts returns what a reference to rule r creates within r's frame (the sum
// over its alternatives) and whether r can match nothing.
func (s *stackPass) alts(r uint32) (int64, bool) {
	body := s.p.rules[r]
	var n int64
	null := false
	for i := 0; i < len(body); i++ {
		a := s.at(r, i)
		n = satAdd(n, a.n)
		null = null || a.pass
		for i < len(body) && body[i].kind != eAlt && body[i].kind != eEnd {
			i++
		}
	}
	return n, null
}

// advance returns what advancing a stack whose top is position i of rule r
// creates, in the worst context below the frame.
func (s *stackPass) advance(r uint32, i int) int64 {
	a := s.at(r, i)
	if a.pass {
		return satAdd(a.n, s.below[r])
	}
	return a.n
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
			base[e.val] = max(base[e.val], next.n)
			if next.pass {
				in[e.val] = append(in[e.val], stackEdge{r, next.n})
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
		p.fail(p.origin.at(r), KindLimit, "the grammar is too ambiguous: after one character llama.cpp's grammar engine may hold %d parse states (from rule %q), through items that may match nothing, and go on from them with about %d stack comparisons (at most %d)", made, p.ownerOf(r), work, MaxStackWork)
	}
}

// stackWork returns the most work of one step, counted as llama.cpp counts
// stacks (duplicates merged, and the stacks below a rule's frame included
// where the rest of the rule can match nothing), with the stacks of the
// step before it and the rule it started from. A step's work is the stacks
// one advance creates times the sum of what each of them creates when it
// advances in turn: stacks that all advance into many new ones are what
// makes the engine slow. Figures saturate at stackCap.
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
	count := &stackPass{p: p, memo: make([][]stackInfo, len(p.rules)), leaf: func(uint32, int) int64 { return 1 }}
	count.solve(order, start, 1)
	// Each stack weighs what its own advance creates.
	weigh := &stackPass{p: p, memo: make([][]stackInfo, len(p.rules)), leaf: func(r uint32, i int) int64 {
		return count.advance(r, next(r, i))
	}}
	weigh.solve(order, start, 0)

	where = start
	note := func(r uint32, n, w int64) {
		if v := satMul(n, w); v > work {
			work, made, where = v, n, r
		}
	}
	n0, null := count.alts(start)
	w0, _ := weigh.alts(start)
	if null {
		n0 = satAdd(n0, 1)
	}
	note(start, n0, w0)
	for _, r := range order {
		body := p.rules[r]
		for i := 0; i < len(body); i++ {
			switch body[i].kind {
			case eAlt, eEnd, eRef, eCharAlt, eRangeUpper:
				continue
			}
			j := next(r, i)
			note(r, count.advance(r, j), weigh.advance(r, j))
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
