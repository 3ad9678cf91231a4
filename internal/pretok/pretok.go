// Package pretok holds what the llama and mtmd packages do to text before
// llama.cpp's tokenizer sees it.
package pretok

import "unicode"

// MaxRun is the longest run of characters without white space that a BPE
// vocabulary's pre-tokenizer is handed in one piece. llama.cpp splits BPE
// text with std::regex, which recurses once per character of a match: a
// run of about 25,000 characters overflows the thread's stack and kills
// the process.
const MaxRun = 2048

// CutLongRuns cuts s inside every run of more than n characters without
// white space, so that no piece holds such a run; other text is not cut.
func CutLongRuns(s string, n int) []string {
	var pieces []string
	start, run := 0, 0
	for i, r := range s {
		if unicode.IsSpace(r) {
			run = 0
			continue
		}
		run++
		if run > n {
			pieces = append(pieces, s[start:i])
			start, run = i, 1
		}
	}
	return append(pieces, s[start:])
}
