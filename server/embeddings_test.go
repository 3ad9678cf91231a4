package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/x/llama/engine"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
)

// writeTinyBert writes a random-weight bert model with the bge vocabulary
// (a reranker when classifier > 0) and returns its path.
func writeTinyBert(t testing.TB, classifier, pooling int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bert.gguf")
	require.NoError(t, gguf.WriteTinyModel(path, gguf.TinyModelOptions{
		Arch: "bert", VocabFrom: testenv.Model(t, "vocab/ggml-vocab-bert-bge.gguf"),
		NEmbd: 32, NLayer: 2, NHead: 2, NFF: 64, NCtx: 512, Seed: 7,
		Classifier: classifier, PoolingType: pooling,
	}))
	return path
}

// xPost posts body as JSON and decodes the answer into out (when not
// nil), returning the status.
func xPost(t *testing.T, url string, body any, out any) int {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	return decodeAnswer(t, resp, err, out)
}

// xGet gets url and decodes the JSON answer into out, returning the status.
func xGet(t *testing.T, url string, out any) int {
	t.Helper()
	resp, err := http.Get(url)
	return decodeAnswer(t, resp, err, out)
}

// xEvent is one Server-Sent Event.
type xEvent struct {
	Name string
	Data string
}

// xSSE posts body and reads the whole event stream.
func xSSE(t *testing.T, url string, body any) []xEvent {
	t.Helper()
	var out []xEvent
	var cur xEvent
	sseLines(t, url, body, func(line string) {
		switch {
		case line == "":
			if cur.Data != "" || cur.Name != "" {
				out = append(out, cur)
			}
			cur = xEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.Name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.Data = strings.TrimPrefix(line, "data: ")
		}
	})
	return out
}

// xStream posts body and decodes each event's data as a JSON object
// (a "[DONE]" data ends the list).
func xStream(t *testing.T, url string, body any) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, e := range xSSE(t, url, body) {
		if e.Data == "[DONE]" {
			break
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(e.Data), &m), e.Data)
		out = append(out, m)
	}
	return out
}

// directEmbedding computes what the server should answer for text on its
// own context: the pooled vector or one vector per token.
func directEmbedding(t *testing.T, path string, pooling llama.PoolingType, text string, normalize int) [][]float32 {
	t.Helper()
	m, err := llama.LoadModel(context.Background(), path, llama.ModelOptions{})
	require.NoError(t, err)
	defer m.Close()
	c, err := m.NewContext(llama.ContextOptions{ContextSize: 512, Embeddings: true, Pooling: pooling, Threads: 1})
	require.NoError(t, err)
	toks, err := m.Tokenize(text, llama.TokenizeOptions{AddSpecial: true, ParseSpecial: true})
	require.NoError(t, err)
	b := llama.NewBatch(len(toks), 1)
	for i, tk := range toks {
		require.NoError(t, b.Add(tk, i, 0, true))
	}
	require.NoError(t, c.Encode(context.Background(), b))
	if pooling == llama.PoolingNone {
		var out [][]float32
		for i := range toks {
			e, err := c.Embeddings(i)
			require.NoError(t, err)
			out = append(out, append([]float32(nil), e...))
		}
		return out
	}
	e, err := c.SeqEmbeddings(0)
	require.NoError(t, err)
	return [][]float32{llama.Normalize(append([]float32(nil), e...), normalize)}
}

