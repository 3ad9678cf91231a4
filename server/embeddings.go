package server

// Embeddings: llama.cpp's native POST /embedding(s) and OpenAI's
// POST /v1/embeddings.

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"strconv"

	"github.com/x/llama/engine"
	"github.com/x/llama/sampling"

	"github.com/x/llama"
)

// embeddingRequest is the body of both embedding endpoints. OpenAI's
// clients send "input"; llama.cpp's native form uses "content".
type embeddingRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	Content        json.RawMessage `json:"content"`
	EncodingFormat string          `json:"encoding_format"`
	// EmbdNormalize is the normalization (-1 none, 0 max-abs, 1 taxicab,
	// 2 Euclidean, >2 p-norm); default 2.
	EmbdNormalize *int `json:"embd_normalize"`
	// Dimensions keeps each vector's first values, normalized again
	// (OpenAI's "dimensions"); nil keeps them all.
	Dimensions *int `json:"dimensions"`
}

// nativeEmbedding is one result of /embedding: a pooled vector (as a list
// of one) or one vector per token when the server does not pool.
type nativeEmbedding struct {
	Index     int         `json:"index"`
	Embedding [][]float32 `json:"embedding"`
}

// oaiEmbeddingList is OpenAI's embeddings response.
type oaiEmbeddingList struct {
	Model  string         `json:"model"`
	Object string         `json:"object"`
	Usage  oaiEmbdUsage   `json:"usage"`
	Data   []oaiEmbedding `json:"data"`
}

type oaiEmbdUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

// oaiEmbedding holds the vector as a list of floats, or as base64 of its
// little-endian float32 bytes.
type oaiEmbedding struct {
	Embedding      any    `json:"embedding"`
	Index          int    `json:"index"`
	Object         string `json:"object"`
	EncodingFormat string `json:"encoding_format,omitempty"`
}

// serverPooling returns the pooling the server's embedding contexts use:
// the configured one, else the model's own (none when it has none).
func serverPooling(o engine.Options, m *llama.Model) llama.PoolingType {
	if p := o.Context.Pooling; p != llama.PoolingDefault {
		return p
	}
	if o.Reranking {
		return llama.PoolingRank
	}
	if arch, ok := m.MetaValue("general.architecture"); ok {
		if v, ok := m.MetaValue(arch + ".pooling_type"); ok {
			if n, err := strconv.Atoi(v); err == nil {
				switch n {
				case 1:
					return llama.PoolingMean
				case 2:
					return llama.PoolingCLS
				case 3:
					return llama.PoolingLast
				case 4:
					return llama.PoolingRank
				}
			}
		}
	}
	return llama.PoolingNone
}

// floatsBase64 encodes v as base64 of its little-endian float32 bytes.
func floatsBase64(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}

func embeddingsHandler(oaiRoute bool) func(s *Server) handlerFunc {
	return func(s *Server) handlerFunc {
		return func(w http.ResponseWriter, r *http.Request) error {
			oai := oaiRoute
			var req embeddingRequest
			inst, release, err := s.decodeAndAcquire(r, &req, &req.Model)
			if err != nil {
				return err
			}
			defer release()
			eo := inst.Opts.Engine
			if !eo.Embedding && !eo.Reranking {
				return notSupported("This server does not support embeddings. Start it with `--embeddings` (Options.Engine.Embedding)")
			}
			m := inst.Model
			pooling := serverPooling(eo, m)
			if oai && pooling == llama.PoolingNone {
				return badRequest("Pooling type 'none' is not OAI compatible. Please use a different pooling type")
			}
			input := req.Input
			if len(input) == 0 || string(input) == "null" {
				if len(req.Content) == 0 || string(req.Content) == "null" {
					return badRequest(`"input" or "content" must be provided`)
				}
				input, oai = req.Content, false // "content" is llama.cpp's own form
			}
			useBase64 := false
			switch req.EncodingFormat {
			case "", "float":
			case "base64":
				useBase64 = true
			default:
				return badRequest("The format to return the embeddings in. Can be either float or base64")
			}
			normalize := 2
			if inst.Opts.EmbdNormalize != nil {
				normalize = *inst.Opts.EmbdNormalize
			}
			if req.EmbdNormalize != nil {
				normalize = *req.EmbdNormalize
			}
			if err := checkDimensions(req.Dimensions); err != nil {
				return err
			}
			prompts, err := parseEmbdPrompts(input)
			if err != nil {
				return badRequest("%v", err)
			}
			if err := inst.checkTaskCount(len(prompts), "inputs"); err != nil {
				return err
			}
			tasks := make([]*engine.Request, len(prompts))
			for i, p := range prompts {
				if err := inst.checkEncoderText(p.texts()...); err != nil {
					return err
				}
				if !stillWanted(r.Context()) {
					return nil
				}
				toks, err := p.tokenize(m, true, true)
				if err != nil {
					return badRequest("%v", err)
				}
				if len(toks) == 0 {
					return badRequest("Input content cannot be empty")
				}
				if err := checkEncoderInput(len(toks), eo); err != nil {
					return err
				}
				tasks[i] = embeddingTask(toks, normalize, pooling == llama.PoolingNone)
			}
			results, err := submitAll(r, inst.embedder(), tasks)
			if err != nil {
				return err
			}
			for _, ev := range results {
				if err := truncateEmbeddings(ev.Embedding, req.Dimensions, normalize); err != nil {
					return err
				}
			}
			if !oai {
				out := make([]nativeEmbedding, len(results))
				for i, ev := range results {
					out[i] = nativeEmbedding{Index: i, Embedding: ev.Embedding}
				}
				writeJSON(w, http.StatusOK, out)
				return nil
			}
			resp := oaiEmbeddingList{Model: req.Model, Object: "list", Data: make([]oaiEmbedding, len(results))}
			if resp.Model == "" {
				resp.Model = inst.Name
			}
			for i, ev := range results {
				var vec []float32
				if len(ev.Embedding) > 0 {
					vec = ev.Embedding[0]
				}
				d := oaiEmbedding{Index: i, Object: "embedding", Embedding: vec}
				if vec == nil {
					d.Embedding = []float32{}
				}
				if useBase64 {
					d.Embedding, d.EncodingFormat = floatsBase64(vec), "base64"
				}
				resp.Data[i] = d
				resp.Usage.PromptTokens += len(tasks[i].Prompt)
			}
			resp.Usage.TotalTokens = resp.Usage.PromptTokens
			writeJSON(w, http.StatusOK, resp)
			return nil
		}
	}
}

