package server

// POST /tokenize and POST /detokenize: the model's tokenizer, as
// llama-server serves it.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/x/llama"
)

type tokenizeRequest struct {
	Model        string          `json:"model"`
	Content      json.RawMessage `json:"content"`
	AddSpecial   bool            `json:"add_special"`
	ParseSpecial *bool           `json:"parse_special"`
	WithPieces   bool            `json:"with_pieces"`
}

type tokenPiece struct {
	ID    llama.Token `json:"id"`
	Piece any         `json:"piece"`
}

// tokenizeMixed tokenizes a string, or an array mixing strings and token
// ids (ids are checked against the vocabulary).
func tokenizeMixed(m *llama.Model, raw json.RawMessage, addSpecial, parseSpecial bool) ([]llama.Token, error) {
	opts := llama.TokenizeOptions{AddSpecial: addSpecial, ParseSpecial: parseSpecial}
	var text string
	if err := json.Unmarshal(raw, &text); err == nil {
		return tokenizeText(m, text, opts)
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, errors.New(`"content" must be a string or an array of strings and token ids`)
	}
	var out []llama.Token
	for i, p := range parts {
		var s string
		if err := json.Unmarshal(p, &s); err == nil {
			o := opts
			o.AddSpecial = addSpecial && i == 0
			toks, err := tokenizeText(m, s, o)
			if err != nil {
				return nil, err
			}
			out = append(out, toks...)
			continue
		}
		var id int64
		if err := json.Unmarshal(p, &id); err != nil {
			return nil, fmt.Errorf(`"content"[%d] must be a string or a token id`, i)
		}
		if id < 0 || id >= int64(m.VocabSize()) {
			return nil, fmt.Errorf("token id %d out of range [0, %d)", id, m.VocabSize())
		}
		out = append(out, llama.Token(id))
	}
	return out, nil
}

func handleTokenize(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var req tokenizeRequest
		inst, release, err := s.decodeAndAcquire(r, &req, &req.Model)
		if err != nil {
			return err
		}
		defer release()
		if len(req.Content) == 0 || string(req.Content) == "null" {
			writeJSON(w, http.StatusOK, tokenized[llama.Token]{Tokens: []llama.Token{}})
			return nil
		}
		if err := checkTokenizeContent(req.Content); err != nil {
			return err
		}
		parse := req.ParseSpecial == nil || *req.ParseSpecial
		toks, err := tokenizeMixed(inst.Model, req.Content, req.AddSpecial, parse)
		if err != nil {
			return badRequest("%v", err)
		}
		if req.WithPieces && len(toks) > maxTokenizePieces {
			return tooLarge("the content has %d tokens; /tokenize answers at most %d with pieces", len(toks), maxTokenizePieces)
		}
		if !req.WithPieces {
			if toks == nil {
				toks = []llama.Token{}
			}
			writeJSON(w, http.StatusOK, tokenized[llama.Token]{Tokens: toks})
			return nil
		}
		out := make([]tokenPiece, len(toks))
		for i, t := range toks {
			piece, err := inst.Model.TokenPiece(t, true)
			if err != nil {
				return err
			}
			out[i] = tokenPiece{ID: t, Piece: piece}
			if !utf8.ValidString(piece) {
				b := make([]int, len(piece))
				for j := 0; j < len(piece); j++ {
					b[j] = int(piece[j])
				}
				out[i].Piece = b
			}
		}
		writeJSON(w, http.StatusOK, tokenized[tokenPiece]{Tokens: out})
		return nil
	}
}

type detokenizeRequest struct {
	Model  string  `json:"model"`
	Tokens []int64 `json:"tokens"`
}

func handleDetokenize(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var req detokenizeRequest
		inst, release, err := s.decodeAndAcquire(r, &req, &req.Model)
		if err != nil {
			return err
		}
		defer release()
		if len(req.Tokens) > maxDetokenizeTokens {
			return tooLarge(`"tokens" has %d entries; /detokenize takes at most %d`, len(req.Tokens), maxDetokenizeTokens)
		}
		n := int64(inst.Model.VocabSize())
		toks := make([]llama.Token, len(req.Tokens))
		for i, t := range req.Tokens {
			if t < 0 || t >= n {
				return badRequest("token id %d at index %d out of range [0, %d)", t, i, n)
			}
			toks[i] = llama.Token(t)
		}
		// As llama-server: each token's piece, special tokens rendered as
		// their text, joined (no leading-space or BOS handling of a full
		// detokenization).
		var text strings.Builder
		for _, t := range toks {
			piece, err := inst.Model.TokenPiece(t, true)
			if err != nil {
				return err
			}
			if text.Len()+len(piece) > maxDetokenizeBytes {
				return tooLarge("the tokens' text passes %d bytes; /detokenize answers at most that", maxDetokenizeBytes)
			}
			text.WriteString(piece)
		}
		writeJSON(w, http.StatusOK, map[string]string{"content": text.String()})
		return nil
	}
}

// tokenized is the answer of /tokenize: token ids, or pieces.
type tokenized[T any] struct {
	Tokens []T `json:"tokens"`
}