func norm2(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func embeddingServer(t *testing.T, path string, pooling llama.PoolingType) string {
	_, hs := newTestServer(t, Options{Model: path, Engine: engine.Options{
		Embedding: true, Context: llama.ContextOptions{Pooling: pooling, ContextSize: 1024, BatchSize: 512, UBatchSize: 512, Threads: 1}, Parallel: 2,
	}})
	return hs.URL
}

func TestEmbeddingsOpenAI(t *testing.T) {
	path := writeTinyBert(t, 0, gguf.PoolingCLS)
	url := embeddingServer(t, path, llama.PoolingDefault)
	const text = "I believe the meaning of life is"
	want := directEmbedding(t, path, llama.PoolingCLS, text, 2)[0]

	var one oaiEmbeddingList
	require.Equal(t, http.StatusOK, xPost(t, url+"/v1/embeddings", map[string]any{"input": text}, &one))
	require.Len(t, one.Data, 1)
	got := toFloats(t, one.Data[0].Embedding)
	require.Len(t, got, 32)
	assert.InDelta(t, 1, norm2(got), 1e-4, "normalized by default")
	assert.InDeltaSlice(t, want, got, 1e-4, "equals the vector computed directly")
	assert.Equal(t, 9, one.Usage.PromptTokens, "[CLS] 7 words [SEP]")
	assert.Equal(t, one.Usage.PromptTokens, one.Usage.TotalTokens)
	assert.Equal(t, "list", one.Object)

	// Many inputs, in every accepted shape, each like its single answer.
	toks := []int{101, 2023, 2003, 1037, 3231, 102} // [CLS] this is a test [SEP]
	inputs := []struct {
		name  string
		input any
		n     int
	}{
		{"strings", []string{text, "This is a test", text, text}, 4},
		{"token array", toks, 1},
		{"arrays of tokens", [][]int{toks, toks}, 2},
		{"mixed", []any{"This is", []any{2003, "a test"}}, 2},
	}
	for _, tc := range inputs {
		t.Run(tc.name, func(t *testing.T) {
			var res oaiEmbeddingList
			require.Equal(t, http.StatusOK, xPost(t, url+"/v1/embeddings", map[string]any{"input": tc.input}, &res))
			require.Len(t, res.Data, tc.n)
			for i, d := range res.Data {
				assert.Equal(t, i, d.Index)
				assert.Len(t, toFloats(t, d.Embedding), 32)
			}
		})
	}
	var many oaiEmbeddingList
	require.Equal(t, http.StatusOK, xPost(t, url+"/v1/embeddings", map[string]any{"input": []string{text, "This is a test", text}}, &many))
	assert.InDeltaSlice(t, got, toFloats(t, many.Data[0].Embedding), 1e-4, "batched like single")
	assert.InDeltaSlice(t, got, toFloats(t, many.Data[2].Embedding), 1e-4)
	assert.NotEqual(t, toFloats(t, many.Data[0].Embedding), toFloats(t, many.Data[1].Embedding))
	assert.Equal(t, 9+6+9, many.Usage.PromptTokens)

	// The same tokens given as ids give the same vector as the text.
	var byIDs oaiEmbeddingList
	require.Equal(t, http.StatusOK, xPost(t, url+"/v1/embeddings", map[string]any{"input": toks}, &byIDs))
	assert.InDeltaSlice(t, toFloats(t, many.Data[1].Embedding), toFloats(t, byIDs.Data[0].Embedding), 1e-4)

	// The official client, float and base64.
	client := openai.NewClient(option.WithBaseURL(url+"/v1"), option.WithAPIKey("none"))
	res, err := client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
		Model: "tiny", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{text, "This is a test"}},
	})
	require.NoError(t, err)
	require.Len(t, res.Data, 2)
	require.Len(t, res.Data[0].Embedding, 32)
	for i, x := range res.Data[0].Embedding {
		assert.InDelta(t, want[i], x, 1e-4)
	}
	assert.EqualValues(t, 15, res.Usage.PromptTokens)
	res64, err := client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
		Model: "tiny", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String(text)},
		EncodingFormat: openai.EmbeddingNewParamsEncodingFormatBase64,
	})
	require.NoError(t, err)
	require.Len(t, res64.Data, 1)
	var b64 string
	require.NoError(t, json.Unmarshal([]byte(res64.Data[0].JSON.Embedding.Raw()), &b64))
	raw, err := base64.StdEncoding.DecodeString(b64)
	require.NoError(t, err)
	require.Len(t, raw, 4*32)
	for i := range 32 {
		assert.Equal(t, got[i], math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])), "bit-exact float32 %d", i)
	}
}

// toFloats reads an embedding decoded as any (a []any of numbers).
func toFloats(t *testing.T, v any) []float32 {
	t.Helper()
	switch x := v.(type) {
	case []float32:
		return x
	case []any:
		out := make([]float32, len(x))
		for i, e := range x {
			f, ok := e.(float64)
			require.True(t, ok, "element %d is %T", i, e)
			out[i] = float32(f)
		}
		return out
	}
	t.Fatalf("embedding is %T", v)
	return nil
}

