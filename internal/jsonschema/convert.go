package jsonschema

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
)

type converter struct {
	b        *Builder
	ctx      context.Context
	steps    int
	depth    int // nesting of body calls
	doc      any
	docID    int
	refNames map[string]string // JSON pointer of a ref target -> rule name
	refLog   []string          // refNames keys in the order they were added
	splits   int               // anyOf distributions done, to bound the blow-up
}

// ctxDone carries a context's error out of a conversion.
type ctxDone struct{ err error }

// step counts work and checks the context now and then.
func (c *converter) step() {
	c.steps++
	if c.steps&1023 == 0 && c.ctx != nil {
		if err := c.ctx.Err(); err != nil {
			panic(ctxDone{err})
		}
	}
}

// unsatError marks a (sub)schema that no value can satisfy; a union drops
// such alternatives instead of failing.
type unsatError struct{ *SchemaError }

func (c *converter) fail(ptr, format string, args ...any) {
	panic(&SchemaError{Pointer: ptr, Msg: fmt.Sprintf(format, args...)})
}

func (c *converter) unsat(ptr, format string, args ...any) {
	panic(unsatError{&SchemaError{Pointer: ptr, Msg: fmt.Sprintf(format, args...)}})
}

// maxNameLen bounds the length of the rule names joinName makes: names of
// deeply nested parts restart from their last component (made unique by a
// numeric suffix), so that the grammar grows linearly with the depth.
const maxNameLen = 64

func joinName(prefix, s string) string {
	if prefix == "" {
		return s
	}
	if len(prefix)+1+len(s) > maxNameLen {
		return s
	}
	return prefix + "-" + s
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-') {
			return false
		}
	}
	return true
}

// keywords that constrain a value (others are annotations or containers)
var constraintKeywords = []string{
	"type", "enum", "const", "properties", "required", "additionalProperties",
	"items", "prefixItems", "additionalItems", "minItems", "maxItems", "minLength", "maxLength",
	"pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
	"anyOf", "oneOf", "allOf", "$ref", "nullable",
}

var unsupportedKeywords = []string{
	"not", "if", "patternProperties", "dependentSchemas", "dependentRequired", "dependencies", "contains",
}

func hasConstraints(o *object, except ...string) bool {
	for _, k := range constraintKeywords {
		skip := false
		for _, e := range except {
			if e == k {
				skip = true
			}
		}
		if !skip && o.has(k) {
			return true
		}
	}
	return false
}

// visit returns the name of a rule matching schema s. name is the prefix of
// the rule names made for it ("" for the root).
func (c *converter) visit(s any, name, ptr string) string {
	ruleName := name
	if isReservedName(name) {
		ruleName = name + "-"
	} else if name == "" {
		ruleName = "root"
	}
	body := c.body(s, name, ruleName, ptr)
	if ruleName != "root" && isIdent(body) {
		return body
	}
	return c.b.addRule(ruleName, body)
}

