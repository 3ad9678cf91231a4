// Package schema derives a JSON Schema, and the grammar of its JSON
// texts, from a Go type, so that a model can be asked for a value of that
// type and what it writes decoded into one.
//
// The schema comes from github.com/invopop/jsonschema's reflection; the
// grammar from llama.GrammarFromJSONSchema, which takes any schema text.
package schema

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"github.com/invopop/jsonschema"

	"github.com/x/llama"
)

// For returns the JSON Schema of Go type T (through
// github.com/invopop/jsonschema: struct fields by their json tags, required
// unless omitempty, no additional properties), self-contained. An error is
// a *llama.Error matching llama.ErrInvalid.
//
// Subschemas are written in place, except in a recursive type (a tree
// whose nodes hold nodes): each struct type then gets its subschema once,
// in $defs, referred to by $ref. A type JSON cannot hold (a channel, a
// function, a complex number) in a field that is not skipped is an error.
func For[T any]() (b []byte, err error) {
	t := reflect.TypeFor[T]()
	if err := checkType(t); err != nil {
		return nil, &llama.Error{Code: llama.CodeInvalid, Op: "schema", Err: err}
	}
	defer func() {
		if v := recover(); v != nil {
			b, err = nil, &llama.Error{Code: llama.CodeInvalid, Op: "schema", Err: fmt.Errorf("%v: %v", t, v)}
		}
	}()
	inline := !recursive(t, nil)
	r := &jsonschema.Reflector{ExpandedStruct: inline, DoNotReference: inline}
	var zero T
	s := r.Reflect(&zero)
	s.Version = ""
	s.ID = ""
	b, err = json.Marshal(s)
	if err != nil {
		return nil, &llama.Error{Code: llama.CodeInvalid, Op: "schema", Err: err}
	}
	return b, nil
}

// fields calls f with each field of struct type t that encoding/json
// writes (exported, or embedded; not tagged "-").
func fields(t reflect.Type, f func(reflect.StructField) bool) bool {
	for i := range t.NumField() {
		sf := t.Field(i)
		if (!sf.IsExported() && !sf.Anonymous) || sf.Tag.Get("json") == "-" {
			continue
		}
		if !f(sf) {
			return false
		}
	}
	return true
}

// recursive reports whether a struct type reached from t (through
// pointers, slices, arrays, maps and fields) holds itself again; path
// holds the struct types being walked.
func recursive(t reflect.Type, path []reflect.Type) bool {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return false
	}
	if slices.Contains(path, t) {
		return true
	}
	path = append(path, t)
	return !fields(t, func(sf reflect.StructField) bool { return !recursive(sf.Type, path) })
}

// checkType refuses the types JSON cannot hold, naming the field.
func checkType(t reflect.Type) error {
	var seen []reflect.Type
	var walk func(t reflect.Type, at string) error
	walk = func(t reflect.Type, at string) error {
		switch t.Kind() {
		case reflect.Chan, reflect.Func, reflect.Complex64, reflect.Complex128, reflect.UnsafePointer, reflect.Uintptr:
			if at == "" {
				at = "the type"
			}
			return fmt.Errorf("%s is a %v, which JSON cannot hold", at, t)
		case reflect.Pointer, reflect.Slice, reflect.Array:
			return walk(t.Elem(), at)
		case reflect.Map:
			if err := walk(t.Key(), at+" (map key)"); err != nil {
				return err
			}
			return walk(t.Elem(), at)
		case reflect.Struct:
			if slices.Contains(seen, t) {
				return nil
			}
			seen = append(seen, t)
			var err error
			fields(t, func(sf reflect.StructField) bool {
				name := sf.Name
				if at != "" {
					name = at + "." + name
				}
				err = walk(sf.Type, name)
				return err == nil
			})
			return err
		}
		return nil
	}
	return walk(t, "")
}

// GrammarFor returns a grammar whose sentences are JSON texts that
// unmarshal into a T: ask the model for a T, and decode what it writes.
func GrammarFor[T any]() (*llama.Grammar, error) {
	s, err := For[T]()
	if err != nil {
		return nil, err
	}
	return llama.GrammarFromJSONSchema(context.Background(), s)
}
