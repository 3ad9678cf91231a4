package session

import (
	"context"
	"encoding/json"
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
		return v, &llama.Error{Code: llama.CodeInvalid, Op: "session", Msg: fmt.Sprintf("the answer is not a %v: %v", reflect.TypeFor[T](), err), Err: err}
	}
	return v, nil
}
