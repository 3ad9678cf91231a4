// Package draft has llama.cpp's drafters for speculative generation: each
// is a llama.Drafter, to put in llama.Speculative.Drafters (or to ask in a
// loop of one's own, wrapped in a llama.AdaptiveDrafter).
//
//   - Model drafts with a small model of the target's vocabulary, through
//     a llama.Context of its own (llama.cpp's --model-draft).
//   - NgramSimple and NgramMap draft by self-speculation: they find the last
//     few tokens earlier in the text and propose what followed them there
//     (--spec-type ngram-simple, ngram-map-k, ngram-map-k4v).
//   - NgramMod drafts from a hashed table of the n-grams seen, shared by
//     the sequences that draft from it (ngram-mod, --spec-default).
//   - NgramCache drafts from n-gram statistics of the text so far and of
//     llama.cpp's lookup files, read and written as NgramStats
//     (--lookup-cache-static, --lookup-cache-dynamic).
//
// Drafts change only the speed of a generation, never its output. A
// drafter serves one generation at a time; none is safe for concurrent use
// (NgramModTable is). NgramMap and NgramMod keep what they learned from one
// sequence to the next, as llama-server's slots do (llama.DraftBeginner).
package draft
