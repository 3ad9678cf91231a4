package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"

	"github.com/x/llama/engine"
	"github.com/x/llama/server/internal/wire"

	"github.com/x/llama"
	"github.com/x/llama/mtmd"
)

// MultimodalOptions give a model a multimodal projector, for image and
// audio input (through package mtmd, which needs libmtmd: see its
// documentation). The zero value serves text only.
type MultimodalOptions struct {
	// Projector is the projector ("mmproj") GGUF of the model (--mmproj).
	Projector string
	// CPUOnly keeps the projector on the CPU (--no-mmproj-offload).
	CPUOnly bool
	// ImageMinTokens and ImageMaxTokens bound the tokens of one image for
	// projectors with dynamic resolution (--image-min-tokens,
	// --image-max-tokens; 0: the file's values).
	ImageMinTokens, ImageMaxTokens int
	// MaxImagePixels bounds an image's width times height, checked before
	// it is decoded (0: mtmd.DefaultMaxPixels).
	MaxImagePixels int
}

// newMediaMarker makes the text that marks a medium's place in prompts
// (Server.mediaMarker); GET /props reports it as "media_marker". As in
// llama-server it is random, drawn once when the server starts, so that
// text a client sends cannot pass for a marker, unless $LLAMA_MEDIA_MARKER
// pins it. The projectors are loaded with it.
func newMediaMarker() string {
	if m := os.Getenv("LLAMA_MEDIA_MARKER"); m != "" {
		return m
	}
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, 32)
	for i := range b {
		b[i] = letters[rand.IntN(len(letters))]
	}
	return "<__media_" + string(b) + "__>"
}

// loadProjector loads o's projector for m, marking media with marker, or
// returns nil when none is set.
func loadProjector(ctx context.Context, m *llama.Model, o MultimodalOptions, marker string) (*mtmd.Projector, error) {
	if o.Projector == "" {
		return nil, nil
	}
	p, err := mtmd.LoadProjector(ctx, m, o.Projector, mtmd.ProjectorOptions{CPUOnly: o.CPUOnly, Marker: marker,
		ImageMinTokens: o.ImageMinTokens, ImageMaxTokens: o.ImageMaxTokens})
	if err != nil {
		return nil, fmt.Errorf("load multimodal projector: %w", err)
	}
	return p, nil
}

// errNoMultimodal is the 400 of a request with media to a model without a
// projector.
func errNoMultimodal(kind string) error {
	return &httpError{Status: http.StatusBadRequest, Type: "invalid_request_error",
		Msg: kind + " input is not supported - hint: if this is unexpected, you may need to provide the mmproj"}
}

// promptTokens tokenizes a rendered prompt: as tokenizePrompt when there
// are no media, else with the projector, setting t's multimodal prompt.
func (inst *instance) promptTokens(prompt string, media []wire.Media, t *engine.Request) ([]llama.Token, error) {
	if len(media) == 0 {
		return inst.tokenizePrompt(prompt)
	}
	p := inst.Projector
	if p == nil {
		return nil, errNoMultimodal(media[0].Kind)
	}
	ms := make([]*mtmd.Media, 0, len(media))
	defer func() {
		for _, m := range ms {
			m.Close()
		}
	}()
	for i, in := range media {
		if in.File != "" {
			data, err := inst.readMediaFile(in.File)
			if err != nil {
				return nil, badRequest("media %d: %v", i, err)
			}
			in.Data = data
		}
		m, err := p.NewMedia(in.Data, mtmd.MediaOptions{MaxPixels: inst.Opts.Multimodal.MaxImagePixels})
		if err != nil {
			var le *llama.Error
			if errors.As(err, &le) && le.Code == llama.CodeUnsupported {
				return nil, badRequest("media %d: %s input is not supported by this model (%s)", i, mtmd.Sniff(in.Data), le.Msg)
			}
			return nil, badRequest("media %d: %v", i, err)
		}
		ms = append(ms, m)
	}
	chunks, err := p.Tokenize(prompt, ms, mtmd.TokenizeOptions{AddSpecial: true, ParseSpecial: true})
	if err != nil {
		return nil, badRequest("cannot tokenize the prompt with its media: %v", err)
	}
	toks, mm, err := engine.NewMedia(p, chunks)
	if err != nil {
		return nil, badRequest("%v", err)
	}
	t.Media = mm
	return toks, nil
}

// completionMediaPrompt reads /completion's prompt object:
// {"prompt_string": "...", "multimodal_data": ["base64", ...]}, one
// medium per marker of the string.
func (inst *instance) completionMediaPrompt(raw json.RawMessage, t *engine.Request) ([]llama.Token, error) {
	var p struct {
		PromptString   *string           `json:"prompt_string"`
		MultimodalData []json.RawMessage `json:"multimodal_data"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, badRequest(`"prompt": %v`, err)
	}
	if p.PromptString == nil {
		return nil, badRequest(`"prompt" object needs a "prompt_string"`)
	}
	media := make([]wire.Media, 0, len(p.MultimodalData))
	for i, d := range p.MultimodalData {
		var s string
		if wire.Kind(d) != 's' || json.Unmarshal(d, &s) != nil {
			return nil, badRequest(`"multimodal_data"[%d] must be a base64 string`, i)
		}
		data, err := wire.Base64Data(s)
		if err != nil {
			return nil, badRequest(`"multimodal_data"[%d]: %v`, i, err)
		}
		kind := "media"
		if k := mtmd.Sniff(data); k != 0 {
			kind = k.String()
		}
		media = append(media, wire.Media{Data: data, Kind: kind})
	}
	if len(media) == 0 {
		return inst.tokenizePrompt(*p.PromptString)
	}
	return inst.promptTokens(*p.PromptString, media, t)
}

// readMediaFile reads the file of a file:// URL: a path relative to
// Options.MediaPath, which it may not leave (no "..", absolute paths or
// symbolic links out of it: os.Root), naming a regular file of at most
// the request body limit. It is opened without blocking (a FIFO would
// wait for a writer) and its type checked on the open file.
func (inst *instance) readMediaFile(name string) ([]byte, error) {
	dir := inst.Opts.MediaPath
	if dir == "" {
		return nil, errors.New("file:// URLs are not allowed unless --media-path (Options.MediaPath) is specified")
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, errors.New("the media folder cannot be opened")
	}
	defer root.Close()
	f, err := root.OpenFile(name, os.O_RDONLY|openNonblocking, 0)
	if err != nil {
		return nil, fmt.Errorf("file path is not allowed or does not exist: %q", name)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file: %q", name)
	}
	limit := inst.Opts.MaxBodyBytes
	if limit <= 0 {
		limit = defaultMaxBodySize
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("file %q is larger than %d bytes", name, limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %q: %v", name, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("file %q is larger than %d bytes", name, limit)
	}
	return b, nil
}
