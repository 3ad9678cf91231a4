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
			if off, ok := p.refAt[uint32(id)]; ok && (first < 0 || off < first) {
				first, missing = off, uint32(id)
			}
		}
		for _, e := range body {
			if e.kind == eRef && (int(e.val) >= len(p.rules) || p.rules[e.val] == nil) {
				if off, ok := p.refAt[e.val]; ok && (first < 0 || off < first) {
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
	if id, ok := p.leftRecursion(); ok {
		p.fail(p.origin[id], KindLeftRecursion, "rule %q is left-recursive", p.ownerOf(id))
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
	off, ok := p.origin[id]
	if !ok {
		return p.nameOf(id)
	}
	for _, n := range p.named {
		if v, ok := p.symbols[n]; ok && p.origin[v] == off {
			return n
		}
	}
	// A helper rule: its origin is inside the body of a named rule; the
	// named rule defined last before it owns it.
	best, bestOff := p.nameOf(id), -1
	for _, n := range p.named {
		if o, ok := p.origin[p.symbols[n]]; ok && o <= off && o > bestOff {
			best, bestOff = n, o
		}
	}
	return best
}

// leftRecursion reports a rule that can reach itself through leftmost
// references. Like llama.cpp, a reference is followed by the next one only
// when the referenced rule has an empty alternative written out (not when
// it is empty through other rules). The result is the rule that closes the
// cycle.
func (p *parser) leftRecursion() (uint32, bool) {
	n := len(p.rules)
	empty := make([]bool, n)
	edges := make([][]uint32, n)
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
	for id, body := range p.rules {
		follow := true
		for _, e := range body {
			switch {
			case e.kind == eRef && follow:
				edges[id] = append(edges[id], e.val)
				follow = empty[e.val]
			case e.kind == eEnd || e.kind == eAlt:
				follow = true
			default:
				follow = false
			}
		}
	}
	const (
		unseen = iota
		active
		done
	)
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
