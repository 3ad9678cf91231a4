package wire

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/x/llama/chat"
)

// Media of chat messages, shared by the dialects' translators: OpenAI
// content parts, Anthropic image blocks and Responses input images become
// Media of the request, marked in the text by the server's media marker.

// MediaPart reads an OpenAI content part holding a medium: "image_url"
// with a data: URL, or "input_audio" with base64 data and a format.
func MediaPart(typ string, imageURL, inputAudio json.RawMessage) (Media, error) {
	switch typ {
	case "image_url":
		var u struct {
			URL string `json:"url"`
		}
		switch Kind(imageURL) {
		case 'o':
			if err := json.Unmarshal(imageURL, &u); err != nil {
				return Media{}, fmt.Errorf("image_url: %v", err)
			}
		case 's':
			_ = json.Unmarshal(imageURL, &u.URL)
		default:
			return Media{}, errors.New("image_url must be an object with a url")
		}
		if file, ok := strings.CutPrefix(u.URL, "file://"); ok {
			return Media{File: file, Kind: "image"}, CheckFilePath(file)
		}
		data, err := DataURL(u.URL)
		if err != nil {
			return Media{}, err
		}
		return Media{Data: data, Kind: "image"}, nil
	case "input_audio":
		var a struct {
			Data   string `json:"data"`
			Format string `json:"format"`
		}
		if Kind(inputAudio) != 'o' || json.Unmarshal(inputAudio, &a) != nil {
			return Media{}, errors.New("input_audio must be an object with data and format")
		}
		switch strings.ToLower(a.Format) {
		case "wav", "mp3", "flac":
		default:
			return Media{}, fmt.Errorf("input_audio format %q is not supported (wav, mp3 or flac)", a.Format)
		}
		if file, ok := strings.CutPrefix(a.Data, "file://"); ok {
			return Media{File: file, Kind: "audio"}, CheckFilePath(file)
		}
		data, err := Base64Data(a.Data)
		if err != nil {
			return Media{}, fmt.Errorf("input_audio data: %v", err)
		}
		return Media{Data: data, Kind: "audio"}, nil
	}
	return Media{}, fmt.Errorf("unsupported content type %q", typ)
}

// DataURL decodes a base64 data: URL. Other URLs are refused: the server
// does not fetch media (file:// URLs are read by the callers, from
// Options.MediaPath).
func DataURL(u string) ([]byte, error) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		if u == "" {
			return nil, errors.New("image_url has no url")
		}
		return nil, errors.New("image_url must be a data: URL (base64); the server does not download media")
	}
	meta, payload, ok := strings.Cut(rest, ",")
	if !ok || !strings.HasSuffix(meta, ";base64") {
		return nil, errors.New("image_url data: URL must be base64 encoded")
	}
	data, err := Base64Data(payload)
	if err != nil {
		return nil, fmt.Errorf("image_url data: %v", err)
	}
	return data, nil
}

func Base64Data(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("empty")
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		b, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "="))
	}
	if err != nil {
		return nil, errors.New("invalid base64")
	}
	return b, nil
}

// JoinParts is the text of parts joined with sep, built once: adding part
// after part to a string copies all of it each time, and a request may
// hold a million parts.
func JoinParts(parts []chat.ContentPart, sep string) string {
	var sb strings.Builder
	for i, p := range parts {
		if i > 0 {
			sb.WriteString(sep)
		}
		sb.WriteString(p.Text)
	}
	return sb.String()
}

// TextOrImage is a text or image part of a message being converted to
// package chat's types.
type TextOrImage struct {
	Text  string
	Image bool
	URL   string // a data: URL
}

// MediaMessage builds a message of parts that hold images, as the chat
// endpoint reads OpenAI content parts: each image is decoded, added to
// media and marked in the text by marker. at is the message's place
// in the converted conversation, which errors name.
func MediaMessage(role string, parts []TextOrImage, at int, media *[]Media, marker string) (chat.Message, error) {
	m := chat.Message{Role: role}
	for j, p := range parts {
		text := p.Text
		if p.Image {
			in := Media{Kind: "image"}
			if file, ok := strings.CutPrefix(p.URL, "file://"); ok {
				if err := CheckFilePath(file); err != nil {
					return m, Errorf("messages[%d].content[%d]: %v", at, j, err)
				}
				in.File = file
			} else {
				data, err := DataURL(p.URL)
				if err != nil {
					return m, Errorf("messages[%d].content[%d]: %v", at, j, err)
				}
				in.Data = data
			}
			*media = append(*media, in)
			text = marker
		}
		m.Parts = append(m.Parts, chat.ContentPart{Type: "text", Text: text})
	}
	m.Content = JoinParts(m.Parts, "")
	return m, nil
}

// CheckFilePath refuses a file:// URL without a path.
func CheckFilePath(file string) error {
	if file == "" {
		return errors.New("file:// URL without a file path")
	}
	return nil
}
