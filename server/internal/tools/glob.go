package tools

// globMatch matches s against a glob pattern: a run of two or more '*'
// ("**") matches anything, '/' included ("**/" also matches nothing,
// unlike llama-server's matcher, where "src/*.go" cannot match a
// top-level "src/a.go"); '*' and '?' match anything but '/'; [...] is a
// class ([!...] negated, a-z ranges; a '[' without its ']' is literal).
//
// It runs the pattern as a nondeterministic automaton over s, without
// recursion: time is O(len(pattern) × len(s)) and memory O(len(pattern)),
// whatever the pattern (llama-server's recursive matcher overflows its
// stack on a pattern of a few million stars).
func globMatch(pattern, s string) bool {
	toks := compileGlob(pattern)
	n := len(toks)
	cur := make([]bool, n+1)
	next := make([]bool, n+1)
	cur[0] = true
	globClosure(toks, cur)
	for si := 0; si < len(s); si++ {
		c := s[si]
		clear(next)
		any := false
		for i := 0; i < n; i++ {
			if !cur[i] {
				continue
			}
			t := &toks[i]
			switch t.kind {
			case globLit:
				if c == t.c {
					next[i+1], any = true, true
				}
			case globOne:
				if c != '/' {
					next[i+1], any = true, true
				}
			case globClass:
				if classMatch(c, pattern[t.lo:t.hi]) {
					next[i+1], any = true, true
				}
			case globStar:
				if c != '/' {
					next[i], any = true, true
				}
			case globAny:
				next[i], any = true, true
			}
		}
		if !any {
			return false
		}
		globClosure(toks, next)
		cur, next = next, cur
	}
	return cur[n]
}

const (
	globLit = iota
	globOne
	globClass
	globStar // '*'
	globAny  // "**"
	// globSkip reads nothing: it comes before the globAny of a "**/" and
	// leads either into it or past it and its '/', so that "**/" may
	// match nothing at all (but "**" that has read something still needs
	// its '/').
	globSkip
)

type globTok struct {
	kind   uint8
	c      byte // globLit
	lo, hi int  // globClass: the body, pattern[lo:hi]
}

// compileGlob splits pattern into tokens, a run of stars becoming one.
func compileGlob(pattern string) []globTok {
	var toks []globTok
	for i := 0; i < len(pattern); {
		switch pattern[i] {
		case '*':
			j := i
			for j < len(pattern) && pattern[j] == '*' {
				j++
			}
			switch {
			case j-i == 1:
				toks = append(toks, globTok{kind: globStar})
			case j < len(pattern) && pattern[j] == '/':
				toks = append(toks, globTok{kind: globSkip}, globTok{kind: globAny})
			default:
				toks = append(toks, globTok{kind: globAny})
			}
			i = j
		case '?':
			toks = append(toks, globTok{kind: globOne})
			i++
		case '[':
			end := i + 1
			if end < len(pattern) && (pattern[end] == ']' || pattern[end] == '-') {
				end++
			}
			for end < len(pattern) && pattern[end] != ']' {
				end++
			}
			if end < len(pattern) {
				toks = append(toks, globTok{kind: globClass, lo: i + 1, hi: end})
				i = end + 1
			} else {
				toks = append(toks, globTok{kind: globLit, c: '['})
				i++
			}
		default:
			toks = append(toks, globTok{kind: globLit, c: pattern[i]})
			i++
		}
	}
	return toks
}

// globClosure adds to set the states reached without reading: past a
// star (it may match nothing), and from a globSkip into its "**" or past
// its "**/". Edges only go forward, so one pass in order is enough.
func globClosure(toks []globTok, set []bool) {
	for i := range toks {
		if !set[i] {
			continue
		}
		switch toks[i].kind {
		case globStar, globAny:
			set[i+1] = true
		case globSkip:
			set[i+1] = true
			set[i+3] = true
		}
	}
}
