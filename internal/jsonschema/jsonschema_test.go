package jsonschema

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/x/llama/internal/gbnf"
)

type testCase struct {
	Name    string          `json:"name"`
	Schema  json.RawMessage `json:"schema"`
	Valid   []string        `json:"valid"`
	Invalid []string        `json:"invalid"`
}

func loadCases(t testing.TB) []testCase {
	data, err := os.ReadFile("testdata/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []testCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

func TestCases(t *testing.T) {
	cases := loadCases(t)
	if len(cases) < 40 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			g, err := ToGBNF(tc.Schema)
			if err != nil {
				t.Fatalf("ToGBNF: %v", err)
			}
			m, err := newMatcher(g)
			if err != nil {
				t.Fatalf("grammar does not parse: %v\n%s", err, g)
			}
			for _, v := range tc.Valid {
				ok, err := m.match(v)
				if err != nil {
					t.Fatalf("match %q: %v", v, err)
				}
				if !ok {
					t.Errorf("valid instance rejected: %s\n%s", v, g)
				}
			}
			for _, v := range tc.Invalid {
				ok, err := m.match(v)
				if err != nil {
					t.Fatalf("match %q: %v", v, err)
				}
				if ok {
					t.Errorf("invalid instance accepted: %s\n%s", v, g)
				}
			}
		})
	}
}

// The valid instances of the table must be valid JSON, and the grammar must
// be stable for the same input.
func TestCasesSanity(t *testing.T) {
	for _, tc := range loadCases(t) {
		for _, v := range tc.Valid {
			if !json.Valid([]byte(v)) {
				t.Errorf("%s: valid instance %q is not JSON", tc.Name, v)
			}
		}
		g1, err1 := ToGBNF(tc.Schema)
		g2, err2 := ToGBNF(tc.Schema)
		if g1 != g2 || (err1 == nil) != (err2 == nil) {
			t.Errorf("%s: output not deterministic", tc.Name)
		}
	}
}

const spaceLine = `space ::= | " " | "\n"{1,2} [ \t]{0,20}`

func TestGolden(t *testing.T) {
	tests := []struct{ schema, want string }{
		{`{"type":"boolean"}`, `
root ::= ("true" | "false")
` + spaceLine},
		{`{"type":"string","maxLength":3}`, `
char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
root ::= "\"" char{0,3} "\""
` + spaceLine},
		{`{"type":"integer","minimum":0,"maximum":23}`, `
root ::= ([0-9] | ([1] [0-9] | [2] [0-3]))
` + spaceLine},
		{`{"type":"integer","minimum":-123}`, `
root ::= ("-" ([0-9] | ([1-8] [0-9] | [9] [0-9]) | "1" ([0-1] [0-9] | [2] [0-3])) | [0] | [1-9] [0-9]{0,15})
` + spaceLine},
		{`{"type":"integer","maximum":30}`, `
root ::= ("-" [1-9] [0-9]{0,15} | [0-9] | ([1-2] [0-9] | [3] "0"))
` + spaceLine},
		{`{"enum":["red","amber",null,42,["foo"]]}`, `
root ::= ("\"red\"" | "\"amber\"" | "null" | "42" | "[\"foo\"]")
` + spaceLine},
		{`{"const":" \r \n \" \\ "}`, `
root ::= "\" \\r \\n \\\" \\\\ \""
` + spaceLine},
		{`{"items":{"type":"boolean"},"minItems":3,"maxItems":5}`, `
boolean ::= ("true" | "false")
root ::= "[" space boolean ("," space boolean){2,4} space "]"
` + spaceLine},
		{`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"},"c":{"type":"string"}},"additionalProperties":false}`, `
a-kv ::= "\"a\"" space ":" space string
a-rest ::= ( "," space b-kv )? b-rest
b-kv ::= "\"b\"" space ":" space string
b-rest ::= ( "," space c-kv )?
c-kv ::= "\"c\"" space ":" space string
char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
root ::= "{" space  (a-kv a-rest | b-kv b-rest | c-kv )? space "}"
` + spaceLine + `
string ::= "\"" char* "\""`},
		{`{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"string"},"d":{"type":"string"},"c":{"type":"string"}},"required":["a","b"],"additionalProperties":false}`, `
a-kv ::= "\"a\"" space ":" space string
b-kv ::= "\"b\"" space ":" space string
c-kv ::= "\"c\"" space ":" space string
char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
d-kv ::= "\"d\"" space ":" space string
d-rest ::= ( "," space c-kv )?
root ::= "{" space b-kv "," space a-kv ( "," space ( d-kv d-rest | c-kv ) )? space "}"
` + spaceLine + `
string ::= "\"" char* "\""`},
		{`{"type":"string","pattern":"^abc?d*efg+(hij)?kl$"}`, `
root ::= "\"" ("ab" "c"? "d"* "ef" "g"+ ("hij")? "kl") "\""
` + spaceLine},
		{`{"$ref":"#/definitions/foo","definitions":{"foo":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}}}`, `
char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
ref-definitions-foo ::= "{" space ref-definitions-foo-a-kv space "}"
ref-definitions-foo-a-kv ::= "\"a\"" space ":" space string
root ::= ref-definitions-foo
` + spaceLine + `
string ::= "\"" char* "\""`},
		{`{"type":["array","null"],"items":{"type":"string"}}`, `
alternative-0 ::= "[" space (string ("," space string)*)? space "]"
char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
null ::= "null"
root ::= alternative-0 | null
` + spaceLine + `
string ::= "\"" char* "\""`},
	}
	for _, tt := range tests {
		got, err := ToGBNF([]byte(tt.schema))
		if err != nil {
			t.Errorf("%s: %v", tt.schema, err)
			continue
		}
		if strings.TrimSpace(got) != strings.TrimSpace(tt.want) {
			t.Errorf("%s:\ngot:\n%s\nwant:\n%s", tt.schema, got, strings.TrimSpace(tt.want))
		}
	}
}

