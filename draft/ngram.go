package draft

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"slices"

	"github.com/x/llama"
)

// NgramSimple drafts by self-speculation: it looks for the last SizeN
// tokens earlier in the sequence and proposes the tokens that followed
// them there (llama.cpp's ngram-simple). It suits output that repeats its
// input, such as rewriting a given text with small edits.
//
// Its Draft returns no tokens, and never fails, for any history (too short
// ones included) and any max; the work of one Draft is proportional to the
// history's length times SizeN.
type NgramSimple struct {
	// SizeN is the length of the n-gram looked up (default 12, llama.cpp's
	// --spec-ngram-simple-size-n; at most 1024, llama.cpp's bound: larger
	// values count as 1024).
	SizeN int
	// SizeM is the most tokens drafted (default 48, --spec-ngram-simple-size-m;
	// at most 1024 likewise).
	SizeM int
}

// ngramSizeMax is the largest n-gram and draft size of NgramSimple and
// NgramMap, llama.cpp's bound for --spec-ngram-*-size-n and -m: it keeps
// the keys NgramMap remembers, and the drafts, small.
const ngramSizeMax = 1024

// ngramSizes applies the defaults (n <= 0: 12, m <= 0: 48) and the bound.
func ngramSizes(n, m int) (int, int) {
	if n <= 0 {
		n = 12
	}
	if m <= 0 {
		m = 48
	}
	return min(n, ngramSizeMax), min(m, ngramSizeMax)
}

// Draft implements llama.Drafter.
func (s *NgramSimple) Draft(_ context.Context, history []llama.Token, max int) ([]llama.Token, error) {
	n, m := ngramSizes(s.SizeN, s.SizeM)
	// The sequence before the last token must hold the key, the m tokens
	// after an earlier occurrence of it, and more (llama.cpp asks for more
	// than n+m+1 tokens); sizes are at most ngramSizeMax, so the sum
	// cannot overflow.
	cur := len(history) - 1
	if max <= 0 || cur <= n+m+1 {
		return nil, nil
	}
	toks, key := history[:cur], history[len(history)-n:]
	// The most recent earlier occurrence of the key, skipping the current one.
	at := 0
	for j := cur - n - 1; j > 0; j-- {
		if slices.Equal(toks[j:j+n], key) {
			at = j
			break
		}
	}
	if at == 0 {
		return nil, nil
	}
	count := min(m, cur-(at+n))
	if count < n {
		return nil, nil
	}
	return slices.Clone(toks[at+n : at+n+min(count, max)]), nil
}

// Accepted implements llama.Drafter.
func (s *NgramSimple) Accepted(int) {}

// The n-gram sizes of an NgramCache (llama.cpp's LLAMA_NGRAM_MIN/MAX) and
// of its static statistics (LLAMA_NGRAM_STATIC).
const (
	ngramMin    = 1
	ngramMax    = 4
	ngramStatic = 2
)

// ngram is up to ngramMax tokens, llama.NoToken-padded.
type ngram [ngramMax]llama.Token

// NgramStats maps n-grams of 1 to 4 tokens to how often each token followed
// them: llama.cpp's n-gram cache, as read and written by its lookup tools
// (llama-lookup-create, --lookup-cache-static/-dynamic). It is not safe for
// concurrent use.
type NgramStats struct {
	m map[ngram]map[llama.Token]int32
}

// NewNgramStats returns empty statistics.
func NewNgramStats() *NgramStats { return &NgramStats{m: map[ngram]map[llama.Token]int32{}} }

// Len returns the number of n-grams.
func (s *NgramStats) Len() int { return len(s.m) }

// Update counts the n-grams of sizes nmin to nmax (1 to 4) ending before
// each of the last nnew tokens of tokens. Counting a text that grows by
// appending, nnew is what was appended since the last call.
func (s *NgramStats) Update(tokens []llama.Token, nmin, nmax, nnew int) {
	nmin, nmax = max(nmin, 1), min(nmax, ngramMax)
	for size := nmin; size <= nmax; size++ {
		for i := max(len(tokens)-nnew, size); i < len(tokens); i++ {
			var g ngram
			for j := range g {
				g[j] = llama.NoToken
			}
			copy(g[:], tokens[i-size:i])
			s.add(g, tokens[i], 1)
		}
	}
}

