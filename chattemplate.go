package llama

import (
	"runtime"
	"strings"
	"unsafe"

	"github.com/x/llama/internal/capi"
)

// ChatMessage is a role and its text, for ApplyChatTemplate.
type ChatMessage struct {
	Role    string
	Content string
}

// BuiltinChatTemplates returns the names of llama.cpp's built-in chat
// formats (chatml, llama2, llama3, mistral-v7, phi3, gemma, ...), which
// ApplyChatTemplate renders without Jinja.
func BuiltinChatTemplates() ([]string, error) {
	if err := ensureInit(); err != nil {
		return nil, err
	}
	n := capi.ChatBuiltinTemplates(nil, 0)
	if n <= 0 {
		return nil, nil
	}
	ptrs := make([]unsafe.Pointer, n)
	n = capi.ChatBuiltinTemplates(unsafe.Pointer(&ptrs[0]), uintptr(len(ptrs)))
	out := make([]string, 0, n)
	for _, p := range ptrs[:n] {
		out = append(out, capi.GoString(p))
	}
	return out, nil
}

// ApplyChatTemplate formats messages with one of llama.cpp's built-in chat
// formats, named (see BuiltinChatTemplates) or detected from a template's
// source text, as llama_chat_apply_template does; addAssistant ends the
// prompt with the assistant's turn opening. It is the fallback for models
// whose Jinja template cannot be used; package chat renders Jinja, and its
// ForModel gives a model's templates as llama-server picks them (Jinja,
// or this function for the built-in formats).
func ApplyChatTemplate(tmpl string, msgs []ChatMessage, addAssistant bool) (string, error) {
	if err := ensureInit(); err != nil {
		return "", err
	}
	if tmpl == "" || strings.IndexByte(tmpl, 0) >= 0 {
		return "", errorf(CodeInvalid, "chat template", "empty template name or NUL byte")
	}
	cs := make([][]byte, 0, 2*len(msgs))
	cm := make([]capi.ChatMessage, len(msgs)+1)
	total := 0
	for i, m := range msgs {
		if strings.IndexByte(m.Role, 0) >= 0 || strings.IndexByte(m.Content, 0) >= 0 {
			return "", errorf(CodeInvalid, "chat template", "message %d has a NUL byte", i)
		}
		r := append([]byte(m.Role), 0)
		c := append([]byte(m.Content), 0)
		cs = append(cs, r, c)
		cm[i] = capi.ChatMessage{Role: uintptr(unsafe.Pointer(&r[0])), Content: uintptr(unsafe.Pointer(&c[0]))}
		total += len(m.Role) + len(m.Content)
	}
	buf := make([]byte, 2*total+256)
	for {
		n := capi.ChatApplyTemplate(tmpl, unsafe.Pointer(&cm[0]), uintptr(len(msgs)), addAssistant, unsafe.Pointer(&buf[0]), int32(len(buf)))
		runtime.KeepAlive(cs)
		if n < 0 {
			return "", errorf(CodeUnsupported, "chat template", "llama.cpp does not know the template %q", truncate(tmpl, 40))
		}
		if int(n) <= len(buf) {
			return string(buf[:n]), nil
		}
		buf = make([]byte, n)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