// body returns a GBNF expression matching schema s.
func (c *converter) body(s any, name, ruleName, ptr string) string {
	c.step()
	c.depth++
	defer func() { c.depth-- }()
	if c.depth > MaxDepth {
		c.fail(ptr, "the schema nests more than %d levels deep", MaxDepth)
	}
	var o *object
	switch t := s.(type) {
	case bool:
		if t {
			return c.b.prim("value")
		}
		c.unsat(ptr, "schema false matches nothing")
	case *object:
		o = t
	default:
		c.fail(ptr, "a schema must be an object or a boolean")
	}
	for _, k := range unsupportedKeywords {
		if o.has(k) {
			c.fail(ptr+"/"+k, "keyword %q is not supported", k)
		}
	}
	if nb, ok := o.get("nullable"); ok && nb == true {
		null := newObject()
		null.set("type", "null")
		u := newObject()
		u.set("anyOf", []any{o.without("nullable"), null})
		return c.union(u, "anyOf", name, ptr)
	}
	if r, ok := o.get("$ref"); ok {
		if _, isStr := r.(string); !isStr {
			c.fail(ptr+"/$ref", "$ref must be a string")
		}
		if hasConstraints(o, "$ref") {
			return c.allOf(o, name, ruleName, ptr)
		}
		return c.ref(r.(string), ptr+"/$ref")
	}
	if o.has("allOf") {
		return c.allOf(o, name, ruleName, ptr)
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if o.has(k) {
			return c.union(o, k, name, ptr)
		}
	}

	typ := ""
	if tv, ok := o.get("type"); ok {
		switch t := tv.(type) {
		case string:
			typ = t
		case []any:
			if len(t) == 0 {
				c.fail(ptr+"/type", "empty type array")
			}
			for i, x := range t {
				if _, ok := x.(string); !ok {
					c.fail(fmt.Sprintf("%s/type/%d", ptr, i), "type must be a string")
				}
			}
			if len(t) == 1 {
				typ = t[0].(string)
				break
			}
			alts := make([]any, len(t))
			for i, x := range t {
				cp := o.clone()
				cp.set("type", x)
				alts[i] = cp
			}
			return c.unionOf(alts, name, ptr, "/type")
		default:
			c.fail(ptr+"/type", "type must be a string or an array of strings")
		}
		if !knownType(typ) {
			c.fail(ptr+"/type", "unknown type %q", typ)
		}
	}

	if cv, ok := o.get("const"); ok {
		if typ != "" && !typeAllows(typ, cv) {
			c.unsat(ptr+"/const", "const does not have type %q", typ)
		}
		return Literal(dumpJSON(cv))
	}
	if ev, ok := o.get("enum"); ok {
		arr, isArr := ev.([]any)
		if !isArr {
			c.fail(ptr+"/enum", "enum must be an array")
		}
		var alts []string
		seen := map[string]bool{}
		for _, v := range arr {
			if typ != "" && !typeAllows(typ, v) {
				continue
			}
			l := Literal(dumpJSON(v))
			if !seen[l] {
				seen[l] = true
				alts = append(alts, l)
			}
		}
		if len(alts) == 0 {
			c.unsat(ptr+"/enum", "no enum value is allowed")
		}
		return "(" + strings.Join(alts, " | ") + ")"
	}

	if typ == "" {
		switch {
		case o.has("properties") || o.has("required") || (o.has("additionalProperties") && !isTrueSchema(mustGet(o, "additionalProperties"))):
			typ = "object"
		case o.has("items") || o.has("prefixItems") || o.has("minItems") || o.has("maxItems"):
			typ = "array"
		case o.has("pattern") || o.has("minLength") || o.has("maxLength") || knownFormat(o):
			typ = "string"
		default:
			return c.primitive("value", ruleName)
		}
	}
	switch typ {
	case "object":
		return c.object(o, name, ptr)
	case "array":
		return c.array(o, name, ptr)
	case "string":
		return c.str(o, ruleName, ptr)
	case "integer":
		if o.has("minimum") || o.has("maximum") || o.has("exclusiveMinimum") || o.has("exclusiveMaximum") {
			return c.intRange(o, ptr)
		}
		return c.primitive("integer", ruleName)
	default: // number, boolean, null
		return c.primitive(typ, ruleName)
	}
}

func mustGet(o *object, k string) any { v, _ := o.get(k); return v }

func knownType(t string) bool {
	switch t {
	case "string", "number", "integer", "boolean", "null", "object", "array":
		return true
	}
	return false
}

func knownFormat(o *object) bool {
	f, ok := o.get("format")
	if !ok {
		return false
	}
	switch f {
	case "date", "time", "date-time", "uuid", "uuid1", "uuid2", "uuid3", "uuid4", "uuid5":
		return true
	}
	return false
}

func typeAllows(typ string, v any) bool {
	t := jsonType(v)
	return t == typ || (typ == "number" && t == "integer")
}

// isTrueSchema reports whether s accepts everything (true or a schema without constraints).
func isTrueSchema(s any) bool {
	switch t := s.(type) {
	case bool:
		return t
	case *object:
		return !hasConstraints(t) && !hasAny(t, unsupportedKeywords)
	}
	return false
}

func hasAny(o *object, ks []string) bool {
	for _, k := range ks {
		if o.has(k) {
			return true
		}
	}
	return false
}

// primitive returns the builtin rule typ; at the root its content is inlined
// under "root" like llama.cpp does.
func (c *converter) primitive(typ, ruleName string) string {
	if ruleName == "root" {
		r := primitiveRules[typ]
		for _, d := range r.deps {
			c.b.prim(d)
		}
		return r.content
	}
	return c.b.prim(typ)
}

// ---- refs ----

