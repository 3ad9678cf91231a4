package draft

import (
	"context"
	"sync"

	"github.com/x/llama"
)

// NgramModTable is the hashed n-gram table of NgramMod (llama.cpp's
// common_ngram_mod): for each n-gram of NMatch tokens seen, the token that
// followed it last, in a fixed table of 4Mi slots (16 MiB) where n-grams
// of equal hash overwrite one another. One table serves any number of
// NgramMod drafters (llama-server shares one among its slots); it is safe
// for concurrent use.
type NgramModTable struct {
	n       int
	mu      sync.Mutex
	used    int
	entries []llama.Token // -1: empty
}

// ngramModSlots is the table's size, llama.cpp's.
const ngramModSlots = 4 << 20

// NewNgramModTable returns an empty table of n-grams of n tokens (default
// 24, llama.cpp's --spec-ngram-mod-n-match; at most 1024: larger values
// count as 1024).
func NewNgramModTable(n int) *NgramModTable {
	if n <= 0 {
		n = 24
	}
	t := &NgramModTable{n: min(n, ngramSizeMax), entries: make([]llama.Token, ngramModSlots)}
	t.reset()
	return t
}

// N is the length of the table's n-grams.
func (t *NgramModTable) N() int { return t.n }

func (t *NgramModTable) idx(toks []llama.Token) int {
	var h uint64
	for _, x := range toks[:t.n] {
		h = h*6364136223846793005 + uint64(int64(x))
	}
	return int(h % uint64(len(t.entries)))
}

// add records that toks[t.n] followed toks[:t.n].
func (t *NgramModTable) add(toks []llama.Token) {
	i := t.idx(toks)
	if t.entries[i] < 0 {
		t.used++
	}
	t.entries[i] = toks[t.n]
}

func (t *NgramModTable) reset() {
	for i := range t.entries {
		t.entries[i] = -1
	}
	t.used = 0
}

// NgramMod drafts by self-speculation through a hashed table of the
// n-grams seen in every sequence that shares its Table (llama.cpp's
// ngram-mod, which --spec-default turns on): the last Table.N() tokens
// are looked up, the token that followed them is drafted, and the lookup
// goes on from the n-gram that ends with it, for up to NMax tokens. A
// draft shorter than NMin is dropped. Unlike NgramSimple it finds
// repeats across conversations, and its cost does not grow with the
// history: new n-grams are added in steps of 32 tokens.
//
// As in llama.cpp, the table is cleared when a new sequence finds it a
// quarter full, and when five drafts in a row have less than a quarter of
// their tokens accepted. A sequence begins with Begin, or with a Draft
// whose history is shorter than the last one's. One NgramMod drafts for
// one sequence at a time; its Draft never fails.
type NgramMod struct {
	// Table holds the n-grams (nil: a table of its own, of 24-token
	// n-grams, made at the first Draft).
	Table *NgramModTable
	// NMin is the fewest tokens of a draft (0: 48, llama.cpp's
	// --spec-ngram-mod-n-min default; negative: no fewest) and NMax the
	// most (0: 64, --spec-ngram-mod-n-max's; negative: none, so no
	// draft); both at most 1024. NMin above NMax drafts nothing.
	NMin, NMax int

	started  bool // its sequence's tokens went into the table
	iLast    int  // the n-grams starting before it are in the table
	nDraft   int  // tokens of the last draft
	nLow     int  // drafts in a row with little accepted
	lastSeen int  // the tokens before the last one at the last Draft: fewer next time is a new sequence
}

// Begin implements llama.DraftBeginner: the n-grams of prompt go into the
// table.
func (d *NgramMod) Begin(prompt []llama.Token) {
	if d.Table == nil {
		d.Table = NewNgramModTable(0)
	}
	t := d.Table
	t.mu.Lock()
	defer t.mu.Unlock()
	d.begin(prompt)
}

// begin is Begin with the table locked. A run of drafts with little
// accepted carries over, as in llama.cpp.
func (d *NgramMod) begin(prompt []llama.Token) {
	t := d.Table
	n := t.n
	d.started, d.iLast, d.nDraft, d.lastSeen = true, 0, 0, len(prompt)
	if len(prompt) < n {
		return
	}
	for i := 0; i < len(prompt)-n; i++ {
		t.add(prompt[i:])
	}
	d.iLast = len(prompt) - n
	if float64(t.used)/float64(len(t.entries)) > 0.25 {
		t.reset()
	}
}

func (d *NgramMod) sizes() (nMin, nMax int) {
	nMin, nMax = d.NMin, d.NMax
	switch {
	case nMin == 0:
		nMin = 48
	case nMin < 0:
		nMin = 0
	}
	switch {
	case nMax == 0:
		nMax = 64
	case nMax < 0:
		nMax = 0
	}
	return min(nMin, ngramSizeMax), min(nMax, ngramSizeMax)
}

// Draft implements llama.Drafter.
func (d *NgramMod) Draft(_ context.Context, history []llama.Token, max int) ([]llama.Token, error) {
	if d.Table == nil {
		d.Table = NewNgramModTable(0)
	}
	t := d.Table
	n := t.n
	d.nDraft = 0
	if len(history) == 0 || max <= 0 {
		return nil, nil
	}
	prompt, last := history[:len(history)-1], history[len(history)-1]
	t.mu.Lock()
	defer t.mu.Unlock()
	if !d.started || len(prompt) < d.lastSeen {
		d.begin(prompt) // a new sequence
	}
	d.lastSeen = len(prompt)
	if len(prompt) < n {
		return nil, nil
	}
	if d.iLast+32 < len(prompt) {
		for i := d.iLast; i < len(prompt)-n; i++ {
			t.add(prompt[i:])
		}
		d.iLast = len(prompt) - n
	}
	nMin, nMax := d.sizes()
	if nMax = min(nMax, max); nMax == 0 {
		return nil, nil
	}
	out := make([]llama.Token, n, n+nMax)
	copy(out, prompt[len(prompt)-n+1:])
	out[n-1] = last
	for i := 0; i < nMax; i++ {
		tok := t.entries[t.idx(out[i:])]
		if tok < 0 {
			if i < nMin {
				return nil, nil
			}
			break
		}
		out = append(out, tok)
	}
	if len(out) == n {
		return nil, nil
	}
	d.nDraft = len(out) - n
	return out[n:], nil
}

// Accepted implements llama.Drafter: five drafts in a row with less than a
// quarter of their tokens accepted clear the table.
func (d *NgramMod) Accepted(n int) {
	if d.nDraft <= 0 || d.Table == nil {
		return
	}
	if float64(n)/float64(d.nDraft) >= 0.25 {
		d.nLow = 0
		return
	}
	if d.nLow++; d.nLow >= 5 {
		d.Table.mu.Lock()
		d.Table.reset()
		d.Table.mu.Unlock()
		d.nLow, d.iLast = 0, 0
	}
}
