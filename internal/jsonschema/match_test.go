package jsonschema

import (
	"fmt"
	"sort"
)

// gbnfMatcher matches strings against a grammar parsed by parseGBNF, by
// computing the set of end positions reachable from each (item, position).
type gbnfMatcher struct {
	rules map[string][][]*gItem
	in    []rune
	memo  map[memoKey][]int
	busy  map[memoKey]bool
	steps int
}

type memoKey struct {
	rule string
	pos  int
}

func newMatcher(grammar string) (*gbnfMatcher, error) {
	rules, err := parseGBNF(grammar)
	if err != nil {
		return nil, err
	}
	if _, ok := rules["root"]; !ok {
		return nil, fmt.Errorf("no root rule")
	}
	return &gbnfMatcher{rules: rules}, nil
}

func (m *gbnfMatcher) match(s string) (bool, error) {
	m.in = []rune(s)
	m.memo = map[memoKey][]int{}
	m.busy = map[memoKey]bool{}
	m.steps = 0
	ends, err := m.rule("root", 0)
	if err != nil {
		return false, err
	}
	for _, e := range ends {
		if e == len(m.in) {
			return true, nil
		}
	}
	return false, nil
}

func (m *gbnfMatcher) rule(name string, pos int) ([]int, error) {
	k := memoKey{name, pos}
	if r, ok := m.memo[k]; ok {
		return r, nil
	}
	if m.busy[k] {
		return nil, fmt.Errorf("left recursion through rule %s", name)
	}
	m.busy[k] = true
	r, err := m.alts(m.rules[name], pos)
	delete(m.busy, k)
	if err != nil {
		return nil, err
	}
	m.memo[k] = r
	return r, nil
}

func (m *gbnfMatcher) alts(alts [][]*gItem, pos int) ([]int, error) {
	set := map[int]bool{}
	for _, seq := range alts {
		cur := []int{pos}
		for _, it := range seq {
			next := map[int]bool{}
			for _, p := range cur {
				ends, err := m.item(it, p)
				if err != nil {
					return nil, err
				}
				for _, e := range ends {
					next[e] = true
				}
			}
			cur = keys(next)
			if len(cur) == 0 {
				break
			}
		}
		for _, p := range cur {
			set[p] = true
		}
	}
	return keys(set), nil
}

func keys(s map[int]bool) []int {
	r := make([]int, 0, len(s))
	for k := range s {
		r = append(r, k)
	}
	sort.Ints(r)
	return r
}

func (m *gbnfMatcher) item(it *gItem, pos int) ([]int, error) {
	m.steps++
	if m.steps > 5_000_000 {
		return nil, fmt.Errorf("matcher step limit")
	}
	if it.min == 1 && it.max == 1 {
		return m.once(it, pos)
	}
	result := map[int]bool{}
	cur := map[int]bool{pos: true}
	seen := map[int]bool{}
	if it.min == 0 {
		result[pos] = true
	}
	for n := 1; it.max == -1 || n <= it.max; n++ {
		next := map[int]bool{}
		for p := range cur {
			ends, err := m.once(it, p)
			if err != nil {
				return nil, err
			}
			for _, e := range ends {
				next[e] = true
			}
		}
		if it.max == -1 {
			// unbounded: drop positions already expanded
			for p := range next {
				if seen[p] && n > it.min {
					delete(next, p)
				}
			}
		}
		if len(next) == 0 {
			break
		}
		for p := range next {
			seen[p] = true
			if n >= it.min {
				result[p] = true
			}
		}
		cur = next
		if n > len(m.in)+it.min+2 && it.max == -1 {
			break
		}
	}
	return keys(result), nil
}

func (m *gbnfMatcher) once(it *gItem, pos int) ([]int, error) {
	switch it.kind {
	case gLit:
		if pos+len(it.lit) > len(m.in) {
			return nil, nil
		}
		for i, r := range it.lit {
			if m.in[pos+i] != r {
				return nil, nil
			}
		}
		return []int{pos + len(it.lit)}, nil
	case gClass:
		if pos >= len(m.in) {
			return nil, nil
		}
		r := m.in[pos]
		in := false
		for i := 0; i+1 < len(it.ranges); i += 2 {
			if r >= it.ranges[i] && r <= it.ranges[i+1] {
				in = true
			}
		}
		if in != it.neg {
			return []int{pos + 1}, nil
		}
		return nil, nil
	case gAny:
		if pos < len(m.in) {
			return []int{pos + 1}, nil
		}
		return nil, nil
	case gRef:
		return m.rule(it.ref, pos)
	case gGroup:
		return m.alts(it.alts, pos)
	}
	return nil, fmt.Errorf("unknown item kind")
}