func TestErrors(t *testing.T) {
	tests := []struct{ schema, pointer, contains string }{
		{`{"type":"kaboom"}`, "/type", "unknown type"},
		{`{"type":123}`, "/type", "type must be"},
		{`{"$ref":"https://example.com/schema.json"}`, "/$ref", "remote $ref"},
		{`{"properties":{"a":{"$ref":"other.json#/x"}}}`, "/properties/a/$ref", "remote $ref"},
		{`{"$ref":"#/$defs/missing"}`, "/$ref", "not found"},
		{`{"type":"object","properties":{"foo":{"type":"string","pattern":"^(?=a)b$"}}}`, "/properties/foo/pattern", "pattern"},
		{`{"type":"string","pattern":"^(a$"}`, "/pattern", "pattern"},
		{`{"type":"string","pattern":"^a\\bb$"}`, "/pattern", "word boundaries"},
		{`{"type":"string","pattern":"^a^b$"}`, "/pattern", "anchors"},
		{`{"not":{"type":"string"}}`, "/not", "not supported"},
		{`{"properties":{"x":{"if":{},"then":{}}}}`, "/properties/x/if", "not supported"},
		{`{"type":"object","patternProperties":{"^a":{}}}`, "/patternProperties", "not supported"},
		{`{"items":{"contains":{"type":"string"}}}`, "/items/contains", "not supported"},
		{`false`, "", "matches nothing"},
		{`{"enum":[]}`, "/enum", "no enum value"},
		{`{"type":"integer","minimum":10,"maximum":5}`, "", "no integer"},
		{`{"type":"string","minLength":5,"maxLength":2}`, "", "minLength"},
		{`{"type":"string","minLength":-1}`, "/minLength", "non-negative"},
		{`{"anyOf":[]}`, "/anyOf", "non-empty"},
		{`{"allOf":[{"type":"string"},{"type":"integer"}]}`, "/allOf/1/type", "incompatible types"},
		{`{"allOf":[{"pattern":"^a$"},{"pattern":"^b$"}]}`, "/allOf/1/pattern", "different pattern"},
		{`{"$defs":{"a":{"allOf":[{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}`, "/$defs/a/allOf/0/$ref", "cyclic"},
		{`{"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}},"$ref":"#/$defs/a"}`, "", "left-recursive"},
		{`{"type":"object","properties":{"a":{}},"required":["b"],"additionalProperties":false}`, "/required/0", "forbidden"},
		{`{"properties":{"a":{"type":"string","enum":[1,2]}}}`, "/properties/a/enum", "no enum value"},
		{`[1,2]`, "", "must be an object or a boolean"},
		{`{"type":"string"`, "", "invalid JSON"},
	}
	for _, tt := range tests {
		_, err := ToGBNF([]byte(tt.schema))
		var se *SchemaError
		if !errors.As(err, &se) {
			t.Errorf("%s: want a *SchemaError, got %v", tt.schema, err)
			continue
		}
		if se.Pointer != tt.pointer || !strings.Contains(err.Error(), tt.contains) {
			t.Errorf("%s: got pointer %q, error %q; want pointer %q containing %q", tt.schema, se.Pointer, err, tt.pointer, tt.contains)
		}
	}
}

