package wire

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDecode checks the typed decoding of bodies: names match
// exactly, null is absent, a wrong type is an error of the field (named)
// when it is read, an outer field shadows an embedded one of the same
// name, and only the body's shape fails the decode itself.
func TestDecode(t *testing.T) {
	type inner struct {
		A Opt[string] `json:"a"`
		B Num         `json:"b"`
	}
	type body struct {
		inner
		A    Opt[bool]       `json:"a"` // shadows inner.A
		S    Strs            `json:"s"`
		Raw  json.RawMessage `json:"raw"`
		Dots Num             `json:"x.y"`
	}
	for _, c := range []struct {
		name, body string
		check      func(t *testing.T, b *body)
		err        string // of the decode
	}{
		{"empty", ``, nil, "the request body is empty"},
		{"not an object", `[1]`, nil, "the request body must be a JSON object"},
		{"malformed", `{"a":`, nil, "malformed JSON"},
		{"absent", `{}`, func(t *testing.T, b *body) {
			assert.False(t, b.A.Set || b.inner.A.Set || b.B.Set || b.S.Set || b.Dots.Set)
			assert.Nil(t, b.Raw)
		}, ""},
		{"null is absent", `{"a":null,"b":null,"s":null,"raw":null}`, func(t *testing.T, b *body) {
			assert.False(t, b.A.Set || b.B.Set || b.S.Set)
			assert.Nil(t, b.Raw)
		}, ""},
		{"case-sensitive names", `{"A":true,"B":1,"X.Y":2}`, func(t *testing.T, b *body) {
			assert.False(t, b.A.Set || b.B.Set || b.Dots.Set)
		}, ""},
		{"shadowing", `{"a":true,"b":2.0}`, func(t *testing.T, b *body) {
			assert.True(t, b.A.Set && b.A.V)
			assert.False(t, b.inner.A.Set)
			n, err := b.B.Integer()
			require.NoError(t, err)
			assert.Equal(t, int64(2), n)
		}, ""},
		{"wrong types are the fields' errors", `{"a":"x","b":"y","s":[1],"x.y":1.5}`, func(t *testing.T, b *body) {
			var v bool
			assert.EqualError(t, b.A.Read(&v, "a boolean"), `"a" must be a boolean`)
			_, err := b.B.Float64()
			assert.EqualError(t, err, `"b" must be a number`)
			var ss []string
			assert.EqualError(t, b.S.Read(&ss), `"s" must be a string or an array of strings`)
			var n int
			assert.EqualError(t, b.Dots.Int(&n, 0, 10), `"x.y" must be an integer in range, got 1.5`)
		}, ""},
		{"a string is a list of one", `{"s":"one","raw":  [1, 2] }`, func(t *testing.T, b *body) {
			var ss []string
			require.NoError(t, b.S.Read(&ss))
			assert.Equal(t, []string{"one"}, ss)
			assert.Equal(t, `[1, 2]`, string(b.Raw))
		}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b body
			err := Decode([]byte(c.body), &b)
			if c.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.err)
				return
			}
			require.NoError(t, err)
			c.check(t, &b)
		})
	}
}

// FuzzDecode: no body makes decoding or reading its fields panic, and
// every error is an *Error.
func FuzzDecode(f *testing.F) {
	f.Add(`{"n":1.5,"s":["a"],"o":{"x":1},"p":2}`)
	f.Add(`{"n":"x","s":5,"o":[],"g":{"seed":1}}`)
	f.Add(`[1]`)
	f.Fuzz(func(t *testing.T, body string) {
		var b struct {
			N Num                    `json:"n"`
			S Strs                   `json:"s"`
			O Opt[map[string]any]    `json:"o"`
			R json.RawMessage        `json:"r"`
			G Opt[map[string]string] `json:"g"`
			Gen
		}
		isErr := func(err error) {
			if err != nil {
				var we *Error
				assert.ErrorAs(t, err, &we)
			}
		}
		if err := Decode([]byte(body), &b); err != nil {
			isErr(err)
			return
		}
		var n int
		var f float32
		var ss []string
		var m map[string]any
		isErr(b.N.Int(&n, -5, 5))
		isErr(b.N.Float(&f))
		isErr(b.S.Read(&ss))
		isErr(b.O.Read(&m, "an object"))
		for _, p := range b.Params {
			_, err := p.Integer()
			isErr(err)
		}
	})
}

