//go:build mtmd

package server

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/x/llama/engine"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
)

// mmServer serves stories260K with a tiny random LLaVA-style projector
// written for it (embedding size 64), on one slot.
func mmServer(t *testing.T) string {
	t.Helper()
	testenv.MTMD(t)
	path := filepath.Join(t.TempDir(), "mmproj.gguf")
	require.NoError(t, gguf.WriteTinyProjector(path, gguf.TinyProjectorOptions{TextEmbd: 64, Seed: 7}))
	_, ts := newTestServer(t, Options{Multimodal: MultimodalOptions{Projector: path, CPUOnly: true},
		Engine: engine.Options{Parallel: 1, Context: llama.ContextOptions{ContextSize: 512}}})
	return ts.URL
}

func testPNG(t *testing.T, kind string, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			c := color.RGBA{R: 230, G: uint8(20 + x%16), B: 10, A: 255}
			if kind == "checker" {
				c = color.RGBA{A: 255}
				if (x/4+y/4)%2 == 0 {
					c = color.RGBA{R: 255, G: 255, B: 255, A: 255}
				}
			}
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, img))
	return b.Bytes()
}

func dataURLOf(mime string, b []byte) string {
	return "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(b)
}

// hugePNGHeader is a PNG whose valid header claims 100000x100000 pixels.
func hugePNGHeader() []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], 100000)
	binary.BigEndian.PutUint32(ihdr[4:], 100000)
	ihdr[8], ihdr[9] = 8, 2
	_ = binary.Write(&b, binary.BigEndian, uint32(13))
	chunk := append([]byte("IHDR"), ihdr...)
	b.Write(chunk)
	_ = binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(chunk))
	return b.Bytes()
}

func tinyWAV() []byte {
	var b bytes.Buffer
	b.WriteString("RIFF")
	_ = binary.Write(&b, binary.LittleEndian, uint32(36+3200))
	b.WriteString("WAVEfmt ")
	for _, v := range []any{uint32(16), uint16(1), uint16(1), uint32(16000), uint32(32000), uint16(2), uint16(16)} {
		_ = binary.Write(&b, binary.LittleEndian, v)
	}
	b.WriteString("data")
	_ = binary.Write(&b, binary.LittleEndian, uint32(3200))
	b.Write(make([]byte, 3200))
	return b.Bytes()
}

func chatWith(parts ...any) map[string]any {
	return map[string]any{"messages": []any{map[string]any{"role": "user", "content": parts}},
		"max_tokens": 16, "temperature": 0}
}

func mmText(s string) map[string]any { return map[string]any{"type": "text", "text": s} }

func imagePart(url string) map[string]any {
	return map[string]any{"type": "image_url", "image_url": map[string]any{"url": url}}
}

func mmPost(t *testing.T, url string, body any) (int, map[string]any) {
	t.Helper()
	data, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(url, "application/json", bytes.NewReader(data))
	var out map[string]any
	code := decodeAnswer(t, resp, err, &out)
	return code, out
}

