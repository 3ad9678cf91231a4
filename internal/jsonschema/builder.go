// Package jsonschema converts JSON Schemas to GBNF grammars for llama.cpp.
//
// The conversion follows llama.cpp's common/json-schema-to-grammar.cpp:
// the same primitive rules, the same whitespace rule, the same object layout
// (required properties in declaration order, then any subset of the optional
// ones in declaration order, then additional properties) and the same
// conventions, notably: an object schema with "properties" but without
// "additionalProperties" accepts no extra keys, and a tuple ("prefixItems")
// without "items" has exactly its listed items.
//
// Where llama.cpp silently degrades, this package returns a *SchemaError
// naming the offending part with a JSON pointer: remote $ref, unresolvable
// $ref, patterns that cannot be translated, unknown types, unsatisfiable
// constraints, and the keywords not, if/then/else, patternProperties,
// dependentSchemas, dependencies and contains.
//
// Keywords that only narrow a value in ways a grammar does not express are
// ignored, as llama.cpp does: minimum/maximum on "number", multipleOf,
// uniqueItems, minProperties/maxProperties, unknown formats, and annotations.
// "oneOf" is treated as "anyOf".
package jsonschema

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// SchemaError reports a part of a schema that cannot be converted.
type SchemaError struct {
	// Pointer is the JSON pointer (RFC 6901) of the offending part, "" for the whole schema.
	Pointer string
	Msg     string
}

// Error formats the error with the JSON pointer of the schema part.
func (e *SchemaError) Error() string {
	p := e.Pointer
	if p == "" {
		p = "(root)"
	}
	return fmt.Sprintf("jsonschema: at %s: %s", p, e.Msg)
}

const spaceRule = `| " " | "\n"{1,2} [ \t]{0,20}`

type builtinRule struct {
	content string
	deps    []string
}

var primitiveRules = map[string]builtinRule{
	"boolean":       {`("true" | "false")`, nil},
	"decimal-part":  {`[0-9]{1,16}`, nil},
	"integral-part": {`[0] | [1-9] [0-9]{0,15}`, nil},
	"number":        {`("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)?`, []string{"integral-part", "decimal-part"}},
	"integer":       {`("-"? integral-part)`, []string{"integral-part"}},
	"value":         {`object | array | string | number | boolean | null`, []string{"object", "array", "string", "number", "boolean", "null"}},
	"object":        {`"{" space ( string ":" space value ("," space string ":" space value)* )? space "}"`, []string{"string", "value"}},
	"array":         {`"[" space ( value ("," space value)* )? space "]"`, []string{"value"}},
	"uuid":          {`"\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} "\""`, nil},
	"char":          {`[^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})`, nil},
	"string":        {`"\"" char* "\""`, []string{"char"}},
	"null":          {`"null"`, nil},
	// used by patterns: '.' is any JSON string character except an encoded line break
	"dot": {`[^"\\\x00-\x1F] | [\\] (["\\/bft] | "u" [0-9a-fA-F]{4})`, nil},
}

var formatRules = map[string]builtinRule{
	"date":             {`[0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] )`, nil},
	"time":             {`([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | ( "+" | "-" ) ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )`, nil},
	"date-time":        {`date "T" time`, []string{"date", "time"}},
	"date-string":      {`"\"" date "\""`, []string{"date"}},
	"time-string":      {`"\"" time "\""`, []string{"time"}},
	"date-time-string": {`"\"" date-time "\""`, []string{"date-time"}},
}

func isReservedName(n string) bool {
	if n == "root" || n == "space" {
		return true
	}
	if _, ok := primitiveRules[n]; ok {
		return true
	}
	_, ok := formatRules[n]
	return ok
}

var invalidRuleChars = regexp.MustCompile(`[^a-zA-Z0-9-]+`)

func sanitizeName(n string) string {
	n = invalidRuleChars.ReplaceAllString(n, "-")
	if n == "" {
		n = "rule"
	}
	return n
}

const reservedBody = "\x00reserved"

// Builder composes several schemas and hand-written rules into one grammar.
type Builder struct {
	rules map[string]string
	docs  int // number of schema documents added, used to key their refs

	next    map[string]int    // base name -> first numeric suffix that may be free
	byBody  map[string]string // base name + NUL + body -> a name addRule gave it
	journal []undo            // changes to rules, for rolling back a failed conversion
	defer_  bool              // AddSchema leaves the whole-grammar checks to Check
	size    int               // bytes of the grammar's text
	adding  bool              // within AddSchema, where set enforces MaxGrammarBytes
}

// MaxGrammarBytes bounds the grammar text a Builder makes from schemas:
// AddSchema fails with a *SchemaError once the grammar would grow past it
// (a small schema can ask for a large grammar: integer ranges, for
// instance), so that its time is bounded by its work, whatever the
// schemas. AddRule is not bounded.
const MaxGrammarBytes = 1 << 20