// submitAll queues every task before reading any result, so that the
// engine can batch them together, and returns each task's last event (an
// embedding or rerank task sends only that one). On a failure the tasks end
// with the request's context.
func submitAll(r *http.Request, e engineAPI, tasks []*engine.Request) ([]engine.Event, error) {
	st, err := e.Submit(r.Context(), tasks...)
	if err != nil {
		return nil, err
	}
	res, err := collect(r.Context(), nil, st, len(tasks))
	if err != nil {
		return nil, err
	}
	out := make([]engine.Event, len(res))
	for i, r := range res {
		out[i] = r.Final
	}
	return out, nil
}

// embeddingTask is the engine request of one embedding input, normalized
// as normalize says (2: Euclidean, -1: none), a vector per token when
// perToken.
func embeddingTask(toks []llama.Token, normalize int, perToken bool) *engine.Request {
	return &engine.Request{Kind: engine.KindEmbedding, Prompt: toks, Params: sampling.Defaults(),
		NKeep: -1, SlotID: -1, Normalize: normalize, PerToken: perToken}
}

// encoderLimit is the most tokens an encoder input may have: one
// physical batch.
func encoderLimit(o engine.Options) int {
	ub := o.Context.UBatchSize
	if ub <= 0 {
		ub = 512
	}
	if b := o.Context.BatchSize; b > 0 && b < ub {
		ub = b
	}
	return ub
}

// checkEncoderInput refuses a prompt that cannot be computed in one
// physical batch, as llama.cpp does for embeddings and reranking (their
// tokens must all be in one ubatch).
func checkEncoderInput(n int, o engine.Options) error {
	if ub := encoderLimit(o); n > ub {
		return badRequest("input (%d tokens) is too large to process. increase the physical batch size (current batch size: %d)", n, ub)
	}
	return nil
}

// maxDimensions bounds a request's "dimensions" before any model is asked
// (the widest embedding models have a few thousand).
const maxDimensions = 1 << 16

// checkDimensions checks a request's "dimensions", if any, before the
// inputs are embedded.
func checkDimensions(dims *int) error {
	if dims != nil && (*dims < 1 || *dims > maxDimensions) {
		return badRequest(`"dimensions" must be between 1 and %d, got %d`, maxDimensions, *dims)
	}
	return nil
}

// truncateEmbeddings keeps each vector's first *dims values, in place,
// and normalizes them again as normalize says (-1: not at all), as
// OpenAI's and Ollama's "dimensions" shorten an embedding; nil dims keeps
// them whole. Every normalization here scales the whole vector by one
// factor, so normalizing the normalized prefix gives what normalizing the
// raw prefix would. The result suits models trained for it (Matryoshka
// embeddings); others lose more of their meaning. A dims past the model's
// size is an error naming the size.
func truncateEmbeddings(vecs [][]float32, dims *int, normalize int) error {
	if dims == nil {
		return nil
	}
	for i, v := range vecs {
		if *dims > len(v) {
			return badRequest(`"dimensions" must be at most %d for this model, got %d`, len(v), *dims)
		}
		vecs[i] = llama.Normalize(v[:*dims:*dims], normalize)
	}
	return nil
}
