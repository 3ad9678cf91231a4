//go:build mtmd

package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"mime/multipart"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/x/llama"
	"github.com/x/llama/engine"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
)

// audioServer serves stories260K with a tiny random projector that has an
// audio encoder.
func audioServer(t *testing.T) string {
	t.Helper()
	testenv.MTMD(t)
	path := filepath.Join(t.TempDir(), "mmproj-audio.gguf")
	require.NoError(t, gguf.WriteTinyProjector(path, gguf.TinyProjectorOptions{TextEmbd: 64, Seed: 7, Audio: true}))
	_, ts := newTestServer(t, Options{Multimodal: MultimodalOptions{Projector: path, CPUOnly: true},
		Engine: engine.Options{Parallel: 1, Context: llama.ContextOptions{ContextSize: 2048}}})
	return ts.URL
}

// toneWAV is 0.25 s of a full-scale sine at hz, 16 kHz mono 16-bit PCM.
func toneWAV(hz float64) []byte {
	const rate, n = 16000, 4000
	var b bytes.Buffer
	b.WriteString("RIFF")
	_ = binary.Write(&b, binary.LittleEndian, uint32(36+2*n))
	b.WriteString("WAVEfmt ")
	for _, v := range []any{uint32(16), uint16(1), uint16(1), uint32(rate), uint32(2 * rate), uint16(2), uint16(16)} {
		_ = binary.Write(&b, binary.LittleEndian, v)
	}
	b.WriteString("data")
	_ = binary.Write(&b, binary.LittleEndian, uint32(2*n))
	for i := range n {
		_ = binary.Write(&b, binary.LittleEndian, int16(30000*math.Sin(2*math.Pi*hz*float64(i)/rate)))
	}
	return b.Bytes()
}

// transcriptionForm builds a multipart body: fields, then file (when not
// nil) in the "file" part.
func transcriptionBody(t *testing.T, file []byte, fields map[string]string) (string, []byte) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for k, v := range fields {
		require.NoError(t, mw.WriteField(k, v))
	}
	if file != nil {
		fw, err := mw.CreateFormFile("file", "audio.wav")
		require.NoError(t, err)
		_, err = fw.Write(file)
		require.NoError(t, err)
	}
	require.NoError(t, mw.Close())
	return mw.FormDataContentType(), b.Bytes()
}

func postTranscription(t *testing.T, base string, file []byte, fields map[string]string) (int, map[string]any) {
	t.Helper()
	ct, body := transcriptionBody(t, file, fields)
	resp, err := http.Post(base+"/v1/audio/transcriptions", ct, bytes.NewReader(body))
	var out map[string]any
	code := decodeAnswer(t, resp, err, &out)
	return code, out
}

func greedy(extra map[string]string) map[string]string {
	f := map[string]string{"model": "stories", "temperature": "0", "max_tokens": "16"}
	for k, v := range extra {
		f[k] = v
	}
	return f
}

// TestTranscriptions sends WAV tones: the answer has llama-server's shape
// and text, and two different tones give different greedy transcripts.
func TestTranscriptions(t *testing.T) {
	base := audioServer(t)
	texts := map[float64]string{}
	for _, hz := range []float64{220, 3000} {
		code, out := postTranscription(t, base, toneWAV(hz), greedy(map[string]string{"language": "en", "response_format": "json"}))
		require.Equal(t, http.StatusOK, code, "%v", out)
		assert.Equal(t, "transcript.text.done", out["type"])
		text, _ := out["text"].(string)
		require.NotEmpty(t, text)
		texts[hz] = text
		usage, _ := out["usage"].(map[string]any)
		require.NotNil(t, usage, "%v", out)
		assert.Equal(t, "tokens", usage["type"])
		in, outTok := usage["input_tokens"].(float64), usage["output_tokens"].(float64)
		assert.Greater(t, in, 0.0)
		assert.Greater(t, outTok, 0.0)
		assert.Equal(t, in+outTok, usage["total_tokens"])
		assert.Contains(t, usage, "input_tokens_details")
	}
	assert.NotEqual(t, texts[220], texts[3000], "two tones gave the same transcript")
	// The same tone again gives the same greedy transcript.
	code, out := postTranscription(t, base, toneWAV(220), greedy(map[string]string{"language": "en"}))
	require.Equal(t, http.StatusOK, code, "%v", out)
	assert.Equal(t, texts[220], out["text"])
	// The default prompt given explicitly, with a media marker smuggled in
	// (it is dropped), gives the same transcript.
	_, props := getJSON(t, base+"/props")
	marker, _ := props["media_marker"].(string)
	require.NotEmpty(t, marker)
	code, out = postTranscription(t, base, toneWAV(220), greedy(map[string]string{"language": "en",
		"prompt": "Transcribe " + marker + "audio to text"}))
	require.Equal(t, http.StatusOK, code, "%v", out)
	assert.Equal(t, texts[220], out["text"])
	// Also on the path without /v1.
	ct, body := transcriptionBody(t, toneWAV(220), greedy(nil))
	resp, err := http.Post(base+"/audio/transcriptions", ct, bytes.NewReader(body))
	require.Equal(t, http.StatusOK, decodeAnswer(t, resp, err, &out))
	assert.NotEmpty(t, out["text"])
}