// ruleBytes is what a rule adds to the grammar text ("name ::= body\n").
func ruleBytes(name, body string) int { return len(name) + len(body) + 6 }

// DeferChecks makes AddSchema skip the checks of the whole grammar
// (undefined rules, left recursion), which take time in proportion to
// the whole grammar: adding n schemas one by one then costs time linear
// in their total size instead of quadratic. The caller must call Check
// once all schemas are added; a failed check leaves the builder with the
// offending rules.
func (b *Builder) DeferChecks() { b.defer_ = true }

// Check runs the whole-grammar checks that DeferChecks deferred.
func (b *Builder) Check() error {
	for k, v := range b.rules {
		if v == reservedBody {
			return &SchemaError{Msg: "internal error: rule " + k + " left undefined"}
		}
	}
	if lr := b.leftRecursive(); lr != "" {
		return &SchemaError{Msg: "the schema is left-recursive (rule " + lr + " can refer to itself without consuming input)"}
	}
	return nil
}

// undo restores one rule.
type undo struct {
	name, old string
	had       bool
}

// NewBuilder returns an empty Builder (holding only the "space" rule).
func NewBuilder() *Builder {
	return &Builder{rules: map[string]string{"space": spaceRule}, next: map[string]int{}, byBody: map[string]string{},
		size: ruleBytes("space", spaceRule)}
}

// set sets a rule, recording what it replaces.
func (b *Builder) set(name, body string) {
	old, had := b.rules[name]
	b.journal = append(b.journal, undo{name, old, had})
	b.rules[name] = body
	if had {
		b.size -= ruleBytes(name, old)
	}
	b.size += ruleBytes(name, body)
	if b.adding && b.size > MaxGrammarBytes {
		panic(&SchemaError{Msg: fmt.Sprintf("the grammar would have more than %d bytes", MaxGrammarBytes)})
	}
}

// rollback undoes the changes made since the journal had mark entries.
func (b *Builder) rollback(mark int) {
	for i := len(b.journal) - 1; i >= mark; i-- {
		u := b.journal[i]
		b.size -= ruleBytes(u.name, b.rules[u.name])
		if u.had {
			b.rules[u.name] = u.old
			b.size += ruleBytes(u.name, u.old)
		} else {
			delete(b.rules, u.name)
		}
	}
	b.journal = b.journal[:mark]
}

// addRule adds body under name (sanitized), reusing the name when the same
// body is already there and adding a numeric suffix on conflict. It takes
// time linear in the sizes of name and body, however many rules share a
// base name.
func (b *Builder) addRule(name, body string) string {
	esc := sanitizeName(name)
	if cur, ok := b.rules[esc]; !ok || cur == body {
		b.set(esc, body)
		return esc
	}
	key := esc + "\x00" + body
	if n, ok := b.byBody[key]; ok && b.rules[n] == body && body != reservedBody {
		return n
	}
	for i := b.next[esc]; ; i++ {
		k := esc + strconv.Itoa(i)
		if cur, ok := b.rules[k]; !ok || cur == body {
			b.set(k, body)
			b.next[esc] = i + 1
			if body != reservedBody {
				b.byBody[key] = k
			}
			return k
		}
	}
}

// reserve claims a fresh rule name whose body is set later.
func (b *Builder) reserve(name string) string {
	return b.addRule(name, reservedBody)
}

func (b *Builder) addPrimitive(name string, r builtinRule) string {
	n := b.addRule(name, r.content)
	for _, dep := range r.deps {
		dr, ok := primitiveRules[dep]
		if !ok {
			dr = formatRules[dep]
		}
		if _, ok := b.rules[dep]; !ok {
			b.addPrimitive(dep, dr)
		}
	}
	return n
}

func (b *Builder) prim(name string) string {
	r, ok := primitiveRules[name]
	if !ok {
		r = formatRules[name]
	}
	return b.addPrimitive(name, r)
}

// AddRule adds a raw GBNF rule body under a name (made unique if taken) and
// returns the name used.
func (b *Builder) AddRule(name, body string) string {
	return b.addRule(name, body)
}

// AddSchema converts schema (resolving its refs within itself) and returns the
// name of the rule that matches it; name is a hint for the rule name. On
// error the builder is left unchanged.
func (b *Builder) AddSchema(name string, schema []byte) (_ string, err error) {
	return b.AddSchemaContext(context.Background(), name, schema)
}

// MaxDepth bounds how deeply subschemas may nest (items of items,
// properties of properties, alternatives of alternatives...): a deeper
// schema is a *SchemaError. Real schemas nest a few levels; the bound keeps
// conversion time and the grammar's size in proportion to the schema.
const MaxDepth = 128

// maxComponents bounds the schemas one allOf collects (through $refs that
// share targets it could otherwise grow exponentially).
const maxComponents = 4096

