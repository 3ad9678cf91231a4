package engine

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
)

func TestSlotStateTokens(t *testing.T) {
	toks := []llama.Token{1, 450, 7483, 13}
	packed := packSlotTokens(toks)
	assert.Equal(t, []llama.Token{llama.NoToken, 1, 4, 1, 450, 7483, 13, 0}, packed, "llama-server's packed layout")
	for _, tc := range []struct {
		name string
		in   []llama.Token
		want []llama.Token
		bad  bool
	}{
		{"packed", packed, toks, false},
		{"legacy plain list", toks, toks, false},
		{"empty packed", packSlotTokens(nil), []llama.Token{}, false},
		{"wrong version", []llama.Token{llama.NoToken, 2, 0, 0}, nil, true},
		{"truncated", []llama.Token{llama.NoToken, 1, 9, 5, 0}, nil, true},
		{"media chunks", []llama.Token{llama.NoToken, 1, 1, 5, 1}, nil, true},
		{"trailing data", append(packSlotTokens(toks), 7), nil, true},
		{"marker only", []llama.Token{llama.NoToken}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := unpackSlotTokens(tc.in)
			if tc.bad {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
