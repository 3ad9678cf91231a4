package jsonschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/x/llama/internal/jsonesc"
)

// object is a JSON object that remembers the order of its keys (property
// order matters for the generated grammar).
type object struct {
	keys []string
	vals map[string]any
}

func (o *object) get(k string) (any, bool) {
	if o == nil {
		return nil, false
	}
	v, ok := o.vals[k]
	return v, ok
}

func (o *object) has(k string) bool {
	_, ok := o.get(k)
	return ok
}

func (o *object) set(k string, v any) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func (o *object) clone() *object {
	c := &object{keys: append([]string(nil), o.keys...), vals: make(map[string]any, len(o.vals))}
	for k, v := range o.vals {
		c.vals[k] = v
	}
	return c
}

func (o *object) without(ks ...string) *object {
	c := &object{vals: map[string]any{}}
	for _, k := range o.keys {
		skip := false
		for _, x := range ks {
			if k == x {
				skip = true
			}
		}
		if !skip {
			c.set(k, o.vals[k])
		}
	}
	return c
}

func newObject() *object { return &object{vals: map[string]any{}} }

// parseJSON decodes a JSON document into nil, bool, json.Number, string,
// []any and *object values.
func parseJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}

// maxJSONNesting bounds the nesting of arrays and objects in a schema
// document, so that parsing it needs a bounded stack.
const maxJSONNesting = 1000

func parseValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxJSONNesting {
		return nil, fmt.Errorf("arrays and objects nested more than %d deep", maxJSONNesting)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := newObject()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key is not a string")
				}
				v, err := parseValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				o.set(k, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return o, nil
		case '[':
			a := []any{}
			for dec.More() {
				v, err := parseValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return a, nil
		}
		return nil, fmt.Errorf("unexpected delimiter %v", t)
	default:
		return tok, nil
	}
}

// jsonEscapeRune appends the canonical JSON string encoding of r.
func jsonEscapeRune(sb *strings.Builder, r rune) { jsonesc.Rune(sb, r) }

// jsonString returns the canonical (compact) JSON encoding of s, quotes included.
func jsonString(s string) string {
	var sb strings.Builder
	sb.WriteByte('"')
	for _, r := range s {
		jsonEscapeRune(&sb, r)
	}
	sb.WriteByte('"')
	return sb.String()
}

// dumpJSON serializes v compactly, keeping object key order and number text.
func dumpJSON(v any) string {
	var sb strings.Builder
	dumpTo(&sb, v)
	return sb.String()
}

func dumpTo(sb *strings.Builder, v any) {
	switch t := v.(type) {
	case nil:
		sb.WriteString("null")
	case bool:
		sb.WriteString(strconv.FormatBool(t))
	case json.Number:
		sb.WriteString(t.String())
	case string:
		sb.WriteString(jsonString(t))
	case []any:
		sb.WriteByte('[')
		for i, x := range t {
			if i > 0 {
				sb.WriteByte(',')
			}
			dumpTo(sb, x)
		}
		sb.WriteByte(']')
	case *object:
		sb.WriteByte('{')
		for i, k := range t.keys {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(jsonString(k))
			sb.WriteByte(':')
			dumpTo(sb, t.vals[k])
		}
		sb.WriteByte('}')
	default:
		sb.WriteString("null")
	}
}

// jsonType names the JSON Schema type of a value ("integer" for integral numbers).
func jsonType(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		if f, err := t.Float64(); err == nil && f == float64(int64(f)) && !strings.ContainsAny(t.String(), ".eE") {
			return "integer"
		}
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case *object:
		return "object"
	}
	return ""
}

// escapePointerToken escapes a JSON pointer reference token.
func escapePointerToken(s string) string {
	s = strings.ReplaceAll(s, "~", "~0")
	return strings.ReplaceAll(s, "/", "~1")
}
