package server

// Slot files: POST /slots/{id}?action=save|restore|erase. The file is
// written and read by Go, not by llama.cpp, so that:
//
//   - it is read without following a symbolic link (O_NOFOLLOW) and
//     without blocking on a FIFO (O_NONBLOCK), and written under an
//     exclusive temporary name renamed over it; it must be a regular file
//     in the slot folder (names are plain file names, see slotNameError);
//   - errors name the client's file name, never a server path;
//   - a malformed file is an error, never an abort in llama.cpp (which
//     asserts on some malformed files);
//   - the file work happens outside the engine loop, which only copies
//     the slot's state in or out.
//
// The format is llama.cpp's sequence state file (llama_state_seq_save_file):
// the magic "ggsq" and version as uint32, the token count as uint32, the
// tokens as int32, then the sequence state; all little-endian. Files are
// interchangeable with llama-server's.
//
// An action on a slot that is processing a task waits for it to go idle
// (as llama-server defers it), at most engine.SlotWaitTimeout; then it is a 409.

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/x/llama"
)

// slotNameError checks a slot file name as a client gives it: a plain,
// visible file name. Besides what validSlotFilename refuses (separators,
// "..", control characters, invalid UTF-8, more than 255 bytes), it
// refuses names of only spaces, names starting or ending with a space,
// and format characters (bidirectional overrides, zero-width characters,
// the byte order mark), which make a name display as another.
func slotNameError(name string) error {
	if strings.TrimSpace(name) == "" {
		return badRequest("Invalid filename: it is empty or only spaces")
	}
	if !utf8.ValidString(name) {
		return badRequest("Invalid filename: it is not valid UTF-8")
	}
	if strings.TrimSpace(name) != name {
		return badRequest("Invalid filename: it starts or ends with a space")
	}
	for _, r := range name {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError ||
			r == '\u2028' || r == '\u2029' || r == '\uFF0F' || r == '\u2215' || r == '\u29F8' {
			return badRequest("Invalid filename: it holds the control or format character %U", r)
		}
	}
	if !validSlotFilename(name) {
		return badRequest("Invalid filename")
	}
	return nil
}

// slotFileError turns an error of opening, reading or writing the slot
// file name into a response that names only name.
func slotFileError(err error, name, doing string) error {
	switch {
	case errors.Is(err, os.ErrNotExist):
		return badRequest("Unable to %s slot: file %q not found", doing, name)
	case errors.Is(err, syscall.ELOOP):
		return badRequest("Unable to %s slot: %q is a symbolic link", doing, name)
	case errors.Is(err, syscall.EISDIR):
		return badRequest("Unable to %s slot: %q is a directory", doing, name)
	case errors.Is(err, syscall.ENXIO), errors.Is(err, syscall.EAGAIN):
		return badRequest("Unable to %s slot: %q is not a regular file", doing, name)
	case errors.Is(err, os.ErrPermission):
		return &httpError{Status: http.StatusForbidden, Type: errPermission, Msg: fmt.Sprintf("Unable to %s slot: %q is not accessible", doing, name)}
	}
	var he *httpError
	if errors.As(err, &he) {
		return he
	}
	return &httpError{Status: http.StatusInternalServerError, Type: errServer, Msg: fmt.Sprintf("Unable to %s slot: file %q failed", doing, name), Err: err}
}

// slotError is the answer to a failed slot action on the file name: a
// 409 for a slot that stayed busy, 400s for the client's mistakes, and
// messages that never show a server path.
func slotError(err error, name, action string) error {
	var he *httpError
	switch {
	case errors.As(err, &he):
		return he
	case errors.Is(err, llama.ErrClosed):
		return unavailable("server is shutting down")
	case errors.Is(err, llama.ErrInvalid):
		return badRequest("%v", err)
	}
	return slotFileError(err, name, action)
}