func mmChat(t *testing.T, base string, body any) string {
	t.Helper()
	code, out := mmPost(t, base+"/v1/chat/completions", body)
	require.Equal(t, http.StatusOK, code, "%v", out)
	return out["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
}

// TestMultimodalLongRunBPE: a chat with an image and 30,000 letters
// without a space, to a model whose vocabulary is BPE (deepseek-coder's,
// on random weights), is answered: libmtmd tokenized the text with
// llama.cpp's BPE pre-tokenizer, whose stack that run overflowed, ending
// the process.
func TestMultimodalLongRunBPE(t *testing.T) {
	testenv.MTMD(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "bpe-tiny.gguf")
	require.NoError(t, gguf.WriteTinyModel(model, gguf.TinyModelOptions{
		VocabFrom: filepath.Join(testenv.ModelsDir(t), "vocab", "ggml-vocab-deepseek-coder.gguf"), NEmbd: 32, NHead: 2, NCtx: 16384, Seed: 3}))
	proj := filepath.Join(dir, "mmproj.gguf")
	require.NoError(t, gguf.WriteTinyProjector(proj, gguf.TinyProjectorOptions{TextEmbd: 32, Seed: 7}))
	_, ts := newTestServer(t, Options{Model: model, ChatTemplate: "chatml", Multimodal: MultimodalOptions{Projector: proj, CPUOnly: true},
		Engine: engine.Options{Parallel: 1, Context: llama.ContextOptions{ContextSize: 16384}}})
	red := dataURLOf("image/png", testPNG(t, "red", 40, 40))
	body := chatWith(mmText("Describe "), imagePart(red), mmText(" "+strings.Repeat("a", 30000)))
	body["max_tokens"] = 2
	code, out := mmPost(t, ts.URL+"/v1/chat/completions", body)
	require.Equal(t, http.StatusOK, code, "%v", out)
	usage := out["usage"].(map[string]any)
	assert.Greater(t, usage["prompt_tokens"].(float64), 1000.0, "the run was tokenized")
}

// TestMultimodalChat sends images as OpenAI image_url parts: different
// images give different greedy answers, the same image the same answer, and
// a text-only request on the slot afterwards answers as on a fresh server
// (the media's positions are never taken for cached text).
func TestMultimodalChat(t *testing.T) {
	base := mmServer(t)
	red := dataURLOf("image/png", testPNG(t, "red", 40, 40))
	checker := dataURLOf("image/png", testPNG(t, "checker", 48, 32))
	ask := func(url string) string {
		return mmChat(t, base, chatWith(mmText("Once upon a time"), imagePart(url), mmText(" there was")))
	}
	a := ask(red)
	b := ask(checker)
	a2 := ask(red)
	t.Logf("red: %q, checker: %q", a, b)
	assert.NotEmpty(t, a)
	assert.NotEqual(t, a, b)
	assert.Equal(t, a, a2)

	textOnly := chatWith(mmText("Once upon a time there was"))
	afterMedia := mmChat(t, base, textOnly)
	_, fresh := newTestServer(t, Options{Engine: engine.Options{Parallel: 1, Context: llama.ContextOptions{ContextSize: 512}}})
	assert.Equal(t, mmChat(t, fresh.URL, textOnly), afterMedia)

	var props map[string]any
	resp, err := http.Get(base + "/props")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&props))
	assert.Equal(t, map[string]any{"vision": true, "audio": false, "video": false}, props["modalities"])
}

func TestMultimodalBadInput(t *testing.T) {
	base := mmServer(t)
	_, plain := newTestServer(t, Options{Engine: engine.Options{Parallel: 1, Context: llama.ContextOptions{ContextSize: 512}}})
	good := dataURLOf("image/png", testPNG(t, "red", 16, 16))
	tests := []struct {
		name string
		url  string
		body any
		want string
	}{
		{"no projector", plain.URL, chatWith(mmText("a"), imagePart(good), mmText("b")), "provide the mmproj"},
		{"remote URL", base, chatWith(imagePart("https://example.invalid/cat.png"), mmText("b")), "data: URL"},
		{"not base64", base, chatWith(imagePart("data:image/png;base64,!!!"), mmText("b")), "base64"},
		{"not an image", base, chatWith(imagePart(dataURLOf("image/png", []byte("hello, not a picture"))), mmText("b")), "not an image"},
		{"huge image", base, chatWith(imagePart(dataURLOf("image/png", hugePNGHeader())), mmText("b")), "exceeds"},
		{"truncated image", base, chatWith(imagePart(dataURLOf("image/png", testPNG(t, "red", 16, 16)[:60])), mmText("b")), "media 0"},
		{"audio to a vision projector", base, chatWith(map[string]any{"type": "input_audio",
			"input_audio": map[string]any{"data": base64.StdEncoding.EncodeToString(tinyWAV()), "format": "wav"}}, mmText("b")), "not supported"},
		{"unsupported audio format", base, chatWith(map[string]any{"type": "input_audio",
			"input_audio": map[string]any{"data": "AAAA", "format": "ogg"}}, mmText("b")), "format"},
		{"image_url without url", base, chatWith(map[string]any{"type": "image_url", "image_url": map[string]any{}}, mmText("b")), "no url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out := mmPost(t, tt.url+"/v1/chat/completions", tt.body)
			assert.Equal(t, http.StatusBadRequest, code, "%v", out)
			msg, _ := json.Marshal(out)
			assert.True(t, strings.Contains(string(msg), tt.want), "%s does not mention %q", msg, tt.want)
		})
	}
	// The server still works.
	assert.NotEmpty(t, mmChat(t, base, chatWith(mmText("Once upon a time"), imagePart(good), mmText(" there"))))
}

