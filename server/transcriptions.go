package server

// OpenAI's audio transcriptions, POST /v1/audio/transcriptions (and
// /audio/transcriptions). As llama-server does, the multipart/form-data
// request is turned into a chat completion: one user message asking to
// transcribe (the form's prompt, or a default), with the language when
// given, and the uploaded file as an audio part. The model's answer is
// returned as {"type":"transcript.text.done","text":...,"usage":...}, or
// streamed as transcript.text.delta events ending with that one and
// [DONE]. Only response_format "json" is supported, as in llama-server.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/x/llama/engine"
	"github.com/x/llama/server/internal/wire"

	"github.com/x/llama/chat"
)

// transcriptionForm is what a transcription request carries: the audio
// file and the text fields llama-server reads.
type transcriptionForm struct {
	file   []byte
	fields map[string]string
}

// transcriptionField reports whether a form field is read; others are
// ignored.
func transcriptionField(name string) bool {
	switch name {
	case "model", "prompt", "language", "response_format", "temperature", "max_tokens", "stream":
		return true
	}
	return false
}

// maxFormParts bounds the number of parts of a transcription form.
const maxFormParts = 64

// readTranscriptionForm reads a multipart/form-data body (already bounded
// by the server's body limit). A request that is not multipart, a
// repeated field or a missing file is a 400; a body over the limit a 413.
func readTranscriptionForm(r *http.Request) (*transcriptionForm, error) {
	ct, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || ct != "multipart/form-data" || params["boundary"] == "" {
		return nil, badRequest("the request must be multipart/form-data with an audio file in the \"file\" field")
	}
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, badRequest("multipart form: %v", err)
	}
	form := &transcriptionForm{fields: map[string]string{}}
	seen := map[string]bool{}
	for n := 0; ; n++ {
		if n >= maxFormParts {
			return nil, badRequest("multipart form: more than %d parts", maxFormParts)
		}
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, formReadError(err)
		}
		name := p.FormName()
		if name != "file" && !transcriptionField(name) {
			_, err = io.Copy(io.Discard, p)
			_ = p.Close()
			if err != nil {
				return nil, formReadError(err)
			}
			continue
		}
		if seen[name] {
			_ = p.Close()
			return nil, badRequest("multipart form: field %q is given more than once", name)
		}
		seen[name] = true
		data, err := io.ReadAll(p)
		_ = p.Close()
		if err != nil {
			return nil, formReadError(err)
		}
		if name == "file" {
			form.file = data
		} else {
			form.fields[name] = string(data)
		}
	}
	if !seen["file"] {
		return nil, badRequest("No input file found for transcription")
	}
	if len(form.file) == 0 {
		return nil, badRequest("the input file is empty")
	}
	return form, nil
}

// formReadError is the answer to a failed read of the form: 413 over the
// body limit, else 400.
func formReadError(err error) error {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return &httpError{Status: http.StatusRequestEntityTooLarge, Type: errInvalidRequest,
			Msg: fmt.Sprintf("request body is larger than %d bytes", tooLarge.Limit), Err: err}
	}
	return badRequest("multipart form: %v", err)
}

// audioFormat names the container of an audio file from its first bytes
// (what input_audio parts call format), or "" for anything else.
func audioFormat(b []byte) string {
	switch {
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WAVE":
		return "wav"
	case bytes.HasPrefix(b, []byte("fLaC")):
		return "flac"
	case bytes.HasPrefix(b, []byte("ID3")), len(b) >= 2 && b[0] == 0xFF && b[1]&0xE0 == 0xE0:
		return "mp3"
	}
	return ""
}

