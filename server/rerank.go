package server

// Reranking: POST /rerank (Jina's shape, or TEI's when "texts" is given).

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"

	"github.com/x/llama/engine"
	"github.com/x/llama/sampling"

	"github.com/x/llama"
)

// rerankRequest is the body of /rerank. Documents (Jina) or Texts (TEI)
// are scored against Query.
type rerankRequest struct {
	Model     string          `json:"model"`
	Query     json.RawMessage `json:"query"`
	Documents json.RawMessage `json:"documents"`
	Texts     json.RawMessage `json:"texts"`
	TopN      *int            `json:"top_n"`
	// ReturnText adds each document's text to its result.
	ReturnText bool `json:"return_text"`
	// ReturnDocuments is Jina's name for ReturnText.
	ReturnDocuments bool `json:"return_documents"`
}

// rerankResult is one scored document in Jina's shape.
type rerankResult struct {
	Index          int             `json:"index"`
	RelevanceScore float64         `json:"relevance_score"`
	Document       *rerankDocument `json:"document,omitempty"`
}

type rerankDocument struct {
	Text string `json:"text"`
}

// teiRerankResult is one scored text in TEI's shape.
type teiRerankResult struct {
	Index int     `json:"index"`
	Score float64 `json:"score"`
	Text  *string `json:"text,omitempty"`
}

// rerankResponse is Jina's response.
type rerankResponse struct {
	Model   string         `json:"model"`
	Object  string         `json:"object"`
	Usage   oaiEmbdUsage   `json:"usage"`
	Results []rerankResult `json:"results"`
}

// rerankPrompt builds the tokens scoring doc against query as llama.cpp's
// format_prompt_rerank: the model's "rerank" template with {query} and
// {document} filled in, or BOS query EOS SEP document EOS (each special
// token only where the vocabulary asks for it; SEP stands in for a missing
// EOS).
func rerankPrompt(m *llama.Model, query, doc string) ([]llama.Token, error) {
	if tmpl, ok := m.ChatTemplate("rerank"); ok && tmpl != "" {
		p := strings.NewReplacer("{query}", query, "{document}", doc).Replace(tmpl)
		return tokenizeText(m, p, llama.TokenizeOptions{ParseSpecial: true})
	}
	q, err := tokenizeText(m, query, llama.TokenizeOptions{})
	if err != nil {
		return nil, err
	}
	d, err := tokenizeText(m, doc, llama.TokenizeOptions{})
	if err != nil {
		return nil, err
	}
	sp := m.SpecialTokens()
	eos := sp.EOS
	if eos == llama.NoToken {
		eos = sp.SEP
	}
	var out []llama.Token
	if sp.AddBOS && sp.BOS != llama.NoToken {
		out = append(out, sp.BOS)
	}
	out = append(out, q...)
	if sp.AddEOS && eos != llama.NoToken {
		out = append(out, eos)
	}
	if sp.AddSEP && sp.SEP != llama.NoToken {
		out = append(out, sp.SEP)
	}
	out = append(out, d...)
	if sp.AddEOS && eos != llama.NoToken {
		out = append(out, eos)
	}
	return out, nil
}

func handleRerank(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var req rerankRequest
		inst, release, err := s.decodeAndAcquire(r, &req, &req.Model)
		if err != nil {
			return err
		}
		defer release()
		if !inst.Opts.Engine.Reranking {
			return notSupported("This server does not support reranking. Start it with `--reranking` (Options.Engine.Reranking)")
		}
		var query string
		if len(req.Query) == 0 || string(req.Query) == "null" {
			return badRequest(`"query" must be provided`)
		}
		if err := json.Unmarshal(req.Query, &query); err != nil {
			return badRequest(`"query" must be a string`)
		}
		tei := len(req.Texts) > 0
		rawDocs := req.Documents
		if len(rawDocs) == 0 || string(rawDocs) == "null" {
			rawDocs = req.Texts
		}
		var docs []string
		if len(rawDocs) > 0 {
			if err := json.Unmarshal(rawDocs, &docs); err != nil {
				docs = nil
			}
		}
		if len(docs) == 0 {
			return badRequest(`"documents" must be a non-empty string array`)
		}
		topN := len(docs)
		if req.TopN != nil {
			topN = min(max(*req.TopN, 0), len(docs))
		}

		if err := inst.checkTaskCount(len(docs), "documents"); err != nil {
			return err
		}
		tasks := make([]*engine.Request, len(docs))
		for i, d := range docs {
			if err := inst.checkEncoderText(query, d); err != nil {
				return err
			}
			if !stillWanted(r.Context()) {
				return nil
			}
			toks, err := rerankPrompt(inst.Model, query, d)
			if err != nil {
				return badRequest("%v", err)
			}
			if len(toks) == 0 {
				return badRequest("Input content cannot be empty")
			}
			if err := checkEncoderInput(len(toks), inst.Opts.Engine); err != nil {
				return err
			}
			tasks[i] = &engine.Request{Kind: engine.KindRerank, Prompt: toks, Params: sampling.Defaults(),
				NKeep: -1, SlotID: -1, Normalize: -1}
		}
		results, err := submitAll(r, inst.embedder(), tasks)
		if err != nil {
			return err
		}
		scores := make([]float64, len(tasks))
		nTokens := 0
		for i, ev := range results {
			scores[i] = float64(ev.Score)
			nTokens += len(tasks[i].Prompt)
		}
		order := make([]int, len(docs))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return scores[order[a]] > scores[order[b]] })
		order = order[:topN]

		withText := req.ReturnText || req.ReturnDocuments
		if tei {
			out := make([]teiRerankResult, len(order))
			for k, i := range order {
				out[k] = teiRerankResult{Index: i, Score: scores[i]}
				if withText {
					out[k].Text = &docs[i]
				}
			}
			writeJSON(w, http.StatusOK, out)
			return nil
		}
		resp := rerankResponse{Model: req.Model, Object: "list", Results: make([]rerankResult, len(order)),
			Usage: oaiEmbdUsage{PromptTokens: nTokens, TotalTokens: nTokens}}
		if resp.Model == "" {
			resp.Model = inst.Name
		}
		for k, i := range order {
			resp.Results[k] = rerankResult{Index: i, RelevanceScore: scores[i]}
			if withText {
				resp.Results[k].Document = &rerankDocument{Text: docs[i]}
			}
		}
		writeJSON(w, http.StatusOK, resp)
		return nil
	}
}
