package server

// Decoding of request bodies into the typed request of each dialect. A
// body is decoded once (decodeRequest) into a struct whose json tags name
// its fields exactly (case-sensitive, as llama-server reads them). Its
// field types keep llama-server's leniency and its errors: a JSON null
// counts as absent, unknown keys are ignored, and a value of the wrong
// type is not a decoding error but one of the field, naming it, when the
// request is read (in the order the server has always checked fields, so
// that a body with several bad fields is answered as before). Fields whose
// JSON takes several shapes (a prompt, stop, tool_choice, content parts)
// are json.RawMessage, each read by one named function.

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// namedField is a field type that reports errors under the field's JSON
// name; decodeRequest gives it that name.
type namedField interface{ setName(name string) }

// opt is an optional field of type T: Set when given and not null; Bad
// when the value does not decode as a T.
type opt[T any] struct {
	name string
	Set  bool
	V    T
	Bad  bool
}

func (o *opt[T]) setName(name string) { o.name = name }

// UnmarshalJSON records the value; it never fails (see read).
func (o *opt[T]) UnmarshalJSON(b []byte) error {
	if isNull(b) {
		return nil
	}
	o.Set = true
	if err := json.Unmarshal(b, &o.V); err != nil {
		o.Bad = true
	}
	return nil
}

// err is the field's error when it is given with a value that is not a
// T (want describes a T).
func (o *opt[T]) err(want string) error {
	if o.Set && o.Bad {
		return badRequest("%q must be %s", o.name, want)
	}
	return nil
}

// read stores the value in dst when given.
func (o *opt[T]) read(dst *T, want string) error {
	if err := o.err(want); err != nil || !o.Set {
		return err
	}
	*dst = o.V
	return nil
}

// optBool is an optional boolean.
type optBool = opt[bool]

// some returns an opt holding v, as if name had been given as v.
func some[T any](name string, v T) opt[T] { return opt[T]{name: name, Set: true, V: v} }

// optNum is an optional number, read as a float or an integer as the
// field wants it (a float with no fraction is an integer).
type optNum struct {
	name string
	Set  bool
	num  json.Number // "" when the value is not a number
}

func (o *optNum) setName(name string) { o.name = name }

// UnmarshalJSON records the value; it never fails.
func (o *optNum) UnmarshalJSON(b []byte) error {
	if isNull(b) {
		return nil
	}
	o.Set = true
	if jsonKind(b) == 'n' {
		_ = json.Unmarshal(b, &o.num)
	}
	return nil
}

// numInt and numFloat return an optNum holding n or v, as if name had
// been given as that number.
func numInt(name string, n int64) optNum {
	return optNum{name: name, Set: true, num: json.Number(strconv.FormatInt(n, 10))}
}

func numFloat(name string, v float64) optNum {
	return optNum{name: name, Set: true, num: json.Number(strconv.FormatFloat(v, 'g', -1, 64))}
}

// float64 returns the number.
func (o *optNum) float64() (float64, error) {
	v, err := strconv.ParseFloat(string(o.num), 64)
	if o.num == "" || err != nil {
		return 0, badRequest("%q must be a number", o.name)
	}
	return v, nil
}

// float stores the number in dst when given; it must fit a float32.
func (o *optNum) float(dst *float32) error {
	if !o.Set {
		return nil
	}
	v, err := o.float64()
	if err != nil {
		return err
	}
	return checkFloat(o.name, v, dst)
}

// integer returns the number as an integer.
func (o *optNum) integer() (int64, error) {
	if o.num == "" {
		return 0, badRequest("%q must be an integer", o.name)
	}
	return numInteger(o.num, o.name)
}

// numInteger reads num as an integer (a float with no fraction is one).
func numInteger(num json.Number, name string) (int64, error) {
	if n, err := strconv.ParseInt(num.String(), 10, 64); err == nil {
		return n, nil
	}
	x, err := strconv.ParseFloat(num.String(), 64)
	if err != nil || x != math.Trunc(x) || math.Abs(x) > 1<<53 {
		return 0, badRequest("%q must be an integer in range, got %s", name, num.String())
	}
	return int64(x), nil
}

// int stores the integer in dst when given; it must be in [lo, hi].
func (o *optNum) int(dst *int, lo, hi int64) error {
	if !o.Set {
		return nil
	}
	n, err := o.integer()
	if err != nil {
		return err
	}
	return checkInt(o.name, n, dst, lo, hi)
}

// optStrs is an optional string or array of strings.
type optStrs struct {
	name string
	Set  bool
	V    []string
	Bad  bool
}

func (o *optStrs) setName(name string) { o.name = name }

// UnmarshalJSON records the value; it never fails.
func (o *optStrs) UnmarshalJSON(b []byte) error {
	if isNull(b) {
		return nil
	}
	o.Set = true
	if jsonKind(b) == 's' {
		var s string
		o.Bad = json.Unmarshal(b, &s) != nil
		o.V = []string{s}
		return nil
	}
	o.Bad = json.Unmarshal(b, &o.V) != nil
	return nil
}

// read stores the strings in dst when given.
func (o *optStrs) read(dst *[]string) error {
	if !o.Set {
		return nil
	}
	if o.Bad {
		return badRequest("%q must be a string or an array of strings", o.name)
	}
	*dst = o.V
	return nil
}

// decodeRequest decodes a JSON object body into dst, a pointer to a
// request struct (see the file's comment). A field's json tag is its name;
// a field of an embedded struct is shadowed by one of the same name
// outside it. Only the body's shape is an error here: empty, not an
// object, or malformed.
func decodeRequest(body []byte, dst any) error {
	f, err := parseFields(body)
	if err != nil {
		return err
	}
	fillRequest(f, reflect.ValueOf(dst).Elem(), map[string]bool{})
	return nil
}

// fillRequest fills the struct v from f, skipping the names of done (and
// adding its own).
func fillRequest(f reqFields, v reflect.Value, done map[string]bool) {
	t := v.Type()
	var embedded []reflect.Value
	for i := range t.NumField() {
		sf := t.Field(i)
		fv := v.Field(i)
		if sf.Anonymous && sf.Type.Kind() == reflect.Struct {
			embedded = append(embedded, fv)
			continue
		}
		if !sf.IsExported() {
			continue
		}
		if pv, ok := fv.Addr().Interface().(*paramValues); ok {
			*pv = decodeParamValues(f)
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "" || name == "-" || done[name] {
			continue
		}
		done[name] = true
		if nf, ok := fv.Addr().Interface().(namedField); ok {
			nf.setName(name)
		}
		raw, ok := f[name]
		if !ok || isNull(raw) {
			continue
		}
		if rm, ok := fv.Addr().Interface().(*json.RawMessage); ok {
			*rm = bytes.TrimSpace(raw)
			continue
		}
		// The field types never fail (TestRequestFieldTypes keeps the
		// bodies to them): a wrong type is the field's error when read.
		_ = json.Unmarshal(raw, fv.Addr().Interface())
	}
	for _, ev := range embedded {
		fillRequest(f, ev, done)
	}
}
