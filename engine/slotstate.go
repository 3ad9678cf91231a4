package engine

import (
	"errors"

	"github.com/x/llama"
)

// slotStateVersion is the version of llama-server's packed token list in
// slot files.
const slotStateVersion = 1

// packSlotTokens returns the token list a slot file stores, in
// llama-server's packed form: a NoToken marker, the version, the token
// count and the tokens, then the count of media chunks (none here).
func packSlotTokens(toks []llama.Token) []llama.Token {
	out := make([]llama.Token, 0, len(toks)+4)
	out = append(out, llama.NoToken, slotStateVersion, llama.Token(len(toks)))
	out = append(out, toks...)
	return append(out, 0)
}

// unpackSlotTokens reads a slot file's token list: the packed form, or a
// plain token list as older llama-server versions wrote.
func unpackSlotTokens(packed []llama.Token) ([]llama.Token, error) {
	if len(packed) == 0 || packed[0] != llama.NoToken {
		return packed, nil
	}
	if len(packed) < 4 || packed[1] != slotStateVersion {
		return nil, errors.New("engine: unsupported slot file token state")
	}
	n := int(uint32(packed[2]))
	if n > len(packed)-4 {
		return nil, errors.New("engine: truncated slot file token state")
	}
	if packed[3+n] != 0 {
		return nil, errors.New("engine: slot file holds media chunks, which need a multimodal projector")
	}
	if len(packed) != n+4 {
		return nil, errors.New("engine: trailing data in slot file token state")
	}
	return packed[3 : 3+n], nil
}