func TestBuilder(t *testing.T) {
	b := NewBuilder()
	weather, err := b.AddSchema("weather", []byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`))
	if err != nil {
		t.Fatal(err)
	}
	search, err := b.AddSchema("search", []byte(`{"type":"object","properties":{"q":{"type":"string"},"n":{"type":"integer","minimum":1,"maximum":10}},"required":["q"]}`))
	if err != nil {
		t.Fatal(err)
	}
	// a failing schema leaves the builder as it was
	before := b.Grammar("x")
	if _, err := b.AddSchema("bad", []byte(`{"properties":{"a":{"type":"string"}},"not":{}}`)); err == nil {
		t.Fatal("want an error")
	}
	if b.Grammar("x") != before {
		t.Fatal("failed AddSchema changed the builder")
	}
	call := func(name, args string) string {
		return Literal(`{"name": "`+name+`", "arguments": `) + " " + args + ` "}"`
	}
	c1 := b.AddRule("call", call("weather", weather))
	c2 := b.AddRule("call", call("search", search))
	if c1 == c2 {
		t.Fatalf("AddRule did not make the name unique: %s", c1)
	}
	if again := b.AddRule("call", call("weather", weather)); again != c1 {
		t.Fatalf("same body under same name should reuse %s, got %s", c1, again)
	}
	top := b.AddRule("tool-call", `"<tool_call>" (`+c1+" | "+c2+`) "</tool_call>"`)
	g := b.Grammar(top)
	if !strings.Contains(g, "root ::= "+top+"\n") {
		t.Fatalf("no root line:\n%s", g)
	}
	m, err := newMatcher(g)
	if err != nil {
		t.Fatalf("%v\n%s", err, g)
	}
	for _, s := range []string{
		`<tool_call>{"name": "weather", "arguments": {"city":"Paris"}}</tool_call>`,
		`<tool_call>{"name": "search", "arguments": {"q":"go","n":3}}</tool_call>`,
	} {
		if ok, err := m.match(s); !ok || err != nil {
			t.Errorf("rejected %s (%v)\n%s", s, err, g)
		}
	}
	for _, s := range []string{
		`<tool_call>{"name": "weather", "arguments": {"q":"go"}}</tool_call>`,
		`<tool_call>{"name": "search", "arguments": {"q":"go","n":11}}</tool_call>`,
	} {
		if ok, _ := m.match(s); ok {
			t.Errorf("accepted %s", s)
		}
	}
}

func TestLiteral(t *testing.T) {
	for in, want := range map[string]string{
		`abc`:      `"abc"`,
		`a"b`:      `"a\"b"`,
		`a\b`:      `"a\\b"`,
		"l1\nl2\r": `"l1\nl2\r"`,
		"\x01\x7f": `"\x01\x7F"`,
		"é":        `"é"`,
		"":         `""`,
	} {
		if got := Literal(in); got != want {
			t.Errorf("Literal(%q) = %s, want %s", in, got, want)
		}
		m, err := newMatcher("root ::= " + Literal(in))
		if err != nil {
			t.Fatal(err)
		}
		if ok, _ := m.match(in); !ok {
			t.Errorf("Literal(%q) does not match itself", in)
		}
	}
}

func FuzzToGBNF(f *testing.F) {
	for _, tc := range loadCases(f) {
		f.Add([]byte(tc.Schema))
	}
	for _, s := range []string{
		`{}`, `true`, `false`, `null`, `[]`, `{"type":"string","pattern":"^(a|b)*$"}`,
		`{"$ref":"#"}`, `{"$ref":"#/a/0"}`, `{"allOf":[{"anyOf":[{},{}]},{"anyOf":[{},{}]}]}`,
		`{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991}`,
		`{"type":"string","pattern":"^[^\\x00-\\x{10FFFF}]$"}`, `{"type":"array","prefixItems":[{}],"minItems":3}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// A runaway conversion is caught by the fuzz run's -timeout; speed
		// is measured by benchmarks, not asserted here.
		g, err := ToGBNF(data)
		if err != nil {
			return
		}
		if _, err := parseGBNF(g); err != nil {
			t.Fatalf("invalid grammar for %q: %v\n%s", data, err, g)
		}
		// The SDK's parser (llama.cpp's rules, and the bounds that keep it
		// from crashing) accepts it too.
		if _, err := gbnf.Parse(g, "root"); err != nil {
			t.Fatalf("grammar for %q refused by gbnf: %v\n%s", data, err, g)
		}
	})
}
