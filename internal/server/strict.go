package server

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/airlockrun/airlock/internal/errdefs"
)

// checkKeys walks a JSON document beside the Go type it is decoded into and refuses the first
// object key that the type does not have, or that an object repeats, naming its full path.
// encoding/json matches keys case-insensitively ("memoryMB" would silently set memoryMb), lets
// the last of two equal keys win and names an unknown key without its path; the API promises
// none of that.
func checkKeys(body []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	doc, err := readValue(dec, "", 0)
	if err != nil {
		if _, ok := errors.AsType[*errdefs.FieldError](err); ok {
			return err
		}
		return nil // syntax errors are reported by the decoder proper
	}
	return walkKeys(doc, t, "")
}

// maxDepth is encoding/json's own nesting limit: deeper documents are its error to report, and
// readValue does not recurse past it.
const maxDepth = 10000

// errTooDeep stops readValue at maxDepth.
var errTooDeep = errors.New("JSON nested too deeply")

// readValue reads one JSON value token by token into the shapes json.Unmarshal gives an any
// (objects as map[string]any, arrays as []any, numbers as json.Number), refusing an object key
// that the same object already had: a duplicate is a 400 naming its path (arrays' elements as
// path[i]) at any depth, also inside maps and values the types do not describe.
func readValue(dec *json.Decoder, path string, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errTooDeep
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		obj := map[string]any{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			if _, dup := obj[k]; dup {
				if k == "" {
					return nil, errdefs.Invalid(cmp.Or(path, "body"), "duplicate key \"\"")
				}
				return nil, errdefs.Invalid(join(path, k), "duplicate key")
			}
			if obj[k], err = readValue(dec, join(path, k), depth+1); err != nil {
				return nil, err
			}
		}
		_, err := dec.Token() // '}'
		return obj, err
	case json.Delim('['):
		arr := []any{}
		for i := 0; dec.More(); i++ {
			e, err := readValue(dec, fmt.Sprintf("%s[%d]", path, i), depth+1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, e)
		}
		_, err := dec.Token() // ']'
		return arr, err
	}
	return tok, nil
}

func walkKeys(v any, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch x := v.(type) {
	case map[string]any:
		switch t.Kind() {
		case reflect.Map:
			for k, e := range x {
				if err := walkKeys(e, t.Elem(), join(path, k)); err != nil {
					return err
				}
			}
		case reflect.Struct:
			fields := jsonFields(t)
			for k, e := range x {
				ft, ok := fields[k]
				if !ok {
					if k == "" {
						return errdefs.Invalid(cmp.Or(path, "body"), "unknown field \"\"")
					}
					if hint, ok := retired[join(path, k)]; ok {
						return errdefs.Invalid(join(path, k), "%s", hint)
					}
					return errdefs.Invalid(join(path, k), "unknown field")
				}
				if err := walkKeys(e, ft, join(path, k)); err != nil {
					return err
				}
			}
		}
	case []any:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for _, e := range x {
				if err := walkKeys(e, t.Elem(), path); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// retired are fields earlier versions took, with what to use instead.
var retired = map[string]string{
	"rootfs": "is not accepted: a host directory is the operator's to name; use template (GET /api/v1/templates lists those this key may use)",
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// jsonFields maps a struct's JSON keys to their types, embedded structs flattened.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
		case f.Anonymous && name == "":
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
		case name == "":
			out[f.Name] = f.Type
		default:
			out[name] = f.Type
		}
	}
	return out
}