func TestEmbeddingsNative(t *testing.T) {
	path := writeTinyBert(t, 0, gguf.PoolingMean)
	url := embeddingServer(t, path, llama.PoolingDefault)
	const text = "hello hello hello"

	tests := []struct {
		name      string
		normalize any
		want      [][]float32
	}{
		{"default euclidean", nil, directEmbedding(t, path, llama.PoolingMean, text, 2)},
		{"none", -1, directEmbedding(t, path, llama.PoolingMean, text, -1)},
		{"taxicab", 1, directEmbedding(t, path, llama.PoolingMean, text, 1)},
		{"max abs", 0, directEmbedding(t, path, llama.PoolingMean, text, 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := map[string]any{"content": text}
			if tc.normalize != nil {
				body["embd_normalize"] = tc.normalize
			}
			for _, route := range []string{"/embedding", "/embeddings"} {
				var res []nativeEmbedding
				require.Equal(t, http.StatusOK, xPost(t, url+route, body, &res))
				require.Len(t, res, 1)
				require.Len(t, res[0].Embedding, 1, "pooled: one vector")
				assert.InDeltaSlice(t, tc.want[0], res[0].Embedding[0], 1e-3)
			}
		})
	}
	// "content" on the OpenAI route answers in the native shape.
	var res []nativeEmbedding
	require.Equal(t, http.StatusOK, xPost(t, url+"/v1/embeddings", map[string]any{"content": []string{"a", "b"}}, &res))
	require.Len(t, res, 2)
	assert.Equal(t, 1, res[1].Index)
}

func TestEmbeddingsPerToken(t *testing.T) {
	path := writeTinyBert(t, 0, gguf.PoolingNone)
	url := embeddingServer(t, path, llama.PoolingNone)
	const text = "hello hello hello"
	want := directEmbedding(t, path, llama.PoolingNone, text, 2)
	require.Len(t, want, 5, "3 words and two special tokens")

	var res []nativeEmbedding
	require.Equal(t, http.StatusOK, xPost(t, url+"/embeddings", map[string]any{"input": text}, &res))
	require.Len(t, res, 1)
	require.Len(t, res[0].Embedding, 5, "one vector per token")
	for i := range want {
		assert.InDeltaSlice(t, want[i], res[0].Embedding[i], 1e-3)
		assert.Greater(t, math.Abs(norm2(res[0].Embedding[i])-1), 1e-3, "per-token vectors are not normalized")
	}
	// OpenAI's shape has no room for per-token vectors.
	var e errorBody
	assert.Equal(t, http.StatusBadRequest, xPost(t, url+"/v1/embeddings", map[string]any{"input": text}, &e))
	assert.Contains(t, e.Error.Message, "Pooling type 'none'")
}

func TestEmbeddingsErrors(t *testing.T) {
	path := writeTinyBert(t, 0, gguf.PoolingCLS)
	url := embeddingServer(t, path, llama.PoolingDefault)
	tests := []struct {
		name   string
		body   any
		status int
	}{
		{"no input", map[string]any{}, 400},
		{"null input", map[string]any{"input": nil}, 400},
		{"number input", map[string]any{"input": 12}, 400},
		{"object input", map[string]any{"input": map[string]any{}}, 400},
		{"empty array", map[string]any{"input": []string{}}, 400},
		{"bad token", map[string]any{"input": []int{1 << 30}}, 400},
		{"negative token", map[string]any{"input": []int{-5}}, 400},
		{"fraction token", map[string]any{"input": []any{1.5}}, 400},
		{"nested too deep", map[string]any{"input": []any{[]any{[]int{1}}}}, 400},
		{"bad format", map[string]any{"input": "x", "encoding_format": "hex"}, 400},
		{"bad normalize", map[string]any{"input": "x", "embd_normalize": "two"}, 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e errorBody
			assert.Equal(t, tc.status, xPost(t, url+"/v1/embeddings", tc.body, &e))
			assert.Equal(t, errInvalidRequest, e.Error.Type)
			assert.NotEmpty(t, e.Error.Message)
		})
	}

	// A server without embeddings says so, as llama.cpp does.
	_, hs := newTestServer(t, Options{})
	var e errorBody
	assert.Equal(t, http.StatusNotImplemented, xPost(t, hs.URL+"/v1/embeddings", map[string]any{"input": "x"}, &e))
	assert.Equal(t, errNotSupported, e.Error.Type)
	assert.Equal(t, http.StatusNotImplemented, xPost(t, hs.URL+"/embedding", map[string]any{"content": "x"}, &e))
}

