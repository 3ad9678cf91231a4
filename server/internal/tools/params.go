package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Typed tool inputs, in the manner of the MCP go-sdk's AddTool[In, Out]:
// a built-in tool's arguments are a Go struct, and both the JSON Schema
// that GET /tools advertises and the decoding of a call's "params" come
// from it. A field's tags say:
//
//	json:"name"        its parameter name
//	desc:"..."         its description in the schema
//	required:"true"    a call without it is refused (400)
//	default:"..."      its value when the call leaves it out (strings,
//	                   integers and booleans)
//
// Fields are strings, integers, booleans or slices of such structs. The
// decoding is llama-server's json_value: a required string that is
// missing or not a string is refused (400), an optional field of the
// wrong type takes its default, integers are clamped to ±2^31, and a
// slice that is not an array is left nil for the tool to judge.
//
// The schema is built as the map the hand-written definitions used to
// be, so its JSON is the same, byte for byte (the properties in the order
// of their names, "required" in the order of the fields).

// addTool makes a built-in tool whose input is In.
func addTool[In any](t tool, description string, run func(ctx context.Context, c *call, in In) (any, error)) *tool {
	var zero In
	typ := reflect.TypeOf(zero)
	t.definition = map[string]any{
		"type":     "function",
		"function": map[string]any{"name": t.name, "description": description, "parameters": objectSchema(typ)},
	}
	t.invoke = func(ctx context.Context, c *call, p toolParams) (any, error) {
		var in In
		if err := decodeParams(p, reflect.ValueOf(&in).Elem()); err != nil {
			return nil, err
		}
		return run(ctx, c, in)
	}
	return &t
}

// paramField is one parameter of an input struct.
type paramField struct {
	index    int
	name     string
	desc     string
	required bool
	def      string
}

func paramFields(typ reflect.Type) []paramField {
	var out []paramField
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		out = append(out, paramField{index: i, name: name, desc: f.Tag.Get("desc"),
			required: f.Tag.Get("required") == "true", def: f.Tag.Get("default")})
	}
	return out
}

// objectSchema is the JSON Schema of the struct type typ.
func objectSchema(typ reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	for _, f := range paramFields(typ) {
		props[f.name] = fieldSchema(typ.Field(f.index).Type, f.desc)
		if f.required {
			required = append(required, f.name)
		}
	}
	s := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func fieldSchema(typ reflect.Type, desc string) map[string]any {
	s := map[string]any{"description": desc}
	switch typ.Kind() {
	case reflect.String:
		s["type"] = "string"
	case reflect.Int:
		s["type"] = "integer"
	case reflect.Bool:
		s["type"] = "boolean"
	case reflect.Slice:
		s["type"] = "array"
		s["items"] = objectSchema(typ.Elem())
	default:
		panic("tools: unsupported parameter type " + typ.String())
	}
	return s
}

// decodeParams fills the struct v from p.
func decodeParams(p toolParams, v reflect.Value) error {
	for _, f := range paramFields(v.Type()) {
		fv := v.Field(f.index)
		raw, present := p[f.name]
		switch fv.Kind() {
		case reflect.String:
			s, ok := raw.(string)
			switch {
			case f.required && (!present || raw == nil):
				return errToolParams("missing parameter %q", f.name)
			case f.required && !ok:
				return errToolParams("parameter %q must be a string", f.name)
			case !ok:
				s = f.def
			}
			fv.SetString(s)
		case reflect.Int:
			n, ok := jsonInt(raw)
			if !ok {
				n, _ = strconv.Atoi(f.def)
			}
			fv.SetInt(int64(n))
		case reflect.Bool:
			b, ok := raw.(bool)
			if !ok {
				b = f.def == "true"
			}
			fv.SetBool(b)
		case reflect.Slice:
			if f.required && !present {
				return errToolParams("missing parameter %q", f.name)
			}
			items, ok := raw.([]any)
			if !ok {
				continue
			}
			s := reflect.MakeSlice(fv.Type(), len(items), len(items))
			for i, it := range items {
				m, ok := it.(map[string]any)
				if !ok {
					return errToolParams("%s[%d] must be an object", f.name, i)
				}
				if err := decodeParams(toolParams(m), s.Index(i)); err != nil {
					return err
				}
			}
			fv.Set(s)
		default:
			return fmt.Errorf("tools: unsupported parameter type %s", fv.Type())
		}
	}
	return nil
}

// jsonInt reads a JSON integer (a json.Number), clamped to ±2^31.
func jsonInt(v any) (int, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	if err != nil {
		return 0, false
	}
	const limit = 1 << 31
	return int(min(max(i, -limit), limit)), true
}
