package wire

// Decoding of request bodies into the typed request of each dialect. A
// body is decoded once (Decode) into a struct whose json tags name
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
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// NamedField is a field type that reports errors under the field's JSON
// name; Decode gives it that name, and a dialect's converter that maps a
// field onto another's name renames it (SetName).
type NamedField interface{ SetName(name string) }

// Opt is an optional field of type T: Set when given and not null; Bad
// when the value does not decode as a T.
type Opt[T any] struct {
	name string
	Set  bool
	V    T
	Bad  bool
}

// SetName names the field in its errors.
func (o *Opt[T]) SetName(name string) { o.name = name }

// UnmarshalJSON records the value; it never fails (see Read).
func (o *Opt[T]) UnmarshalJSON(b []byte) error {
	if IsNull(b) {
		return nil
	}
	o.Set = true
	if err := json.Unmarshal(b, &o.V); err != nil {
		o.Bad = true
	}
	return nil
}

// Err is the field's error when it is given with a value that is not a
// T (want describes a T).
func (o *Opt[T]) Err(want string) error {
	if o.Set && o.Bad {
		return Errorf("%q must be %s", o.name, want)
	}
	return nil
}

// Read stores the value in dst when given.
func (o *Opt[T]) Read(dst *T, want string) error {
	if err := o.Err(want); err != nil || !o.Set {
		return err
	}
	*dst = o.V
	return nil
}

// Some returns an Opt holding v, as if name had been given as v.
func Some[T any](name string, v T) Opt[T] { return Opt[T]{name: name, Set: true, V: v} }

// Num is an optional number, read as a float or an integer as the
// field wants it (a float with no fraction is an integer).
type Num struct {
	name string
	Set  bool
	num  json.Number // "" when the value is not a number
}

func (o *Num) SetName(name string) { o.name = name }

// UnmarshalJSON records the value; it never fails.
func (o *Num) UnmarshalJSON(b []byte) error {
	if IsNull(b) {
		return nil
	}
	o.Set = true
	if Kind(b) == 'n' {
		_ = json.Unmarshal(b, &o.num)
	}
	return nil
}

// NumInt and NumFloat return a Num holding n or v, as if name had
// been given as that number.
func NumInt(name string, n int64) Num {
	return Num{name: name, Set: true, num: json.Number(strconv.FormatInt(n, 10))}
}

func NumFloat(name string, v float64) Num {
	return Num{name: name, Set: true, num: json.Number(strconv.FormatFloat(v, 'g', -1, 64))}
}

// Float64 returns the number.
func (o *Num) Float64() (float64, error) {
	v, err := strconv.ParseFloat(string(o.num), 64)
	if o.num == "" || err != nil {
		return 0, Errorf("%q must be a number", o.name)
	}
	return v, nil
}

// Float stores the number in dst when given; it must fit a float32.
func (o *Num) Float(dst *float32) error {
	if !o.Set {
		return nil
	}
	v, err := o.Float64()
	if err != nil {
		return err
	}
	return CheckFloat(o.name, v, dst)
}

// Integer returns the number as an integer.
func (o *Num) Integer() (int64, error) {
	if o.num == "" {
		return 0, Errorf("%q must be an integer", o.name)
	}
	return NumInteger(o.num, o.name)
}

// NumInteger reads num as an integer (a float with no fraction is one).
func NumInteger(num json.Number, name string) (int64, error) {
	if n, err := strconv.ParseInt(num.String(), 10, 64); err == nil {
		return n, nil
	}
	x, err := strconv.ParseFloat(num.String(), 64)
	if err != nil || x != math.Trunc(x) || math.Abs(x) > 1<<53 {
		return 0, Errorf("%q must be an integer in range, got %s", name, num.String())
	}
	return int64(x), nil
}

// Int stores the integer in dst when given; it must be in [lo, hi].
func (o *Num) Int(dst *int, lo, hi int64) error {
	if !o.Set {
		return nil
	}
	n, err := o.Integer()
	if err != nil {
		return err
	}
	return CheckInt(o.name, n, dst, lo, hi)
}

