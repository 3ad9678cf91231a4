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
	"strings"

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
	rec, err := walkType(t)
	if err != nil {
		return nil, &llama.Error{Code: llama.CodeInvalid, Op: "schema", Err: err}
	}
	defer func() {
		if v := recover(); v != nil {
			b, err = nil, &llama.Error{Code: llama.CodeInvalid, Op: "schema", Err: fmt.Errorf("%v: %v", t, v)}
		}
	}()
	r := &jsonschema.Reflector{ExpandedStruct: !rec, DoNotReference: !rec, Namer: defName}
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

// defName names a type's entry in $defs: its name, with what a JSON
// pointer or a grammar rule cannot hold (a generic type's package path)
// replaced.
func defName(t reflect.Type) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '~' || r == '#' || r == '%' || r == ' ' {
			return '_'
		}
		return r
	}, t.Name())
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

// walkType reads the types t holds (through pointers, slices, arrays,
// maps and written fields): whether one holds itself again (recursive),
// and an error for a type JSON cannot hold or a recursion that passes
// through no struct (type Tree map[string]Tree), which the schema's
// references cannot express.
func walkType(t reflect.Type) (recursive bool, err error) {
	var path []reflect.Type // the types being walked, outermost first
	done := map[reflect.Type]bool{}
	var walk func(t reflect.Type, at string) error
	walk = func(t reflect.Type, at string) error {
		if i := slices.Index(path, t); i >= 0 {
			for _, u := range path[i:] {
				if u.Kind() == reflect.Struct {
					recursive = true
					return nil
				}
			}
			return fmt.Errorf("%s: %v holds itself through no struct, which a schema cannot refer to (make the recursion go through a struct)", where(at), t)
		}
		if done[t] {
			return nil
		}
		path = append(path, t)
		defer func() { path = path[:len(path)-1]; done[t] = true }()
		switch t.Kind() {
		case reflect.Chan, reflect.Func, reflect.Complex64, reflect.Complex128, reflect.UnsafePointer, reflect.Uintptr:
			return fmt.Errorf("%s is a %v, which JSON cannot hold", where(at), t)
		case reflect.Pointer, reflect.Slice, reflect.Array:
			return walk(t.Elem(), at)
		case reflect.Map:
			if err := walk(t.Key(), at+" (map key)"); err != nil {
				return err
			}
			return walk(t.Elem(), at)
		case reflect.Struct:
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
	err = walk(t, "")
	return recursive, err
}

func where(at string) string {
	if at == "" {
		return "the type"
	}
	return at
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