// AddSchemaContext is [Builder.AddSchema] that gives up when ctx ends,
// returning ctx's error (unwrapped). Conversion takes time roughly linear
// in the size of the schema and of the grammar it makes.
func (b *Builder) AddSchemaContext(ctx context.Context, name string, schema []byte) (_ string, err error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	doc, perr := parseJSON(schema)
	if perr != nil {
		return "", &SchemaError{Msg: "invalid JSON: " + perr.Error()}
	}
	b.journal = b.journal[:0]
	b.adding = true
	defer func() {
		b.adding = false
		if r := recover(); r != nil {
			var e error
			switch x := r.(type) {
			case *SchemaError:
				e = x
			case unsatError:
				e = x.SchemaError
			case ctxDone:
				e = x.err
			default:
				panic(r)
			}
			b.rollback(0)
			err = e
		}
		b.journal = b.journal[:0]
	}()
	b.docs++
	c := &converter{b: b, ctx: ctx, doc: doc, docID: b.docs, refNames: map[string]string{}}
	prefix := name
	if name == "root" {
		prefix = ""
	} else {
		prefix = sanitizeName(name)
	}
	n := c.visit(doc, prefix, "")
	if prefix != "" && n != prefix && !isReservedName(prefix) {
		if _, taken := b.rules[prefix]; !taken {
			// give the caller a rule named after its hint when possible
			n = b.addRule(prefix, n)
		}
	}
	if !b.defer_ {
		if err := b.Check(); err != nil {
			panic(err)
		}
	}
	return n, nil
}

// Grammar returns the full grammar text: all rules sorted by name, with the
// given rule as root (a "root ::= <rule>" line is added when root is not
// "root" itself and no rule is named "root" yet).
func (b *Builder) Grammar(root string) string {
	rules := b.rules
	if root != "root" && root != "" {
		if _, ok := rules["root"]; !ok {
			rules = make(map[string]string, len(b.rules)+1)
			for k, v := range b.rules {
				rules[k] = v
			}
			rules["root"] = root
		}
	}
	names := make([]string, 0, len(rules))
	for k := range rules {
		names = append(names, k)
	}
	sort.Strings(names)
	var sb strings.Builder
	for _, k := range names {
		sb.WriteString(k)
		sb.WriteString(" ::= ")
		sb.WriteString(rules[k])
		sb.WriteByte('\n')
	}
	return sb.String()
}

// ToGBNF converts a JSON Schema (a JSON document) to a GBNF grammar whose
// root rule is "root".
func ToGBNF(schema []byte) (string, error) {
	return ToGBNFContext(context.Background(), schema)
}

// ToGBNFContext is [ToGBNF] that gives up when ctx ends, returning ctx's
// error (unwrapped).
func ToGBNFContext(ctx context.Context, schema []byte) (string, error) {
	b := NewBuilder()
	n, err := b.AddSchemaContext(ctx, "root", schema)
	if err != nil {
		return "", err
	}
	return b.Grammar(n), nil
}

// Literal returns body text for a GBNF string literal matching s exactly
// (quoted and escaped).
func Literal(s string) string {
	var sb strings.Builder
	sb.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			fmt.Fprintf(&sb, `\x%02X`, s[i])
			i++
			continue
		}
		i += size
		switch r {
		case '"':
			sb.WriteString(`\"`)
		case '\\':
			sb.WriteString(`\\`)
		case '\n':
			sb.WriteString(`\n`)
		case '\r':
			sb.WriteString(`\r`)
		case '\t':
			sb.WriteString(`\t`)
		default:
			writeGrammarRune(&sb, r, false)
		}
	}
	sb.WriteByte('"')
	return sb.String()
}

// writeGrammarRune writes r for use inside a GBNF literal or (inClass)
// character class, escaping what llama.cpp's parser would misread.
func writeGrammarRune(sb *strings.Builder, r rune, inClass bool) {
	switch {
	case r < 0x20 || r == 0x7F:
		fmt.Fprintf(sb, `\x%02X`, r)
	case inClass && (r == '\\' || r == ']' || r == '[' || r == '-' || r == '^' || r == '"'):
		fmt.Fprintf(sb, `\x%02X`, r)
	case !inClass && (r == '\\' || r == '"'):
		sb.WriteByte('\\')
		sb.WriteRune(r)
	case r < 0x80:
		sb.WriteRune(r)
	case r > unicode.MaxRune:
		sb.WriteString(`\U0010FFFF`)
	case (r >= 0xD800 && r <= 0xDFFF) || !unicode.IsPrint(r):
		if r <= 0xFFFF {
			fmt.Fprintf(sb, `\u%04X`, r)
		} else {
			fmt.Fprintf(sb, `\U%08X`, r)
		}
	default:
		sb.WriteRune(r)
	}
}