func (c *converter) resolve(ref, ptr string) (any, string) {
	if !strings.HasPrefix(ref, "#") {
		c.fail(ptr, "remote $ref %q is not supported (only local refs \"#/...\")", ref)
	}
	frag, err := url.PathUnescape(ref[1:])
	if err != nil {
		c.fail(ptr, "invalid $ref %q: %v", ref, err)
	}
	if frag == "" {
		return c.doc, ""
	}
	if !strings.HasPrefix(frag, "/") {
		c.fail(ptr, "$ref %q: only JSON pointer fragments are supported", ref)
	}
	cur := c.doc
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch t := cur.(type) {
		case *object:
			v, ok := t.get(tok)
			if !ok {
				c.fail(ptr, "$ref %q: %q not found", ref, tok)
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(t) {
				c.fail(ptr, "$ref %q: bad array index %q", ref, tok)
			}
			cur = t[i]
		default:
			c.fail(ptr, "$ref %q: %q not found", ref, tok)
		}
	}
	return cur, frag
}

func (c *converter) ref(ref, ptr string) string {
	target, tptr := c.resolve(ref, ptr)
	if n, ok := c.refNames[tptr]; ok {
		return n
	}
	n := c.b.reserve("ref" + sanitizeName(tptr))
	c.refNames[tptr] = n
	c.refLog = append(c.refLog, tptr)
	c.b.set(n, c.body(target, n, n, tptr))
	return n
}

// ---- unions ----

func (c *converter) union(o *object, key, name, ptr string) string {
	arr, ok := mustGet(o, key).([]any)
	if !ok || len(arr) == 0 {
		c.fail(ptr+"/"+key, "%s must be a non-empty array", key)
	}
	rest := o.without("anyOf", "oneOf")
	if hasConstraints(rest) {
		// distribute the sibling constraints over the alternatives
		c.splits++
		if c.splits > 256 {
			c.fail(ptr+"/"+key, "too many combinations of anyOf/oneOf with sibling constraints")
		}
		alts := make([]any, len(arr))
		for i, a := range arr {
			m := newObject()
			m.set("allOf", []any{rest, a})
			alts[i] = m
		}
		arr = alts
	}
	return c.unionOf(arr, name, ptr, "/"+key)
}

func (c *converter) unionOf(alts []any, name, ptr, sub string) string {
	var rules []string
	var lastUnsat *SchemaError
	for i, a := range alts {
		n := joinName(name, strconv.Itoa(i))
		if name == "" {
			n = "alternative-" + strconv.Itoa(i)
		}
		r, u := c.tryVisit(a, n, fmt.Sprintf("%s%s/%d", ptr, sub, i))
		if u != nil {
			lastUnsat = u
			continue
		}
		rules = append(rules, r)
	}
	if len(rules) == 0 {
		panic(unsatError{lastUnsat})
	}
	return strings.Join(rules, " | ")
}

func (c *converter) tryVisit(s any, name, ptr string) (rule string, unsat *SchemaError) {
	mark, refMark := len(c.b.journal), len(c.refLog)
	defer func() {
		if r := recover(); r != nil {
			u, ok := r.(unsatError)
			if !ok {
				panic(r)
			}
			c.b.rollback(mark)
			for _, k := range c.refLog[refMark:] {
				delete(c.refNames, k)
			}
			c.refLog = c.refLog[:refMark]
			unsat = u.SchemaError
		}
	}()
	return c.visit(s, name, ptr), nil
}

// ---- allOf ----

type component struct {
	o   *object
	ptr string
}

func (c *converter) collect(s any, ptr string, stack []string, out *[]component) {
	c.step()
	if len(*out) > maxComponents {
		c.fail(ptr, "allOf combines more than %d schemas", maxComponents)
	}
	switch t := s.(type) {
	case bool:
		if !t {
			c.unsat(ptr, "schema false matches nothing")
		}
		return
	case *object:
		for _, k := range unsupportedKeywords {
			if t.has(k) {
				c.fail(ptr+"/"+k, "keyword %q is not supported", k)
			}
		}
		if r, ok := t.get("$ref"); ok {
			rs, isStr := r.(string)
			if !isStr {
				c.fail(ptr+"/$ref", "$ref must be a string")
			}
			target, tptr := c.resolve(rs, ptr+"/$ref")
			for _, p := range stack {
				if p == tptr {
					c.fail(ptr+"/$ref", "cyclic $ref %q inside allOf", rs)
				}
			}
			c.collect(t.without("$ref"), ptr, stack, out)
			c.collect(target, tptr, append(append([]string(nil), stack...), tptr), out)
			return
		}
		if a, ok := t.get("allOf"); ok {
			arr, isArr := a.([]any)
			if !isArr || len(arr) == 0 {
				c.fail(ptr+"/allOf", "allOf must be a non-empty array")
			}
			c.collect(t.without("allOf"), ptr, stack, out)
			for i, x := range arr {
				c.collect(x, fmt.Sprintf("%s/allOf/%d", ptr, i), stack, out)
			}
			return
		}
		*out = append(*out, component{t, ptr})
	default:
		c.fail(ptr, "a schema must be an object or a boolean")
	}
}

