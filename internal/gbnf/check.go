package gbnf

import "sort"

// check applies llama.cpp's checks after parsing: every rule id in use is
// defined, there is at least one rule, the start rule exists, and no rule is
// left-recursive.
func (p *parser) check(root string) {
	if len(p.rules) == 0 {
		p.fail(len(p.src), KindEmpty, "the grammar defines no rule")
	}
	// A rule id with no body is a name that was referenced but never
	// defined; report the earliest such reference.
	first := -1
	var missing uint32
	for id, body := range p.rules {
		if body == nil {
			if off, ok := p.refAt.get(uint32(id)); ok && (first < 0 || off < first) {
				first, missing = off, uint32(id)
			}
		}
		for _, e := range body {
			if e.kind == eRef && (int(e.val) >= len(p.rules) || p.rules[e.val] == nil) {
				if off, ok := p.refAt.get(e.val); ok && (first < 0 || off < first) {
					first, missing = off, e.val
				}
			}
		}
	}
	if first >= 0 {
		p.fail(first, KindUndefined, "undefined rule %q", p.nameOf(missing))
	}
	for _, body := range p.rules {
		if body == nil {
			// Only a name overwritten by a helper rule's name lands here.
			p.fail(0, KindUndefined, "undefined rule (a name of the form NAME_N clashes with a helper rule)")
		}
	}
	if _, ok := p.symbols[root]; !ok {
		p.fail(0, KindNoRoot, "no rule named %q (the start rule)", root)
	}
	edges, id, ok := p.leftRecursion()
	if ok {
		p.fail(p.origin.at(id), KindLeftRecursion, "rule %q is left-recursive", p.ownerOf(id))
	}
	p.checkLeftmost(edges)
	if id, ok := p.growingCycle(); ok {
		p.fail(p.origin.at(id), KindLeftRecursion, "rule %q is left-recursive (through rules that can match nothing)", p.ownerOf(id))
	}
	p.checkStacks(root)
}

// MaxRefDepth bounds the longest chain of leftmost rule references (a
// reference at the start of an alternative, or after references to rules
// with an empty alternative; groups and repetitions count as references to
// their helper rules). llama.cpp's left-recursion check follows these
// chains by recursion on the C stack: a chain of 100,000 rules kills the
// process. Real grammars have chains of a few rules; JSON Schemas with
// thousands of optional properties make chains of thousands.
const MaxRefDepth = 20000

// maxLeftmostWork bounds the rule elements llama.cpp's left-recursion check
// reads: it does not remember the rules it has checked while it recurses,
// so rules reached by several leftmost paths (r0 ::= r1 | r1 "x", r1 ::= r2
// | r2 "x", ...) are checked once per path, which grows exponentially.
const maxLeftmostWork = 20_000_000

// checkLeftmost refuses grammars whose leftmost reference chains are longer
// than MaxRefDepth, or whose left-recursion check in llama.cpp would read
// more than maxLeftmostWork elements. edges is the acyclic leftmost
// reference graph.
func (p *parser) checkLeftmost(edges [][]uint32) {
	n := len(edges)
	depth := make([]int, n)   // longest chain of references from the rule
	work := make([]uint64, n) // elements llama.cpp reads checking the rule, saturated
	done := make([]bool, n)
	type frame struct {
		id   uint32
		next int
	}
	var stack []frame
	for s := range n {
		if done[s] {
			continue
		}
		stack = append(stack[:0], frame{uint32(s), 0})
		for len(stack) > 0 {
			p.step()
			top := &stack[len(stack)-1]
			if top.next < len(edges[top.id]) {
				to := edges[top.id][top.next]
				top.next++
				if !done[to] {
					stack = append(stack, frame{to, 0})
				}
				continue
			}
			v := top.id
			stack = stack[:len(stack)-1]
			w := uint64(len(p.rules[v]))
			for _, to := range edges[v] {
				depth[v] = max(depth[v], depth[to]+1)
				w = min(w+work[to], maxLeftmostWork+1)
			}
			work[v] = w
			done[v] = true
			if depth[v] > MaxRefDepth {
				p.fail(p.origin.at(v), KindDepth, "rule %q starts a chain of more than %d leftmost rule references", p.ownerOf(v), MaxRefDepth)
			}
		}
	}
	// llama.cpp checks rules in id order, skipping those an earlier check
	// reached.
	reached := make([]bool, n)
	var total uint64
	var todo []uint32
	for s := range n {
		if reached[s] {
			continue
		}
		total += work[s]
		if total > maxLeftmostWork {
			p.fail(p.origin.at(uint32(s)), KindLimit, "rules reachable by many leftmost paths (from rule %q) would take llama.cpp's left-recursion check too long", p.ownerOf(uint32(s)))
		}
		todo = append(todo[:0], uint32(s))
		reached[s] = true
		for len(todo) > 0 {
			v := todo[len(todo)-1]
			todo = todo[:len(todo)-1]
			for _, to := range edges[v] {
				if !reached[to] {
					reached[to] = true
					todo = append(todo, to)
				}
			}
		}
	}
}

