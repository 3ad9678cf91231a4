package tools

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBuiltinDefinitions checks the tools' definitions, now built from
// their input types, against the JSON that GET /tools served when they
// were written by hand (testdata/builtin_tools.json, recorded before the
// change): byte for byte.
func TestBuiltinDefinitions(t *testing.T) {
	want, err := os.ReadFile("testdata/builtin_tools.json")
	require.NoError(t, err)
	var cards []Card
	for _, tl := range builtinTools() {
		cards = append(cards, tl.card())
	}
	got, err := json.MarshalIndent(cards, "", "  ")
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got)+"\n")
}

// TestBuiltinDescriptionsStateLimits keeps the limits written in the
// input types' descriptions equal to the constants that apply them.
func TestBuiltinDescriptionsStateLimits(t *testing.T) {
	for _, tc := range []struct {
		typ   reflect.Type
		field string
		want  []string
	}{
		{reflect.TypeOf(fileGlobSearchIn{}), "limit", []string{fmt.Sprintf("at most %d (default %d)", fileSearchMaxResults, fileSearchMaxResults)}},
		{reflect.TypeOf(execShellCommandIn{}), "timeout", []string{fmt.Sprintf("max %d", execMaxTimeout)}},
		{reflect.TypeOf(execShellCommandIn{}), "max_output_size", []string{fmt.Sprintf("default %d", execMaxOutput)}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			for _, f := range paramFields(tc.typ) {
				if f.name == tc.field {
					for _, w := range tc.want {
						assert.Contains(t, f.desc, w)
					}
					if f.def != "" && tc.field != "timeout" {
						assert.Contains(t, f.desc, f.def, "the description states the default")
					}
					return
				}
			}
			t.Fatalf("no field %s", tc.field)
		})
	}
}

// TestDecodeParams checks the decoding rules of typed inputs, which are
// llama-server's json_value: required strings refused when missing or
// mistyped, optional fields falling back to their default.
func TestDecodeParams(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params string
		into   any
		want   any
		err    string
	}{
		{"defaults", `{"path":"a"}`, &readFileIn{}, &readFileIn{Path: "a", StartLine: 1, EndLine: -1}, ""},
		{"values", `{"path":"a","start_line":3,"end_line":4,"append_loc":true}`, &readFileIn{}, &readFileIn{Path: "a", StartLine: 3, EndLine: 4, AppendLoc: true}, ""},
		{"mistyped optional takes the default", `{"path":"a","start_line":"3","append_loc":1}`, &readFileIn{}, &readFileIn{Path: "a", StartLine: 1, EndLine: -1}, ""},
		{"fraction takes the default", `{"path":"a","start_line":2.5}`, &readFileIn{}, &readFileIn{Path: "a", StartLine: 1, EndLine: -1}, ""},
		{"huge integer clamped", `{"path":"a","end_line":99999999999}`, &readFileIn{}, &readFileIn{Path: "a", StartLine: 1, EndLine: 1 << 31}, ""},
		{"missing required", `{}`, &readFileIn{}, nil, `missing parameter "path"`},
		{"null required", `{"path":null}`, &readFileIn{}, nil, `missing parameter "path"`},
		{"mistyped required", `{"path":7}`, &readFileIn{}, nil, `parameter "path" must be a string`},
		{"string default", `{"path":"."}`, &fileGlobSearchIn{}, &fileGlobSearchIn{Path: ".", Include: "**", Type: "file", Limit: 100}, ""},
		{"nested", `{"path":"f","edits":[{"old_text":"a","new_text":"b"}]}`, &editFileIn{}, &editFileIn{Path: "f", Edits: []editSpec{{"a", "b"}}}, ""},
		{"nested missing", `{"path":"f","edits":[{"old_text":"a"}]}`, &editFileIn{}, nil, `missing parameter "new_text"`},
		{"nested not an object", `{"path":"f","edits":[1]}`, &editFileIn{}, nil, "edits[0] must be an object"},
		{"slice missing", `{"path":"f"}`, &editFileIn{}, nil, `missing parameter "edits"`},
		{"slice mistyped left for the tool", `{"path":"f","edits":"x"}`, &editFileIn{}, &editFileIn{Path: "f"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dec := json.NewDecoder(strings.NewReader(tc.params))
			dec.UseNumber()
			var p toolParams
			require.NoError(t, dec.Decode(&p))
			err := decodeParams(p, reflect.ValueOf(tc.into).Elem())
			if tc.err != "" {
				var te *Error
				require.ErrorAs(t, err, &te)
				assert.Equal(t, 400, te.Status)
				assert.Equal(t, tc.err, te.Msg)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, tc.into)
		})
	}
}

// FuzzDecodeParams decodes any JSON object into every built-in tool's
// input: it never panics, and refuses only with a 400.
func FuzzDecodeParams(f *testing.F) {
	for _, s := range []string{`{}`, `{"path":"a","start_line":3}`, `{"edits":[{"old_text":"a","new_text":1}],"path":"x"}`,
		`{"edits":[[]],"path":"x"}`, `{"path":null,"limit":1e400}`, `{"timeout":-9223372036854775809}`} {
		f.Add(s)
	}
	types := []reflect.Type{reflect.TypeOf(readFileIn{}), reflect.TypeOf(fileGlobSearchIn{}), reflect.TypeOf(grepSearchIn{}),
		reflect.TypeOf(execShellCommandIn{}), reflect.TypeOf(writeFileIn{}), reflect.TypeOf(editFileIn{}), reflect.TypeOf(getInfoIn{})}
	f.Fuzz(func(t *testing.T, s string) {
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		var p toolParams
		if dec.Decode(&p) != nil {
			return
		}
		for _, typ := range types {
			err := decodeParams(p, reflect.New(typ).Elem())
			if err != nil {
				var te *Error
				require.ErrorAs(t, err, &te)
				require.Equal(t, 400, te.Status)
			}
		}
	})
}