func (c *converter) allOf(o *object, name, ruleName, ptr string) string {
	var comps []component
	c.collect(o, ptr, nil, &comps)
	// distribute the first anyOf/oneOf over the rest
	for i, comp := range comps {
		for _, k := range []string{"anyOf", "oneOf"} {
			if !comp.o.has(k) {
				continue
			}
			arr, ok := mustGet(comp.o, k).([]any)
			if !ok || len(arr) == 0 {
				c.fail(comp.ptr+"/"+k, "%s must be a non-empty array", k)
			}
			c.splits++
			if c.splits > 256 {
				c.fail(comp.ptr+"/"+k, "too many combinations of anyOf/oneOf inside allOf")
			}
			var rest []any
			for j, x := range comps {
				if j == i {
					rest = append(rest, x.o.without("anyOf", "oneOf"))
				} else {
					rest = append(rest, x.o)
				}
			}
			alts := make([]any, len(arr))
			for j, a := range arr {
				m := newObject()
				m.set("allOf", append(append([]any(nil), rest...), a))
				alts[j] = m
			}
			return c.unionOf(alts, name, comp.ptr, "/"+k)
		}
	}
	merged := c.merge(comps, ptr)
	return c.body(merged, name, ruleName, ptr)
}

func typeList(v any) []string {
	switch t := v.(type) {
	case string:
		return []string{t}
	case []any:
		var r []string
		for _, x := range t {
			if s, ok := x.(string); ok {
				r = append(r, s)
			}
		}
		return r
	}
	return nil
}

