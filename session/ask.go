package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/x/llama"
	"github.com/x/llama/schema"
)

// Ask runs a turn whose answer is a T: the JSON Schema of T (package
// schema) becomes a grammar the model writes under, and its answer is
// decoded into a T. The turn offers no tools (a response format and tools
// do not mix, as in llama-server). The JSON text stays in the history as
// the assistant's message.
func Ask[T any](ctx context.Context, s *Session, text string) (T, error) {
	var v T
	sch, err := schema.For[T]()
	if err != nil {
		return v, err
	}
	reply, err := s.run(ctx, text, sch, func(Event) bool { return true })
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal([]byte(reply.Content), &v); err != nil {
		msg := fmt.Sprintf("the answer is not a %v", reflect.TypeFor[T]())
		var se *json.SyntaxError
		if errors.As(err, &se) && int(se.Offset) >= len(reply.Content) {
			msg = fmt.Sprintf("the answer stops before its %v is whole (MaxTokens too low?)", reflect.TypeFor[T]())
		}
		return v, &llama.Error{Code: llama.CodeInvalid, Op: "session", Msg: msg, Err: err}
	}
	return v, nil
}