// nameOf returns a name of id, preferring the smallest.
func (p *parser) nameOf(id uint32) string {
	var names []string
	for n, v := range p.symbols {
		if v == id {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "?"
	}
	return names[0]
}

// ownerOf names the rule a (possibly helper) rule id was written in.
func (p *parser) ownerOf(id uint32) string {
	off, ok := p.origin.get(id)
	if !ok {
		return p.nameOf(id)
	}
	for _, n := range p.named {
		if v, ok := p.symbols[n]; ok && p.origin.at(v) == off {
			return n
		}
	}
	// A helper rule: its origin is inside the body of a named rule; the
	// named rule defined last before it owns it.
	best, bestOff := p.nameOf(id), -1
	for _, n := range p.named {
		if o, ok := p.origin.get(p.symbols[n]); ok && o <= off && o > bestOff {
			best, bestOff = n, o
		}
	}
	return best
}

// leftRecursion reports a rule that can reach itself through leftmost
// references. Like llama.cpp, a reference is followed by the next one only
// when the referenced rule has an empty alternative written out (not when
// it is empty through other rules). The result is the rule that closes the
// cycle. It also returns the graph of leftmost references.
func (p *parser) leftRecursion() ([][]uint32, uint32, bool) {
	edges := p.leftmostEdges(p.writtenEmpty())
	id, ok := leftCycle(edges)
	return edges, id, ok
}

// writtenEmpty reports, by rule, whether it has an empty alternative
// written out (llama.cpp's rules_may_be_empty).
func (p *parser) writtenEmpty() []bool {
	empty := make([]bool, len(p.rules))
	for id, body := range p.rules {
		start := true
		for _, e := range body {
			if e.kind == eEnd || e.kind == eAlt {
				if start {
					empty[id] = true
				}
				start = true
			} else {
				start = false
			}
		}
	}
	return empty
}

// nullable reports, by rule, whether it can match nothing: it has an
// alternative of references to such rules only (an empty one among
// them). Each alternative counts its references not yet known to be
// nullable, so the work is linear in the grammar's size.
func (p *parser) nullable() []bool {
	n := len(p.rules)
	null := make([]bool, n)
	type alt struct{ rule, left uint32 }
	var alts []alt
	refs := make([][]uint32, n) // by rule: the alternatives referring to it, once per reference
	var queue []uint32
	for id, body := range p.rules {
		a, terminal := alt{rule: uint32(id)}, false
		var mine []uint32
		for _, e := range body {
			switch e.kind {
			case eEnd, eAlt:
				if !terminal {
					if a.left == 0 && !null[id] {
						null[id] = true
						queue = append(queue, uint32(id))
					}
					k := uint32(len(alts))
					alts = append(alts, a)
					for _, r := range mine {
						refs[r] = append(refs[r], k)
					}
				}
				a, terminal, mine = alt{rule: uint32(id)}, false, mine[:0]
			case eRef:
				a.left++
				mine = append(mine, e.val)
			default:
				terminal = true
			}
		}
	}
	for len(queue) > 0 {
		r := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, k := range refs[r] {
			p.step()
			if alts[k].left--; alts[k].left == 0 && !null[alts[k].rule] {
				null[alts[k].rule] = true
				queue = append(queue, alts[k].rule)
			}
		}
	}
	return null
}

// leftmostEdges returns the graph of leftmost references: from each rule
// to the rules an alternative starts with, a reference being followed by
// the next one while the referenced rule is empty.
func (p *parser) leftmostEdges(empty []bool) [][]uint32 {
	edges := make([][]uint32, len(p.rules))
	for id, body := range p.rules {
		follow := true
		for _, e := range body {
			switch {
			case e.kind == eRef && follow:
				edges[id] = append(edges[id], e.val)
				follow = int(e.val) < len(empty) && empty[e.val]
			case e.kind == eEnd || e.kind == eAlt:
				follow = true
			default:
				follow = false
			}
		}
	}
	return edges
}

// growingCycle reports a rule on a cycle of leftmost references (a
// reference followed by the next one while the referenced rule can match
// nothing, directly or through other rules) in which some reference is not
// the last element of its alternative. llama.cpp's stack advance keeps the
// stacks it has seen, so it ends a cycle of last references (root ::= (
// [x]* )*); but each time round a cycle with another reference it leaves
// that reference's successor on the stack, never sees the stack again, and
// goes on until memory runs out. Its own left-recursion check finds such a
// cycle only where every rule it passes has an empty alternative written
// out: root ::= a, a ::= b a "x" | "z", b ::= c, c ::= "" | "y" passes it.
func (p *parser) growingCycle() (uint32, bool) {
	null := p.nullable()
	comp := components(p.leftmostEdges(null))
	for id, body := range p.rules {
		follow := true
		for i, e := range body {
			switch {
			case e.kind == eRef && follow:
				if next := body[i+1].kind; comp[id] == comp[e.val] && next != eEnd && next != eAlt {
					return uint32(id), true
				}
				follow = null[e.val]
			case e.kind == eEnd || e.kind == eAlt:
				follow = true
			default:
				follow = false
			}
		}
	}
	return 0, false
}

// components returns, by node, the strongly connected component of edges
// it belongs to (Tarjan's algorithm, without recursion).
func components(edges [][]uint32) []int {
	n := len(edges)
	index, low, comp := make([]int, n), make([]int, n), make([]int, n)
	for i := range index {
		index[i], comp[i] = -1, -1
	}
	type frame struct {
		v    uint32
		next int
	}
	var stack []uint32
	var calls []frame
	next, ncomp := 0, 0
	for s := range n {
		if index[s] >= 0 {
			continue
		}
		calls = append(calls[:0], frame{uint32(s), 0})
		index[s], low[s] = next, next
		next++
		stack = append(stack, uint32(s))
		for len(calls) > 0 {
			top := &calls[len(calls)-1]
			v := top.v
			if top.next < len(edges[v]) {
				w := edges[v][top.next]
				top.next++
				switch {
				case index[w] < 0:
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					calls = append(calls, frame{w, 0})
				case comp[w] < 0: // on the stack
					low[v] = min(low[v], index[w])
				}
				continue
			}
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				u := calls[len(calls)-1].v
				low[u] = min(low[u], low[v])
			}
			if low[v] == index[v] {
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					comp[w] = ncomp
					if w == v {
						break
					}
				}
				ncomp++
			}
		}
	}
	return comp
}

// leftCycle reports a rule on a cycle of edges: the rule that closes it.
func leftCycle(edges [][]uint32) (uint32, bool) {
	const (
		unseen = iota
		active
		done
	)
	n := len(edges)
	state := make([]uint8, n)
	type frame struct {
		id   uint32
		next int
	}
	for s := range n {
		if state[s] != unseen {
			continue
		}
		stack := []frame{{uint32(s), 0}}
		state[s] = active
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.next == len(edges[top.id]) {
				state[top.id] = done
				stack = stack[:len(stack)-1]
				continue
			}
			to := edges[top.id][top.next]
			top.next++
			switch state[to] {
			case active:
				return to, true
			case unseen:
				state[to] = active
				stack = append(stack, frame{to, 0})
			}
		}
	}
	return 0, false
}