func num(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

func (c *converter) merge(comps []component, ptr string) *object {
	res := newObject()
	for _, comp := range comps {
		for _, k := range comp.o.keys {
			v := comp.o.vals[k]
			cur, exists := res.get(k)
			if !exists {
				res.set(k, v)
				continue
			}
			kp := comp.ptr + "/" + k
			switch k {
			case "type":
				var out []any
				for _, a := range typeList(cur) {
					for _, b := range typeList(v) {
						switch {
						case a == b:
							out = append(out, a)
						case a == "number" && b == "integer", a == "integer" && b == "number":
							out = append(out, "integer")
						}
					}
				}
				if len(out) == 0 {
					c.unsat(kp, "allOf combines incompatible types")
				}
				if len(out) == 1 {
					res.set(k, out[0])
				} else {
					res.set(k, out)
				}
			case "properties":
				a, ok1 := cur.(*object)
				b, ok2 := v.(*object)
				if !ok1 || !ok2 {
					c.fail(kp, "properties must be an object")
				}
				m := a.clone()
				for _, pk := range b.keys {
					if pa, ok := m.get(pk); ok {
						x := newObject()
						x.set("allOf", []any{pa, b.vals[pk]})
						m.set(pk, x)
					} else {
						m.set(pk, b.vals[pk])
					}
				}
				res.set(k, m)
			case "required":
				a, _ := cur.([]any)
				b, _ := v.([]any)
				m := append([]any(nil), a...)
				for _, x := range b {
					dup := false
					for _, y := range m {
						if x == y {
							dup = true
						}
					}
					if !dup {
						m = append(m, x)
					}
				}
				res.set(k, m)
			case "additionalProperties", "items":
				_, arr1 := cur.([]any)
				_, arr2 := v.([]any)
				switch {
				case arr1 || arr2:
					if dumpJSON(cur) != dumpJSON(v) {
						c.fail(kp, "allOf combines two different tuple definitions")
					}
				case cur == false || v == false:
					res.set(k, false)
				case isTrueSchema(cur):
					res.set(k, v)
				case isTrueSchema(v):
				default:
					x := newObject()
					x.set("allOf", []any{cur, v})
					res.set(k, x)
				}
			case "const":
				if dumpJSON(cur) != dumpJSON(v) {
					c.unsat(kp, "allOf combines different consts")
				}
			case "enum":
				a, _ := cur.([]any)
				b, _ := v.([]any)
				var m []any
				for _, x := range a {
					for _, y := range b {
						if dumpJSON(x) == dumpJSON(y) {
							m = append(m, x)
							break
						}
					}
				}
				if len(m) == 0 {
					c.unsat(kp, "allOf combines enums without common values")
				}
				res.set(k, m)
			case "minimum", "exclusiveMinimum", "minLength", "minItems":
				a, ok1 := num(cur)
				b, ok2 := num(v)
				if ok1 && ok2 && b > a {
					res.set(k, v)
				}
			case "maximum", "exclusiveMaximum", "maxLength", "maxItems":
				a, ok1 := num(cur)
				b, ok2 := num(v)
				if ok1 && ok2 && b < a {
					res.set(k, v)
				}
			case "pattern", "format", "prefixItems", "additionalItems":
				if dumpJSON(cur) != dumpJSON(v) {
					c.fail(kp, "allOf combines two different %s values", k)
				}
			}
		}
	}
	if cv, ok := res.get("const"); ok {
		if ev, ok := res.get("enum"); ok {
			found := false
			arr, _ := ev.([]any)
			for _, x := range arr {
				if dumpJSON(x) == dumpJSON(cv) {
					found = true
				}
			}
			if !found {
				c.unsat(ptr, "allOf: const is not in enum")
			}
			res = res.without("enum")
		}
	}
	return res
}

// ---- objects ----

func (c *converter) object(o *object, name, ptr string) string {
	props := newObject()
	if pv, ok := o.get("properties"); ok {
		p, isObj := pv.(*object)
		if !isObj {
			c.fail(ptr+"/properties", "properties must be an object")
		}
		props = p.clone()
	}
	required := map[string]bool{}
	if rv, ok := o.get("required"); ok {
		arr, isArr := rv.([]any)
		if !isArr {
			c.fail(ptr+"/required", "required must be an array")
		}
		for i, x := range arr {
			s, isStr := x.(string)
			if !isStr {
				c.fail(fmt.Sprintf("%s/required/%d", ptr, i), "required entries must be strings")
			}
			required[s] = true
		}
	}
	ap, hasAP := o.get("additionalProperties")
	if hasAP {
		switch ap.(type) {
		case bool, *object:
		default:
			c.fail(ptr+"/additionalProperties", "additionalProperties must be a boolean or a schema")
		}
		if isTrueSchema(ap) {
			ap = true
		}
	}
	if len(props.keys) == 0 && len(required) == 0 && (!hasAP || ap == true) {
		return c.b.prim("object")
	}
	// required keys without a property schema
	if rv, ok := o.get("required"); ok {
		for i, x := range rv.([]any) {
			k := x.(string)
			if props.has(k) {
				continue
			}
			if ap == false {
				c.unsat(fmt.Sprintf("%s/required/%d", ptr, i), "required property %q is forbidden by additionalProperties: false", k)
			}
			if apo, isObj := ap.(*object); isObj {
				props.set(k, apo)
			} else {
				props.set(k, true)
			}
		}
	}

	var requiredProps, optionalProps []string
	kvRules := map[string]string{}
	for _, k := range props.keys {
		ps := props.vals[k]
		pptr := ptr + "/properties/" + escapePointerToken(k)
		if !o.has("properties") || !mustGet(o, "properties").(*object).has(k) {
			pptr = ptr + "/required"
		}
		valueRule := c.visit(ps, joinName(name, k), pptr)
		kvRules[k] = c.b.addRule(joinName(name, k)+"-kv", Literal(jsonString(k))+` space ":" space `+valueRule)
		if required[k] {
			requiredProps = append(requiredProps, k)
		} else {
			optionalProps = append(optionalProps, k)
		}
	}
	const star = "\x00*"
	if ap == true || isObjectSchema(ap) {
		sub := joinName(name, "additional")
		var valueRule string
		if isObjectSchema(ap) {
			valueRule = c.visit(ap, sub+"-value", ptr+"/additionalProperties")
		} else {
			valueRule = c.b.prim("value")
		}
		var keyRule string
		if len(props.keys) == 0 {
			keyRule = c.b.prim("string")
		} else {
			keyRule = c.b.addRule(sub+"-k", c.notStrings(props.keys))
		}
		kvRules[star] = c.b.addRule(sub+"-kv", keyRule+` ":" space `+valueRule)
		optionalProps = append(optionalProps, star)
	}
	if len(requiredProps) == 0 && len(optionalProps) == 0 {
		return `"{" space "}"`
	}
	var sb strings.Builder
	sb.WriteString(`"{" space `)
	for i, k := range requiredProps {
		if i > 0 {
			sb.WriteString(` "," space `)
		}
		sb.WriteString(kvRules[k])
	}
	if len(optionalProps) > 0 {
		sb.WriteString(" (")
		if len(requiredProps) > 0 {
			sb.WriteString(` "," space ( `)
		}
		// item is an optional property's part of an alternative: the first
		// one written (no comma before it), or a later one, optional.
		item := func(k string, firstOptional bool) string {
			kv := kvRules[k]
			commaRef := `( "," space ` + kv + " )"
			switch {
			case firstOptional && k == star:
				return commaRef + "*"
			case firstOptional:
				return commaRef + "?"
			case k == star:
				return kv + " " + commaRef + "*"
			}
			return kv
		}
		// rest[j] matches the optional properties from j on, each optional;
		// made once each, from the last, so the grammar and the time to
		// make it stay linear in the number of properties.
		n := len(optionalProps)
		rest := make([]string, n+1)
		for j := n - 1; j >= 1; j-- {
			body := item(optionalProps[j], true)
			if rest[j+1] != "" {
				body += " " + rest[j+1]
			}
			kn := optionalProps[j-1]
			if kn == star {
				kn = "additional"
			}
			rest[j] = c.b.addRule(joinName(name, kn)+"-rest", body)
		}
		for i, k := range optionalProps {
			c.step()
			if i > 0 {
				sb.WriteString(" | ")
			}
			sb.WriteString(item(k, false))
			if rest[i+1] != "" {
				sb.WriteString(" " + rest[i+1])
			}
		}
		if len(requiredProps) > 0 {
			sb.WriteString(" )")
		}
		sb.WriteString(" )?")
	}
	sb.WriteString(` space "}"`)
	return sb.String()
}

func isObjectSchema(v any) bool { _, ok := v.(*object); return ok }

// notStrings returns a rule body matching a JSON string that is none of names.
func (c *converter) notStrings(names []string) string {
	type node struct {
		children map[rune]*node
		end      bool
	}
	root := &node{children: map[rune]*node{}}
	for _, s := range names {
		n := root
		for _, r := range s {
			ch, ok := n.children[r]
			if !ok {
				ch = &node{children: map[rune]*node{}}
				n.children[r] = ch
			}
			n = ch
		}
		n.end = true
	}
	char := c.b.prim("char")
	var rest func(n *node) string
	rest = func(n *node) string {
		if len(n.children) == 0 {
			return char + "+"
		}
		keys := make([]rune, 0, len(n.children))
		for r := range n.children {
			keys = append(keys, r)
		}
		sortRunes(keys)
		var alts []string
		for _, r := range keys {
			var sb strings.Builder
			jsonEscapeRune(&sb, r)
			alts = append(alts, Literal(sb.String())+" "+rest(n.children[r]))
		}
		alts = append(alts, otherChar(keys)+" "+char+"*")
		s := "(" + strings.Join(alts, " | ") + ")"
		if !n.end {
			s += "?"
		}
		return s
	}
	return `"\"" ` + rest(root) + ` "\""`
}

// otherChar matches one JSON string character whose decoded value is not in excl.
func otherChar(excl []rune) string {
	var sb strings.Builder
	sb.WriteString(`([^"\\\x7F\x00-\x1F`)
	for _, r := range excl {
		if r >= 0x20 && r != '"' && r != '\\' && r != 0x7F {
			writeGrammarRune(&sb, r, true)
		}
	}
	sb.WriteString(`] | [\\] (`)
	letters := ""
	for _, p := range []struct {
		l byte
		r rune
	}{{'"', '"'}, {'\\', '\\'}, {'b', '\b'}, {'f', '\f'}, {'n', '\n'}, {'r', '\r'}, {'t', '\t'}} {
		found := false
		for _, r := range excl {
			if r == p.r {
				found = true
			}
		}
		if !found {
			if p.l == '\\' || p.l == '"' {
				letters += fmt.Sprintf(`\x%02X`, p.l)
			} else {
				letters += string(p.l)
			}
		}
	}
	if letters != "" {
		sb.WriteString("[" + letters + "] | ")
	}
	sb.WriteString(`"u" [0-9a-fA-F]{4}))`)
	return sb.String()
}

func sortRunes(rs []rune) {
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && rs[j] < rs[j-1]; j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}

// ---- arrays ----

const maxRepeat = 1000

func (c *converter) count(o *object, k, ptr string) (int, bool) {
	v, ok := o.get(k)
	if !ok {
		return 0, false
	}
	f, isNum := num(v)
	if !isNum || f < 0 || f != math.Trunc(f) {
		c.fail(ptr+"/"+k, "%s must be a non-negative integer", k)
	}
	if f > math.MaxInt32 {
		f = math.MaxInt32
	}
	return int(f), true
}

func (c *converter) array(o *object, name, ptr string) string {
	var tuple []any
	tuplePtr := ptr + "/prefixItems"
	var item any = true // nil: no further items
	itemPtr := ptr + "/items"
	items, hasItems := o.get("items")
	if arr, ok := items.([]any); ok { // draft-04 tuple
		tuple, tuplePtr = arr, ptr+"/items"
		item = nil
		if ai, ok := o.get("additionalItems"); ok {
			item, itemPtr = ai, ptr+"/additionalItems"
		}
	} else {
		if pv, ok := o.get("prefixItems"); ok {
			if parr, ok := pv.([]any); ok {
				tuple = parr
				item = nil
			} else { // tolerated like llama.cpp: prefixItems given as a schema
				item, itemPtr = pv, ptr+"/prefixItems"
			}
		}
		if hasItems {
			item, itemPtr = items, ptr+"/items"
		}
	}
	if item == false {
		item = nil
	}
	minItems, hasMin := c.count(o, "minItems", ptr)
	maxItems, hasMax := c.count(o, "maxItems", ptr)
	if len(tuple) == 0 && item == true && !hasMin && !hasMax {
		return c.b.prim("array")
	}
	lo := len(tuple)
	if hasMin {
		lo = minItems
	}
	hi := math.MaxInt
	if item == nil {
		hi = len(tuple)
	}
	if hasMax && maxItems < hi {
		hi = maxItems
	}
	if lo > hi {
		c.unsat(ptr, "no array length satisfies minItems/maxItems and the items definition")
	}
	if lo > maxRepeat {
		c.fail(ptr+"/minItems", "minItems above %d is not supported", maxRepeat)
	}
	itemRule := ""
	elem := func(j int) string {
		if j < len(tuple) {
			return c.visit(tuple[j], joinName(name, "tuple-"+strconv.Itoa(j)), fmt.Sprintf("%s/%d", tuplePtr, j))
		}
		if itemRule == "" {
			itemRule = c.visit(item, joinName(name, "item"), itemPtr)
		}
		return itemRule
	}
	if len(tuple) == 0 {
		if hi == 0 {
			return `"[" space  space "]"`
		}
		return `"[" space ` + buildRepetition(elem(0), lo, hi, `"," space`) + ` space "]"`
	}
	var parts []string
	for j := 0; j < lo && j < len(tuple); j++ {
		parts = append(parts, elem(j))
	}
	req := strings.Join(parts, ` "," space `)
	if lo > len(tuple) {
		more := buildRepetition(`( "," space `+elem(len(tuple))+` )`, lo-len(tuple), lo-len(tuple), "")
		req += " " + more
	}
	var tail func(i int) string
	tail = func(i int) string {
		if i >= hi {
			return ""
		}
		if i >= len(tuple) {
			if i == 0 {
				return buildRepetition(elem(i), 0, hi, `"," space`)
			}
			max := hi
			if hi != math.MaxInt {
				max = hi - i
			}
			return buildRepetition(`( "," space `+elem(i)+` )`, 0, max, "")
		}
		sep := ""
		if i > 0 {
			sep = `"," space `
		}
		t := tail(i + 1)
		if t != "" {
			t = " " + t
		}
		return "( " + sep + elem(i) + t + " )?"
	}
	body := `"[" space ` + req
	if t := tail(lo); t != "" {
		if req != "" {
			body += " "
		}
		body += t
	}
	return body + ` space "]"`
}

// buildRepetition repeats item between min and max times (max math.MaxInt:
// unbounded), separated by sep when sep is not empty.
func buildRepetition(item string, min, max int, sep string) string {
	hasMax := max != math.MaxInt
	if max == 0 {
		return ""
	}
	if min == 0 && max == 1 {
		return item + "?"
	}
	if sep == "" {
		if min == 1 && !hasMax {
			return item + "+"
		}
		if min == 0 && !hasMax {
			return item + "*"
		}
		s := item + "{" + strconv.Itoa(min) + ","
		if hasMax {
			s += strconv.Itoa(max)
		}
		return s + "}"
	}
	m2 := max
	if hasMax {
		m2 = max - 1
	}
	mn := min - 1
	if min == 0 {
		mn = 0
	}
	res := item + " " + buildRepetition("("+sep+" "+item+")", mn, m2, "")
	if min == 0 {
		res = "(" + res + ")?"
	}
	return res
}

// ---- strings ----

func (c *converter) str(o *object, ruleName, ptr string) string {
	if pv, ok := o.get("pattern"); ok {
		p, isStr := pv.(string)
		if !isStr {
			c.fail(ptr+"/pattern", "pattern must be a string")
		}
		return c.pattern(p, ruleName, ptr+"/pattern")
	}
	if fv, ok := o.get("format"); ok {
		switch fv {
		case "uuid", "uuid1", "uuid2", "uuid3", "uuid4", "uuid5":
			return c.b.prim("uuid")
		case "date", "time", "date-time":
			return c.b.prim(fv.(string) + "-string")
		}
	}
	minLen, hasMin := c.count(o, "minLength", ptr)
	maxLen, hasMax := c.count(o, "maxLength", ptr)
	if !hasMin && !hasMax {
		return c.primitive("string", ruleName)
	}
	if !hasMax {
		maxLen = math.MaxInt
	}
	if minLen > maxLen {
		c.unsat(ptr, "minLength is greater than maxLength")
	}
	if minLen > maxRepeat {
		c.fail(ptr+"/minLength", "minLength above %d is not supported", maxRepeat)
	}
	return `"\"" ` + buildRepetition(c.b.prim("char"), minLen, maxLen, "") + ` "\""`
}

// ---- integers ----

const intLimit = 1e15

func (c *converter) intRange(o *object, ptr string) string {
	minV, maxV := int64(math.MinInt64), int64(math.MaxInt64)
	bound := func(k string) (float64, bool) {
		v, ok := o.get(k)
		if !ok {
			return 0, false
		}
		if _, isBool := v.(bool); isBool {
			return 0, false // draft-04 boolean exclusiveMinimum/Maximum, handled below
		}
		f, isNum := num(v)
		if !isNum || math.IsNaN(f) || math.IsInf(f, 0) {
			c.fail(ptr+"/"+k, "%s must be a number", k)
		}
		return f, true
	}
	lower := func(f float64) {
		if f <= -intLimit {
			return
		}
		v := int64(math.Ceil(f))
		if f > intLimit {
			v = int64(intLimit)
		}
		if v > minV {
			minV = v
		}
	}
	upper := func(f float64) {
		if f >= intLimit {
			return
		}
		v := int64(math.Floor(f))
		if f < -intLimit {
			v = -int64(intLimit)
		}
		if v < maxV {
			maxV = v
		}
	}
	exclMin := mustGet(o, "exclusiveMinimum") == true
	exclMax := mustGet(o, "exclusiveMaximum") == true
	if f, ok := bound("minimum"); ok {
		if exclMin {
			lower(math.Floor(f) + 1)
		} else {
			lower(f)
		}
	}
	if f, ok := bound("exclusiveMinimum"); ok {
		lower(math.Floor(f) + 1)
	}
	if f, ok := bound("maximum"); ok {
		if exclMax {
			upper(math.Ceil(f) - 1)
		} else {
			upper(f)
		}
	}
	if f, ok := bound("exclusiveMaximum"); ok {
		upper(math.Ceil(f) - 1)
	}
	if minV == math.MinInt64 && maxV == math.MaxInt64 {
		c.b.prim("integral-part")
		return primitiveRules["integer"].content
	}
	if minV > maxV {
		c.unsat(ptr, "no integer satisfies the minimum and maximum")
	}
	var sb strings.Builder
	sb.WriteString("(")
	buildMinMaxInt(minV, maxV, &sb, 16, true)
	sb.WriteString(")")
	return sb.String()
}