func completionWith(prompt string, media ...[]byte) map[string]any {
	data := make([]string, len(media))
	for i, m := range media {
		data[i] = base64.StdEncoding.EncodeToString(m)
	}
	return map[string]any{"prompt": map[string]any{"prompt_string": prompt, "multimodal_data": data},
		"n_predict": 16, "temperature": 0}
}

// TestMultimodalCompletion sends media in /completion's prompt object.
func TestMultimodalCompletion(t *testing.T) {
	base := mmServer(t)
	var props map[string]any
	resp, err := http.Get(base + "/props")
	require.Equal(t, http.StatusOK, decodeAnswer(t, resp, err, &props))
	marker := props["media_marker"].(string)
	require.Regexp(t, `^<__media_[A-Za-z0-9]{32}__>$`, marker)
	red, checker := testPNG(t, "red", 40, 40), testPNG(t, "checker", 48, 32)
	complete := func(body any) string {
		code, out := mmPost(t, base+"/completion", body)
		require.Equal(t, http.StatusOK, code, "%v", out)
		return out["content"].(string)
	}
	a := complete(completionWith("Once upon a time "+marker+" there was", red))
	b := complete(completionWith("Once upon a time "+marker+" there was", checker))
	assert.NotEmpty(t, a)
	assert.NotEqual(t, a, b)
	plain := complete(map[string]any{"prompt": "Once upon a time there was", "n_predict": 16, "temperature": 0})
	assert.Equal(t, plain, complete(completionWith("Once upon a time there was")), "no media: the text-only answer")

	var models map[string]any
	resp, err = http.Get(base + "/v1/models")
	require.Equal(t, http.StatusOK, decodeAnswer(t, resp, err, &models))
	assert.Equal(t, []any{"completion", "multimodal"}, models["models"].([]any)[0].(map[string]any)["capabilities"])

	_, noProj := newTestServer(t, Options{Engine: engine.Options{Parallel: 1, Context: llama.ContextOptions{ContextSize: 512}}})
	tests := []struct {
		name string
		url  string
		body any
		want string
	}{
		{"no projector", noProj.URL, completionWith("a "+marker+" b", red), "provide the mmproj"},
		{"more markers than media", base, completionWith("a "+marker+" "+marker+" b", red), "markers"},
		{"media without marker", base, completionWith("a b", red), "markers"},
		{"ends with the medium", base, completionWith("a "+marker, red), "end with text"},
		{"the default marker is text", base, completionWith("a <__media__> b", red), "markers"},
		{"data not a string", base, map[string]any{"prompt": map[string]any{"prompt_string": "a " + marker + " b",
			"multimodal_data": []any{1}}}, "base64"},
		{"no prompt_string", base, map[string]any{"prompt": map[string]any{"multimodal_data": []any{}}}, "prompt_string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out := mmPost(t, tt.url+"/completion", tt.body)
			assert.Equal(t, http.StatusBadRequest, code, "%v", out)
			msg, _ := json.Marshal(out)
			assert.Contains(t, string(msg), tt.want)
		})
	}
}

