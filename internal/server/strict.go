package server

import (
	"bytes"
	"cmp"
	"encoding/json"
	"reflect"
	"strings"

	"github.com/airlockrun/airlock/internal/errdefs"
)

// checkKeys walks a JSON document beside the Go type it is decoded into and refuses the first
// object key that the type does not have, naming its full path. encoding/json matches keys
// case-insensitively ("memoryMB" would silently set memoryMb) and names an unknown key without
// its path; the API promises neither.
func checkKeys(body []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil // syntax errors are reported by the decoder proper
	}
	return walkKeys(doc, t, "")
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