// transcriptionChat turns a transcription form into the internal chat
// request for inst, as llama-server converts it; the user message ends
// with the server's media marker, the place of the form's file (the caller adds the
// file to the request's media).
func transcriptionChat(form *transcriptionForm, inst *instance) (*wire.Chat, error) {
	if rf, ok := form.fields["response_format"]; ok && rf != "json" {
		return nil, badRequest("Only 'json' response_format is supported for transcription")
	}
	if audioFormat(form.file) == "" {
		return nil, badRequest("the input file is not audio (wav, mp3 or flac)")
	}
	// llama.cpp's ASR preset: LFM2 models take a system prompt instead.
	system, prompt := "", "Transcribe audio to text"
	if src := inst.Template.Source(); strings.Contains(src, "<|tool_list_start|>") && strings.Contains(src, "<|tool_list_end|>") {
		system, prompt = "Perform ASR.", ""
	}
	if p := form.fields["prompt"]; p != "" {
		prompt = p
	}
	if lang := form.fields["language"]; lang != "" {
		prompt += " (language: " + lang + ")"
	}
	req := &wire.Chat{AddGenerationPrompt: true, N: 1, ToolChoice: chat.ToolChoice{Mode: "auto"}, Model: form.fields["model"]}
	// As llama-server, the user message is the prompt text ending with the
	// media marker (a string, not content parts).
	if system != "" {
		req.Messages = append(req.Messages, chat.Message{Role: chat.RoleSystem, Content: system})
	}
	// The client's text cannot place media: a marker in it (GET /props
	// tells it) is dropped.
	marker := inst.Server.mediaMarker
	prompt = strings.ReplaceAll(prompt, marker, "")
	req.Messages = append(req.Messages, chat.Message{Role: chat.RoleUser, Content: prompt + marker})
	req.Gen.Stream = wire.Some("stream", form.fields["stream"] == "true")
	if s, ok := form.fields["max_tokens"]; ok {
		n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 31)
		if err != nil {
			return nil, badRequest("max_tokens must be a non-negative integer, not %q", s)
		}
		req.Gen.Params.SetInt("max_tokens", int64(n))
	}
	if s, ok := form.fields["temperature"]; ok {
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 32)
		if err != nil {
			return nil, badRequest("temperature must be a number, not %q", s)
		}
		req.Gen.Params.SetFloat("temperature", v)
	}
	return req, nil
}

// Wire types of a transcription answer.
type (
	oaiTranscription struct {
		Type  string           `json:"type"`
		Text  string           `json:"text"`
		Usage oaiTranscriptUse `json:"usage"`
	}
	oaiTranscriptUse struct {
		Type         string `json:"type"`
		InputTokens  int    `json:"input_tokens"`
		OutputTokens int    `json:"output_tokens"`
		TotalTokens  int    `json:"total_tokens"`
		InputDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"input_tokens_details"`
	}
	oaiTranscriptDelta struct {
		Type  string `json:"type"`
		Delta string `json:"delta"`
	}
)

// transcriptionDone is the final answer for the task's Done event.
func transcriptionDone(text string, ev engine.Event) oaiTranscription {
	out := oaiTranscription{Type: "transcript.text.done", Text: text}
	out.Usage.Type = "tokens"
	out.Usage.InputTokens = ev.PromptTokens
	out.Usage.OutputTokens = ev.Generated
	out.Usage.TotalTokens = ev.PromptTokens + ev.Generated
	out.Usage.InputDetails.CachedTokens = ev.CachedTokens
	return out
}

func handleTranscriptions(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		form, err := readTranscriptionForm(r)
		if err != nil {
			return err
		}
		inst, release, err := s.instanceFor(r, form.fields["model"])
		if err != nil {
			return err
		}
		defer release()
		if inst.Projector == nil {
			return errNoMultimodal("audio")
		}
		if !inst.Projector.SupportsAudio() {
			return badRequest("The current model does not support audio input: its multimodal projector has no audio encoder")
		}
		req, err := transcriptionChat(form, inst)
		if err != nil {
			return err
		}
		req.Media = append(req.Media, wire.Media{Data: form.file, Kind: "audio"})
		g, plan, _, err := inst.startChat(req)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		events, err := s.startTasks(ctx, inst, nil, []*engine.Request{g.task}, streamTo(w, g.opt.Stream))
		if err != nil {
			return err
		}
		if g.opt.Stream {
			streamTranscription(ctx, w, plan.Parse, events)
			return nil
		}
		res, msg, err := collectChat(ctx, inst, plan, events)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, transcriptionDone(msg.Content, res.Final))
		return nil
	}
}

// streamTranscription sends the generated text as transcript.text.delta
// events, then transcript.text.done with the whole (parsed) text and the
// usage, then [DONE].
func streamTranscription(ctx context.Context, w http.ResponseWriter, parse chat.ParseOptions, events eventStream) {
	sse, _ := sseStart(ctx, w)
	var sb strings.Builder
	for events.Next() {
		ev := events.Event()
		if ev.Err != nil {
			sse.fail(ev.Err)
			return
		}
		if ev.Done {
			msg := chat.ParseWhole(sb.String(), parse)
			if sse.data(transcriptionDone(msg.Content, ev)) != nil {
				return
			}
			_ = sse.data("[DONE]")
			return
		}
		if ev.Text == "" {
			continue
		}
		sb.WriteString(ev.Text)
		if sse.data(oaiTranscriptDelta{Type: "transcript.text.delta", Delta: ev.Text}) != nil {
			return
		}
	}
}