// TestDecodeStrings checks the bounded decoder of string arrays: what
// json.Unmarshal reads into a []string it reads the same, and it stops at
// the first entry past max without decoding the rest.
func TestDecodeStrings(t *testing.T) {
	for _, c := range []struct {
		name, raw string
		want      []string
		err       error
	}{
		{"empty", `[]`, []string{}, nil},
		{"strings", ` ["a", "b\u00e9", ""] `, []string{"a", "bé", ""}, nil},
		{"null entry", `["a", null]`, []string{"a", ""}, nil},
		{"exactly max", `["a","b","c"]`, []string{"a", "b", "c"}, nil},
		{"past max", `["a","b","c","d"]`, nil, ErrTooMany},
		{"past max, bad after", `["a","b","c","d",5,`, nil, ErrTooMany},
		{"a number", `["a", 5]`, nil, errNotStrings},
		{"nested", `[["a"]]`, nil, errNotStrings},
		{"an object", `{"a": "b"}`, nil, errNotStrings},
		{"a string", `"a"`, nil, errNotStrings},
		{"unclosed", `["a"`, nil, errNotStrings},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := DecodeStrings([]byte(c.raw), 3)
			assert.Equal(t, c.err, err)
			assert.Equal(t, c.want, got)
			if c.err == nil {
				var std []string
				require.NoError(t, json.Unmarshal([]byte(c.raw), &std))
				assert.Equal(t, std, got)
			}
		})
	}
	// A 32 MiB array of one-letter strings is refused for what it holds
	// after MaxStrings entries, not decoded whole first (about 800 MiB).
	raw := []byte("[" + strings.Repeat(`"q",`, 8<<20) + `"q"]`)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var s Strs
	require.NoError(t, s.UnmarshalJSON(raw))
	runtime.ReadMemStats(&after)
	assert.True(t, s.Many)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "bytes allocated")
}

// TestShapeOf checks the count of an array's or object's entries (and an
// array's numbers) against decoding it, in cases that could trip a
// scanner: strings with brackets, commas and escaped quotes, nested
// values, literals and spaces.
func TestShapeOf(t *testing.T) {
	for _, raw := range []string{
		`[]`, `{}`, ` [ ] `, `[1]`, `[-1, 2.5e3, 0]`, `["a", 1, [2, 3], {"b": [4]}, null, true, false]`,
		`["[", "]", ",", "\"", "\\", "\\\"],"]`, `{"a": 1, "b": [1, 2], "c": {"d": ","}, "e\"": "}"}`,
		"[\n\t1 ,\r\n \"x\" ]", `[[[]], {}, ""]`, `{"a":{"b":{"c":[1,2,3]}}}`,
	} {
		t.Run(raw, func(t *testing.T) {
			sh := ShapeOf([]byte(raw))
			entries, numbers := sh.Entries, sh.Numbers
			containers, scalars := 0, 0
			dec := json.NewDecoder(strings.NewReader(raw))
			for {
				tok, err := dec.Token()
				if err != nil {
					break
				}
				switch tok {
				case json.Delim('['), json.Delim('{'):
					containers++
				case json.Delim(']'), json.Delim('}'):
				default:
					scalars++
				}
			}
			assert.Equal(t, containers, sh.Containers, "containers")
			assert.Equal(t, scalars, sh.Scalars, "scalars and keys")
			var arr []json.RawMessage
			if json.Unmarshal([]byte(raw), &arr) == nil {
				want := 0
				for _, it := range arr {
					if Kind(it) == 'n' {
						want++
					}
				}
				assert.Equal(t, len(arr), entries)
				assert.Equal(t, want, numbers)
				return
			}
			var obj map[string]json.RawMessage
			require.NoError(t, json.Unmarshal([]byte(raw), &obj))
			assert.Equal(t, len(obj), entries)
		})
	}
}

// TestShapeDepth checks the nesting ShapeOf reads: brackets in strings
// do not count.
func TestShapeDepth(t *testing.T) {
	for raw, want := range map[string]int{
		`"x"`: 0, `[]`: 1, `[[{"a": [1]}]]`: 4, `"[[["`: 0, `{"a": "]]]", "b": [[]]}`: 3, `["\"[", {}]`: 2,
	} {
		assert.Equal(t, want, ShapeOf([]byte(raw)).Depth, raw)
	}
}

// FuzzShapeOf checks ShapeOf's counts against decoding on any valid JSON
// array or object.
func FuzzShapeOf(f *testing.F) {
	for _, s := range []string{`[1, "a", [2], {"b": 3}]`, `{"a": "]", "b": [1, {"c": ","}]}`, `["\"", -1]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		sh := ShapeOf([]byte(raw))
		entries, numbers := sh.Entries, sh.Numbers
		var arr []json.RawMessage
		if json.Unmarshal([]byte(raw), &arr) == nil && arr != nil {
			want := 0
			for _, it := range arr {
				if Kind(it) == 'n' {
					want++
				}
			}
			if entries != len(arr) || numbers != want {
				t.Fatalf("%q: %d entries, %d numbers; decoded %d, %d", raw, entries, numbers, len(arr), want)
			}
			return
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal([]byte(raw), &obj) == nil && obj != nil && !hasDuplicateKeys(raw) && entries != len(obj) {
			t.Fatalf("%q: %d entries; decoded %d", raw, entries, len(obj))
		}
	})
}

// hasDuplicateKeys reports whether the object raw names a key twice
// (decoded, the keys merge; counted, they do not).
func hasDuplicateKeys(raw string) bool {
	dec := json.NewDecoder(strings.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return false
	}
	seen := map[string]bool{}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return false
		}
		s, _ := k.(string)
		if seen[s] {
			return true
		}
		seen[s] = true
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return false
		}
	}
	return false
}