// TestMultimodalAnthropic sends an Anthropic image block.
func TestMultimodalAnthropic(t *testing.T) {
	base := mmServer(t)
	msg := func(source map[string]any) map[string]any {
		return map[string]any{"model": "m", "max_tokens": 12, "temperature": 0, "messages": []any{map[string]any{
			"role": "user", "content": []any{
				map[string]any{"type": "text", "text": "Once upon a time"},
				map[string]any{"type": "image", "source": source},
				map[string]any{"type": "text", "text": " there was"},
			}}}}
	}
	b64 := func(kind string) map[string]any {
		return map[string]any{"type": "base64", "media_type": "image/png",
			"data": base64.StdEncoding.EncodeToString(testPNG(t, kind, 32, 32))}
	}
	text := func(body any) string {
		code, out := mmPost(t, base+"/v1/messages", body)
		require.Equal(t, http.StatusOK, code, "%v", out)
		return out["content"].([]any)[0].(map[string]any)["text"].(string)
	}
	a, b := text(msg(b64("red"))), text(msg(b64("checker")))
	assert.NotEmpty(t, a)
	assert.NotEqual(t, a, b)
	assert.Equal(t, a, text(msg(map[string]any{"type": "url",
		"url": dataURLOf("image/png", testPNG(t, "red", 32, 32))})), "a data: URL source is the same image")

	for _, tt := range []struct {
		name   string
		source map[string]any
		want   string
	}{
		{"not an image type", map[string]any{"type": "base64", "media_type": "text/plain", "data": "aGVsbG8="}, "media_type"},
		{"remote url", map[string]any{"type": "url", "url": "https://example.invalid/x.png"}, "data: URL"},
		{"unknown source type", map[string]any{"type": "file", "file_id": "x"}, "not supported"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out := mmPost(t, base+"/v1/messages", msg(tt.source))
			assert.Equal(t, http.StatusBadRequest, code, "%v", out)
			m, _ := json.Marshal(out)
			assert.Contains(t, string(m), tt.want)
		})
	}
}

// TestMultimodalAudio sends OpenAI input_audio parts to a projector with
// an audio encoder.
func TestMultimodalAudio(t *testing.T) {
	testenv.MTMD(t)
	path := filepath.Join(t.TempDir(), "mmproj-audio.gguf")
	require.NoError(t, gguf.WriteTinyProjector(path, gguf.TinyProjectorOptions{TextEmbd: 64, Seed: 7, Audio: true}))
	_, ts := newTestServer(t, Options{Multimodal: MultimodalOptions{Projector: path, CPUOnly: true},
		Engine: engine.Options{Parallel: 1, Context: llama.ContextOptions{ContextSize: 2048}}})
	audio := func(data []byte) map[string]any {
		return map[string]any{"type": "input_audio",
			"input_audio": map[string]any{"data": base64.StdEncoding.EncodeToString(data), "format": "wav"}}
	}
	silent := mmChat(t, ts.URL, chatWith(mmText("Once upon a time"), audio(tinyWAV()), mmText(" there was")))
	assert.NotEmpty(t, silent)
	var props map[string]any
	resp, err := http.Get(ts.URL + "/props")
	require.Equal(t, http.StatusOK, decodeAnswer(t, resp, err, &props))
	assert.Equal(t, map[string]any{"vision": true, "audio": true, "video": false}, props["modalities"])
}