// TestTranscriptionsStream streams a transcript: deltas that add up to the
// final text, then transcript.text.done and [DONE].
func TestTranscriptionsStream(t *testing.T) {
	base := audioServer(t)
	ct, body := transcriptionBody(t, toneWAV(440), greedy(map[string]string{"stream": "true"}))
	resp, err := http.Post(base+"/v1/audio/transcriptions", ct, bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	var deltas strings.Builder
	var done map[string]any
	sawDone := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		payload, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if payload == "[DONE]" {
			sawDone = true
			break
		}
		var ev map[string]any
		require.NoError(t, json.Unmarshal([]byte(payload), &ev))
		switch ev["type"] {
		case "transcript.text.delta":
			deltas.WriteString(ev["delta"].(string))
		case "transcript.text.done":
			done = ev
		default:
			t.Fatalf("unexpected event %s", payload)
		}
	}
	require.NoError(t, sc.Err())
	assert.True(t, sawDone)
	require.NotNil(t, done)
	assert.NotEmpty(t, done["text"])
	assert.Equal(t, strings.TrimSpace(deltas.String()), strings.TrimSpace(done["text"].(string)))
	assert.Contains(t, done, "usage")
}

// TestTranscriptionsBadInput gets a 400 in OpenAI's error shape for each
// kind of bad request.
func TestTranscriptionsBadInput(t *testing.T) {
	testenv.MTMD(t)
	base := audioServer(t)
	_, plain := newTestServer(t, Options{Engine: engine.Options{Parallel: 1, Context: llama.ContextOptions{ContextSize: 512}}, MaxBodyBytes: 1 << 16})
	vision := mmServer(t)
	wav := toneWAV(440)
	multipartReq := func(file []byte, fields map[string]string) func(t *testing.T) (string, []byte) {
		return func(t *testing.T) (string, []byte) { return transcriptionBody(t, file, fields) }
	}
	tests := []struct {
		name string
		url  string
		body func(t *testing.T) (string, []byte)
		want string
	}{
		{"not multipart", base, func(*testing.T) (string, []byte) {
			return "application/json", []byte(`{"file":"x","model":"m"}`)
		}, "multipart/form-data"},
		{"missing file", base, multipartReq(nil, greedy(nil)), "No input file"},
		{"empty file", base, multipartReq([]byte{}, greedy(nil)), "empty"},
		{"not audio", base, multipartReq([]byte("hello, this is not a sound"), greedy(nil)), "not audio"},
		{"truncated wav", base, multipartReq(wav[:30], greedy(nil)), "media 0"},
		{"text response_format", base, multipartReq(wav, greedy(map[string]string{"response_format": "text"})), "response_format"},
		{"bad temperature", base, multipartReq(wav, greedy(map[string]string{"temperature": "warm"})), "temperature"},
		{"bad max_tokens", base, multipartReq(wav, greedy(map[string]string{"max_tokens": "-3"})), "max_tokens"},
		{"no projector", plain.URL, multipartReq(wav, greedy(nil)), "provide the mmproj"},
		{"projector without audio", vision, multipartReq(wav, greedy(nil)), "does not support audio"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ct, body := tt.body(t)
			resp, err := http.Post(tt.url+"/v1/audio/transcriptions", ct, bytes.NewReader(body))
			var out map[string]any
			code := decodeAnswer(t, resp, err, &out)
			assert.Equal(t, http.StatusBadRequest, code, "%v", out)
			e, _ := out["error"].(map[string]any)
			require.NotNil(t, e, "%v", out)
			assert.Equal(t, "invalid_request_error", e["type"])
			assert.Contains(t, e["message"], tt.want)
		})
	}
	// A form over the body limit is a 413, whether its length is announced
	// or not (chunked).
	ct, big := transcriptionBody(t, bytes.Repeat(toneWAV(440), 10), greedy(nil))
	for _, body := range []io.Reader{bytes.NewReader(big), io.MultiReader(bytes.NewReader(big))} {
		resp, err := http.Post(plain.URL+"/v1/audio/transcriptions", ct, body)
		var out map[string]any
		assert.Equal(t, http.StatusRequestEntityTooLarge, decodeAnswer(t, resp, err, &out), "%v", out)
		assert.Contains(t, out["error"].(map[string]any)["message"], "larger than")
	}
	// The server still transcribes.
	code, out := postTranscription(t, base, wav, greedy(nil))
	require.Equal(t, http.StatusOK, code, "%v", out)
	assert.NotEmpty(t, out["text"])
}

// TestTranscriptionsOpenAIClient transcribes with the openai-go client.
func TestTranscriptionsOpenAIClient(t *testing.T) {
	base := audioServer(t)
	client := openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	res, err := client.Audio.Transcriptions.New(context.Background(), openai.AudioTranscriptionNewParams{
		File:        openai.File(bytes.NewReader(toneWAV(220)), "tone.wav", "audio/wav"),
		Model:       openai.AudioModel("stories"),
		Language:    openai.String("en"),
		Temperature: openai.Float(0),
	})
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		t.Fatalf("%s", apiErr.RawJSON())
	}
	require.NoError(t, err)
	assert.NotEmpty(t, res.Text)
	assert.Greater(t, res.Usage.InputTokens, int64(0))
}