func (s *NgramStats) add(g ngram, t llama.Token, n int32) {
	part := s.m[g]
	if part == nil {
		part = map[llama.Token]int32{}
		s.m[g] = part
	}
	part[t] += n
}

// Merge adds the counts of o.
func (s *NgramStats) Merge(o *NgramStats) {
	for g, part := range o.m {
		for t, n := range part {
			s.add(g, t, n)
		}
	}
}

// Save writes the statistics in llama.cpp's lookup cache format.
func (s *NgramStats) Save(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return errorf(llama.CodeUnknown, "ngram cache", "%v", err)
	}
	w := bufio.NewWriter(f)
	var buf []byte
	for g, part := range s.m {
		buf = buf[:0]
		for _, t := range g {
			buf = binary.LittleEndian.AppendUint32(buf, uint32(t))
		}
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(part)))
		for t, n := range part {
			buf = binary.LittleEndian.AppendUint32(buf, uint32(t))
			buf = binary.LittleEndian.AppendUint32(buf, uint32(n))
		}
		if _, err := w.Write(buf); err != nil {
			f.Close()
			return errorf(llama.CodeUnknown, "ngram cache", "%v", err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return errorf(llama.CodeUnknown, "ngram cache", "%v", err)
	}
	if err := f.Close(); err != nil {
		return errorf(llama.CodeUnknown, "ngram cache", "%v", err)
	}
	return nil
}