// TestMultimodalResponses sends an input_image part to /v1/responses.
func TestMultimodalResponses(t *testing.T) {
	base := mmServer(t)
	body := func(url string) map[string]any {
		return map[string]any{"model": "m", "max_output_tokens": 12, "temperature": 0, "input": []any{map[string]any{
			"role": "user", "content": []any{
				map[string]any{"type": "input_text", "text": "Once upon a time"},
				map[string]any{"type": "input_image", "image_url": url},
				map[string]any{"type": "input_text", "text": " there was"},
			}}}}
	}
	text := func(url string) string {
		code, out := mmPost(t, base+"/v1/responses", body(url))
		require.Equal(t, http.StatusOK, code, "%v", out)
		var sb strings.Builder
		for _, it := range out["output"].([]any) {
			item := it.(map[string]any)
			if item["type"] != "message" {
				continue
			}
			for _, c := range item["content"].([]any) {
				sb.WriteString(c.(map[string]any)["text"].(string))
			}
		}
		return sb.String()
	}
	a := text(dataURLOf("image/png", testPNG(t, "red", 32, 32)))
	b := text(dataURLOf("image/png", testPNG(t, "checker", 32, 32)))
	assert.NotEmpty(t, a)
	assert.NotEqual(t, a, b)
	assert.Equal(t, a, text(dataURLOf("image/png", testPNG(t, "red", 32, 32))))
	code, out := mmPost(t, base+"/v1/responses", map[string]any{"input": []any{map[string]any{"role": "user",
		"content": []any{map[string]any{"type": "input_image"}, map[string]any{"type": "input_text", "text": "x"}}}}})
	assert.Equal(t, http.StatusBadRequest, code, "%v", out)
	m, _ := json.Marshal(out)
	assert.Contains(t, string(m), "image_url")
}

func TestWithoutMedia(t *testing.T) {
	p := engine.MediaPlaceholder
	tests := []struct {
		in, want []llama.Token
	}{
		{nil, nil},
		{[]llama.Token{1, 2, 3}, []llama.Token{1, 2, 3}},
		{[]llama.Token{1, p, p, 2, p, 3}, []llama.Token{1, 2, 3}},
		{[]llama.Token{p, p}, []llama.Token{}},
	}
	for _, tt := range tests {
		got := engine.WithoutMedia(tt.in)
		assert.Equal(t, len(tt.want), len(got))
		for i := range tt.want {
			assert.Equal(t, tt.want[i], got[i])
		}
	}
	in := []llama.Token{1, p, 2}
	_ = engine.WithoutMedia(in)
	assert.Equal(t, []llama.Token{1, p, 2}, in, "the input is not changed")
}

// TestMultimodalOllama sends Ollama's base64 images: the answer is the one
// the OpenAI route gives for the same image after the same text.
func TestMultimodalOllama(t *testing.T) {
	base := mmServer(t)
	png := testPNG(t, "checker", 32, 32)
	code, want := mmPost(t, base+"/v1/chat/completions", map[string]any{"max_tokens": 12, "temperature": 0, "messages": []any{map[string]any{
		"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "Once upon a time"},
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": dataURLOf("image/png", png)}},
		}}}})
	require.Equal(t, http.StatusOK, code, "%v", want)
	wantText := want["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
	require.NotEmpty(t, wantText)

	b64 := base64.StdEncoding.EncodeToString(png)
	opts := map[string]any{"temperature": 0, "num_predict": 12}
	code, out := mmPost(t, base+"/api/chat", map[string]any{"model": "m", "stream": false, "options": opts, "messages": []any{
		map[string]any{"role": "user", "content": "Once upon a time", "images": []string{b64}}}})
	require.Equal(t, http.StatusOK, code, "%v", out)
	assert.Equal(t, wantText, out["message"].(map[string]any)["content"])

	code, out = mmPost(t, base+"/api/generate", map[string]any{"model": "m", "stream": false, "options": opts,
		"prompt": "Once upon a time", "images": []string{b64}})
	require.Equal(t, http.StatusOK, code, "%v", out)
	assert.Equal(t, wantText, out["response"])

	code, out = mmPost(t, base+"/api/chat", map[string]any{"model": "m", "stream": false, "messages": []any{
		map[string]any{"role": "user", "content": "x", "images": []string{"not base64!"}}}})
	assert.Equal(t, http.StatusBadRequest, code, "%v", out)

	code, out = mmPost(t, base+"/api/show", map[string]any{"model": "m"})
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, out["capabilities"], "vision")
}