// TestEmbeddingsDimensions: "dimensions" (OpenAI's and Ollama's) keeps a
// vector's first values and normalizes them again, on every embedding
// route and with each normalization; a width the model lacks is a 400.
func TestEmbeddingsDimensions(t *testing.T) {
	path := writeTinyBert(t, 0, gguf.PoolingCLS)
	url := embeddingServer(t, path, llama.PoolingDefault)
	const text = "I believe the meaning of life is"
	raw := directEmbedding(t, path, llama.PoolingCLS, text, -1)[0]
	prefix := func(n, p int) []float32 { return llama.Normalize(append([]float32(nil), raw[:n]...), p) }
	vector := func(t *testing.T, route string, out map[string]any) []float32 {
		switch route {
		case "/v1/embeddings":
			return toFloats(t, asSlice(out["data"])[0].(map[string]any)["embedding"])
		case "/api/embed":
			return toFloats(t, asSlice(out["embeddings"])[0])
		}
		return nil
	}
	for _, tc := range []struct {
		route string
		body  map[string]any
		want  []float32
	}{
		{"/v1/embeddings", map[string]any{"input": text, "dimensions": 8}, prefix(8, 2)},
		{"/v1/embeddings", map[string]any{"input": []string{text}, "dimensions": 32}, prefix(32, 2)},
		{"/v1/embeddings", map[string]any{"input": text, "dimensions": 1}, prefix(1, 2)},
		{"/v1/embeddings", map[string]any{"input": text, "dimensions": 5, "embd_normalize": 1}, prefix(5, 1)},
		{"/v1/embeddings", map[string]any{"input": text, "dimensions": 5, "embd_normalize": -1}, raw[:5]},
		{"/api/embed", map[string]any{"input": text, "dimensions": 12}, prefix(12, 2)},
	} {
		t.Run(fmt.Sprintf("%s %v", tc.route, tc.body["dimensions"]), func(t *testing.T) {
			code, out := postJSON(t, url+tc.route, tc.body)
			require.Equal(t, http.StatusOK, code, "%v", out)
			assert.InDeltaSlice(t, tc.want, vector(t, tc.route, out), 1e-4)
		})
	}
	t.Run("native per input", func(t *testing.T) {
		var out []nativeEmbedding
		require.Equal(t, http.StatusOK, xPost(t, url+"/embedding", map[string]any{"content": text, "dimensions": 4}, &out))
		require.Len(t, out, 1)
		assert.InDeltaSlice(t, prefix(4, 2), out[0].Embedding[0], 1e-4)
	})
	t.Run("the official client", func(t *testing.T) {
		client := openai.NewClient(option.WithBaseURL(url+"/v1"), option.WithAPIKey("none"))
		res, err := client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
			Model: "tiny", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String(text)}, Dimensions: openai.Int(16),
		})
		require.NoError(t, err)
		require.Len(t, res.Data[0].Embedding, 16)
		var sum float64
		for _, x := range res.Data[0].Embedding {
			sum += x * x
		}
		assert.InDelta(t, 1, sum, 1e-4, "unit length")
	})
	for _, tc := range []struct {
		route string
		dims  any
		msg   string
	}{
		{"/v1/embeddings", 0, `dimensions\" must be between 1 and 65536, got 0`},
		{"/v1/embeddings", -3, `dimensions\" must be between 1 and 65536, got -3`},
		{"/v1/embeddings", 1 << 20, `dimensions\" must be between 1 and 65536, got 1048576`},
		{"/v1/embeddings", 33, `dimensions\" must be at most 32 for this model, got 33`},
		{"/api/embed", 33, `dimensions\" must be at most 32 for this model, got 33`},
		{"/api/embed", 0, `dimensions\" must be between 1 and 65536, got 0`},
	} {
		t.Run(fmt.Sprintf("%s refuses %v", tc.route, tc.dims), func(t *testing.T) {
			code, raw := postRaw(t, url+tc.route, map[string]any{"input": text, "dimensions": tc.dims})
			assert.Equal(t, http.StatusBadRequest, code)
			assert.Contains(t, string(raw), tc.msg)
		})
	}
}