// LoadNgramStats reads statistics written by Save or by llama.cpp's lookup
// tools. A malformed file is an error (llama.cpp aborts on one).
func LoadNgramStats(path string) (*NgramStats, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, errorf(llama.CodeLoad, "ngram cache", "%v", err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	s := NewNgramStats()
	var rec [4*ngramMax + 4]byte
	var pair [8]byte
	for {
		if _, err := io.ReadFull(r, rec[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return s, nil
			}
			return nil, errorf(llama.CodeLoad, "ngram cache", "%s: truncated n-gram record", path)
		}
		var g ngram
		for i := range g {
			g[i] = llama.Token(int32(binary.LittleEndian.Uint32(rec[4*i:])))
		}
		n := int32(binary.LittleEndian.Uint32(rec[4*ngramMax:]))
		if n <= 0 {
			return nil, errorf(llama.CodeLoad, "ngram cache", "%s: n-gram with %d tokens", path, n)
		}
		for range n {
			if _, err := io.ReadFull(r, pair[:]); err != nil {
				return nil, errorf(llama.CodeLoad, "ngram cache", "%s: truncated token counts", path)
			}
			t := llama.Token(int32(binary.LittleEndian.Uint32(pair[:])))
			c := int32(binary.LittleEndian.Uint32(pair[4:]))
			if c <= 0 {
				return nil, errorf(llama.CodeLoad, "ngram cache", "%s: count %d", path, c)
			}
			s.add(g, t, c)
		}
	}
}

// NgramCache drafts from n-gram statistics (llama.cpp's ngram-cache): those
// of the sequence so far, then Dynamic (statistics of earlier generations),
// each checked against Static (statistics of a large corpus).
type NgramCache struct {
	// Static and Dynamic are optional statistics loaded with LoadNgramStats.
	Static, Dynamic *NgramStats
	// NDraft is the most tokens drafted (default 8, as llama.cpp; at most
	// 1024: a repetitive text's statistics could otherwise extend a draft
	// without end).
	NDraft int

	context *NgramStats
	counted []llama.Token // the tokens context counts, in order
}

// Context returns the statistics of the sequence so far, to merge into the
// dynamic statistics after a generation and save them.
func (c *NgramCache) Context() *NgramStats {
	if c.context == nil {
		c.context = NewNgramStats()
	}
	return c.context
}

// Thresholds under which a draft stops: lax for the sequence's own
// statistics, strict for the dynamic ones, by n-gram size.
var (
	ngramMinSamplesLax    = [ngramMax]int32{2, 2, 1, 1}
	ngramMinPercentLax    = [ngramMax]int32{66, 50, 50, 50}
	ngramMinSamplesStrict = [ngramMax]int32{4, 3, 2, 2}
	ngramMinPercentStrict = [ngramMax]int32{75, 66, 66, 66}
)

// Draft implements llama.Drafter.
func (c *NgramCache) Draft(_ context.Context, history []llama.Token, max int) ([]llama.Token, error) {
	ctxStats := c.Context()
	// Count what was appended; a sequence that changed is counted anew.
	if k := commonPrefix(c.counted, history); k < len(c.counted) {
		c.context = NewNgramStats()
		ctxStats, c.counted = c.context, c.counted[:0]
	}
	if n := len(history) - len(c.counted); n > 0 {
		ctxStats.Update(history, ngramMin, ngramMax, n)
		c.counted = append(c.counted, history[len(c.counted):]...)
	}
	nDraft := c.NDraft
	if nDraft <= 0 {
		nDraft = 8
	}
	nDraft = min(nDraft, max, ngramSizeMax)
	if nDraft <= 0 || len(history) < ngramStatic {
		return nil, nil
	}
	static, dynamic := c.Static, c.Dynamic
	if static == nil {
		static = NewNgramStats()
	}
	if dynamic == nil {
		dynamic = NewNgramStats()
	}
	seq := slices.Clone(history) // history and the draft so far
	var out []llama.Token
	for len(out) < nDraft {
		var gs ngram
		for i := range gs {
			gs[i] = llama.NoToken
		}
		copy(gs[:], seq[len(seq)-ngramStatic:])
		partStatic := static.m[gs]
		var grams []ngram
		for size := ngramMin; size <= ngramMax; size++ {
			var g ngram
			for i := range g {
				g[i] = llama.NoToken
			}
			if size <= len(seq) {
				copy(g[:], seq[len(seq)-size:])
			}
			grams = append(grams, g)
		}
		t := tryDraft(ctxStats, grams, partStatic, &ngramMinSamplesLax, &ngramMinPercentLax)
		if t == llama.NoToken {
			t = tryDraft(dynamic, grams, partStatic, &ngramMinSamplesStrict, &ngramMinPercentStrict)
		}
		if t == llama.NoToken {
			t = tryDraftStatic(partStatic)
		}
		if t == llama.NoToken {
			break
		}
		out = append(out, t)
		seq = append(seq, t)
	}
	return out, nil
}

// tryDraft picks the most frequent follower of the longest n-gram whose
// statistics are conclusive, weighing counts by the static statistics.
func tryDraft(primary *NgramStats, grams []ngram, partStatic map[llama.Token]int32, minSamples, minPercent *[ngramMax]int32) llama.Token {
	for i := len(grams) - 1; i >= 0; i-- {
		part := primary.m[grams[i]]
		if part == nil {
			continue
		}
		best, bestPrimary, bestStatic, sum := llama.NoToken, int32(0), int32(0), int32(0)
		for _, t := range sortedTokens(part) {
			cp := part[t]
			cs := int32(1)
			if n, ok := partStatic[t]; ok {
				cs = 100 * n
			}
			if int64(cp)*int64(cs) > int64(bestPrimary)*int64(bestStatic) {
				best, bestPrimary, bestStatic = t, cp, cs
			}
			sum += cp
		}
		if sum < minSamples[i] || 100*bestPrimary < minPercent[i]*sum {
			continue
		}
		return best
	}
	return llama.NoToken
}

func tryDraftStatic(part map[llama.Token]int32) llama.Token {
	best, bestN, sum := llama.NoToken, int32(0), int32(0)
	for _, t := range sortedTokens(part) {
		if n := part[t]; n > bestN {
			best, bestN = t, n
		}
		sum += part[t]
	}
	if sum < ngramMinSamplesLax[ngramStatic-1] || 100*bestN < ngramMinPercentLax[ngramStatic-1]*sum {
		return llama.NoToken
	}
	return best
}

// sortedTokens orders a part's tokens so that ties break the same way on
// every run (llama.cpp breaks them by its hash map's order).
func sortedTokens(part map[llama.Token]int32) []llama.Token {
	ts := make([]llama.Token, 0, len(part))
	for t := range part {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	return ts
}

// Accepted implements llama.Drafter.
func (c *NgramCache) Accepted(int) {}
