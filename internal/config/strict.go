package config

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// decodeStrict decodes the JSON document b into v, refusing unknown fields. encoding/json names
// an unknown field by its key alone ("uidBasee"), which in a file of nested sections does not say
// where it is; the error then names its path from the document's top ("process.uidBasee").
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		return nil
	}
	key, ok := strings.CutPrefix(err.Error(), "json: unknown field ")
	if !ok {
		return err
	}
	if key, uerr := strconv.Unquote(key); uerr == nil {
		var doc any
		if json.Unmarshal(b, &doc) == nil {
			if at := findField(doc, reflect.TypeOf(v), "", key); at != "" {
				return fmt.Errorf("unknown field %q", at)
			}
		}
	}
	return err
}

// findField returns the path of a key named key in doc that type t has no field for, or "".
// Objects' keys are visited in order, so that the answer does not change from run to run.
func findField(doc any, t reflect.Type, at, key string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, _ := doc.(map[string]any)
		fields := jsonFields(t)
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			path := k
			if at != "" {
				path = at + "." + k
			}
			ft, known := lookupField(fields, k)
			if !known {
				if k == key {
					return path
				}
				continue
			}
			if p := findField(obj[k], ft, path, key); p != "" {
				return p
			}
		}
	case reflect.Map:
		obj, _ := doc.(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			if p := findField(obj[k], t.Elem(), at+"["+k+"]", key); p != "" {
				return p
			}
		}
	case reflect.Slice, reflect.Array:
		arr, _ := doc.([]any)
		for i, e := range arr {
			if p := findField(e, t.Elem(), at+"["+strconv.Itoa(i)+"]", key); p != "" {
				return p
			}
		}
	}
	return ""
}

// jsonFields returns a struct's fields by their JSON names, those of embedded structs included
// (an outer field's name wins, as in encoding/json).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	var embedded []reflect.Type
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			embedded = append(embedded, ft)
			continue
		}
		if !f.IsExported() {
			continue
		}
		fields[cmp.Or(name, f.Name)] = f.Type
	}
	for _, e := range embedded {
		for n, ft := range jsonFields(e) {
			if _, ok := fields[n]; !ok {
				fields[n] = ft
			}
		}
	}
	return fields
}

// lookupField finds key among fields as encoding/json does: the exact name, else one that
// differs only in case.
func lookupField(fields map[string]reflect.Type, key string) (reflect.Type, bool) {
	if t, ok := fields[key]; ok {
		return t, true
	}
	for n, t := range fields {
		if strings.EqualFold(n, key) {
			return t, true
		}
	}
	return nil, false
}
