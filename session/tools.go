package session

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/x/llama"
	"github.com/x/llama/chat"
	"github.com/x/llama/schema"
)

// MaxToolResult bounds the text of a tool's result that goes back to the
// model; a longer one is cut there.
const MaxToolResult = 64 << 10

// tool is a Go function the model may call.
type tool struct {
	decl chat.Tool
	run  func(ctx context.Context, args []byte) (string, error)
}

// AddTool offers the Go function fn to the model as tool name, in the
// manner of the MCP Go SDK's AddTool: the JSON Schema of its arguments
// comes from In (github.com/invopop/jsonschema, through package schema:
// fields by their json tags, required unless omitempty), which must be a
// struct or a map; a call's arguments are decoded into an In (unknown
// fields refused) and fn's Out goes back to the model as its result: a
// string as it is, anything else as JSON. An error from fn, or arguments
// that do not decode, go back to the model as the result ("error: ..."),
// and the turn goes on; a panic in fn ends the turn with a
// *llama.PanicError.
//
// A template with no tool-call format of its own refuses tools unless
// Options.ToolFormat is chat.FormatGeneric. Names are 1 to 64 letters,
// digits, '_' or '-', one tool each.
func AddTool[In, Out any](s *Session, name, description string, fn func(ctx context.Context, in In) (Out, error)) error {
	if fn == nil {
		return invalid("tool %q: nil function", name)
	}
	if err := checkName(name); err != nil {
		return err
	}
	if k := reflect.TypeFor[In]().Kind(); k != reflect.Struct && k != reflect.Map {
		return invalid("tool %q: arguments type %v is not a struct or a map (a call's arguments are a JSON object)", name, reflect.TypeFor[In]())
	}
	params, err := schema.For[In]()
	if err != nil {
		return err
	}
	t := tool{
		decl: chat.Tool{Name: name, Description: description, Parameters: params},
		run: func(ctx context.Context, args []byte) (string, error) {
			var in In
			dec := json.NewDecoder(bytes.NewReader(args))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&in); err != nil {
				return "", fmt.Errorf("invalid arguments: %w", err)
			}
			out, err := fn(ctx, in)
			if err != nil {
				return "", err
			}
			if str, ok := any(out).(string); ok {
				return str, nil
			}
			b, err := json.Marshal(out)
			if err != nil {
				return "", fmt.Errorf("result: %w", err)
			}
			return string(b), nil
		},
	}
	if !s.mu.TryLock() {
		return busy()
	}
	defer s.mu.Unlock()
	if s.tmpls.For(true).Format() == chat.FormatContentOnly && s.o.ToolFormat != chat.FormatGeneric {
		return invalid("tool %q: the chat template has no tool-call format; set Options.ToolFormat to chat.FormatGeneric to call tools in JSON", name)
	}
	for _, x := range s.tools {
		if x.decl.Name == name {
			return invalid("tool %q added twice", name)
		}
	}
	s.tools = append(s.tools, t)
	return nil
}

func checkName(name string) error {
	if name == "" || len(name) > 64 {
		return invalid("tool name %q: 1 to 64 characters", name)
	}
	for _, c := range name {
		if !(c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return invalid("tool name %q: only letters, digits, '_' and '-'", name)
		}
	}
	return nil
}

// call runs the call tc of the model's. Errors of the tool are the call's
// result; the error returned is a panic's.
func (s *Session) call(ctx context.Context, tc chat.ToolCall) (c Call, err error) {
	c = Call{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments}
	var t *tool
	for i := range s.tools {
		if s.tools[i].decl.Name == tc.Name {
			t = &s.tools[i]
		}
	}
	if t == nil {
		c.Err = fmt.Errorf("unknown tool %q", tc.Name)
	} else {
		func() {
			defer func() {
				if v := recover(); v != nil {
					err = llama.NewPanicError("session: tool "+tc.Name, v)
				}
			}()
			c.Result, c.Err = t.run(ctx, []byte(tc.Arguments))
		}()
		if err != nil {
			return c, err
		}
	}
	if c.Err != nil {
		c.Result = "error: " + c.Err.Error()
	}
	if len(c.Result) > MaxToolResult {
		c.Result = strings.ToValidUTF8(c.Result[:MaxToolResult], "")
	}
	return c, nil
}