// MaxStrings is the most entries an array of strings in a request may
// have: decoding an array of short strings takes about 25 times its bytes
// (a string header and an allocation for every few bytes of JSON), so a
// longer one is refused as it is read, not decoded whole and then
// counted. No field wants as many: stop strings and DRY breakers stop at
// 64, samplers at sampling.MaxSamplers.
const MaxStrings = 4096

// ErrTooMany is DecodeStrings' error for an array of more than its max.
var ErrTooMany = errors.New("too many strings")

// DecodeStrings decodes raw, a JSON array of strings (a null entry is
// "", as json.Unmarshal reads it), refusing it with ErrTooMany when it
// has more than max entries, counted (ShapeOf) before anything is
// decoded.
func DecodeStrings(raw []byte, max int) ([]string, error) {
	if Kind(raw) != 'a' {
		return nil, errNotStrings
	}
	if ShapeOf(raw).Entries > max {
		return nil, ErrTooMany
	}
	var out []string
	if json.Unmarshal(raw, &out) != nil {
		return nil, errNotStrings
	}
	return out, nil
}

var errNotStrings = errors.New("not an array of strings")

// StringList is an array of strings decoded with DecodeStrings: its
// UnmarshalJSON fails on more than MaxStrings entries.
type StringList []string

func (l *StringList) UnmarshalJSON(b []byte) error {
	if IsNull(b) {
		*l = nil
		return nil
	}
	v, err := DecodeStrings(b, MaxStrings)
	switch err {
	case nil:
		*l = v
		return nil
	case ErrTooMany:
		return fmt.Errorf("an array of more than %d strings", MaxStrings)
	}
	return errors.New("not an array of strings")
}

// Strs is an optional string or array of strings (of at most MaxStrings:
// Many when it has more).
type Strs struct {
	name string
	Set  bool
	V    []string
	Bad  bool
	Many bool
}

func (o *Strs) SetName(name string) { o.name = name }

// UnmarshalJSON records the value; it never fails.
func (o *Strs) UnmarshalJSON(b []byte) error {
	if IsNull(b) {
		return nil
	}
	o.Set = true
	if Kind(b) == 's' {
		var s string
		o.Bad = json.Unmarshal(b, &s) != nil
		o.V = []string{s}
		return nil
	}
	v, err := DecodeStrings(b, MaxStrings)
	o.V, o.Bad, o.Many = v, err != nil, err == ErrTooMany
	return nil
}

// SomeStrs returns a Strs holding v, as if name had been given as v.
func SomeStrs(name string, v []string) Strs { return Strs{name: name, Set: true, V: v} }

// Read stores the strings in dst when given.
func (o *Strs) Read(dst *[]string) error {
	if !o.Set {
		return nil
	}
	if o.Many {
		return Errorf("%q has more than %d strings", o.name, MaxStrings)
	}
	if o.Bad {
		return Errorf("%q must be a string or an array of strings", o.name)
	}
	*dst = o.V
	return nil
}

// Decode decodes a JSON object body into dst, a pointer to a
// request struct (see the file's comment). A field's json tag is its name;
// a field of an embedded struct is shadowed by one of the same name
// outside it. Only the body's shape is an error here: empty, not an
// object, or malformed.
func Decode(body []byte, dst any) error {
	f, err := ParseFields(body)
	if err != nil {
		return err
	}
	DecodeFields(f, dst)
	return nil
}

// DecodeFields fills dst, a pointer to a request struct, from the body's
// fields f as Decode does.
func DecodeFields(f Fields, dst any) {
	fillRequest(f, reflect.ValueOf(dst).Elem(), map[string]bool{})
}

// fillRequest fills the struct v from f, skipping the names of done (and
// adding its own).
func fillRequest(f Fields, v reflect.Value, done map[string]bool) {
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
		if pv, ok := fv.Addr().Interface().(*Params); ok {
			*pv = decodeParams(f)
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "" || name == "-" || done[name] {
			continue
		}
		done[name] = true
		if nf, ok := fv.Addr().Interface().(NamedField); ok {
			nf.SetName(name)
		}
		raw, ok := f[name]
		if !ok || IsNull(raw) {
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
