package server

import (
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlockrun/airlock/api"
)

// The OpenAPI 3.1 document is built from the route table and the api package's types by
// reflection, so it always names every route and every field the daemon really has.

var (
	openapiOnce sync.Once
	openapiDoc  []byte
)

func openapi(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	openapiOnce.Do(func() { openapiDoc, _ = json.MarshalIndent(buildOpenAPI(s.cfg.Version), "", "  ") })
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openapiDoc) // the client gone: nothing to answer
	return nil, written
}

type obj = map[string]any

// pathParam matches a route's path parameters: {id}, and {ref...}, which takes the rest of the
// path (OpenAPI spells it {ref}).
var pathParam = regexp.MustCompile(`\{(\w+)(?:\.\.\.)?\}`)

// docPath is a route's path as OpenAPI spells it.
func docPath(path string) string { return strings.ReplaceAll(path, "...}", "}") }

func buildOpenAPI(version string) obj {
	g := &schemaGen{defs: obj{}}
	errResp := obj{"description": "error", "content": obj{"application/json": obj{"schema": obj{
		"type": "object", "required": []string{"ok", "error"},
		"properties": obj{"ok": obj{"const": false}, "error": g.schema(reflect.TypeFor[api.Error](), false)},
	}}}}
	// The compatibility surface's errors: {"error": {...}}, no envelope.
	bareErrResp := obj{"description": "error", "content": obj{"application/json": obj{"schema": g.schema(reflect.TypeFor[api.CompatError](), false)}}}
	paths := obj{}
	for _, rt := range routes() {
		op := obj{"summary": rt.doc.summary, "operationId": operationID(rt)}
		if rt.doc.admin {
			op["summary"] = rt.doc.summary + " (admin key only)"
		}
		var params []any
		for _, m := range pathParam.FindAllStringSubmatch(rt.path, -1) {
			pp := obj{"name": m[1], "in": "path", "required": true, "schema": obj{"type": "string"}}
			for _, d := range rt.doc.path {
				if d.name == m[1] {
					pp["description"], pp["schema"] = d.desc, obj{"type": d.typ}
				}
			}
			params = append(params, pp)
		}
		for _, q := range rt.doc.query {
			params = append(params, obj{"name": q.name, "in": "query", "description": q.desc, "schema": obj{"type": q.typ}})
		}
		if len(params) > 0 {
			op["parameters"] = params
		}
		if rt.public {
			op["security"] = []any{}
		}
		switch {
		case rt.doc.body != nil:
			op["requestBody"] = obj{"required": true, "content": obj{"application/json": obj{"schema": g.schema(reflect.TypeOf(rt.doc.body), true)}}}
		case rt.doc.rawBody:
			op["requestBody"] = obj{"required": true, "content": obj{"application/octet-stream": obj{"schema": obj{"type": "string", "format": "binary"}}}}
		}
		ok := obj{"description": "success"}
		switch {
		case rt.doc.rawResp && rt.doc.rawType != "":
			ok["content"] = obj{rt.doc.rawType: obj{"schema": obj{"type": "string"}}}
		case rt.doc.rawResp:
			ok["content"] = obj{"application/octet-stream": obj{"schema": obj{"type": "string", "format": "binary"}}}
		case rt.doc.resp != nil && rt.doc.bare:
			ok["content"] = obj{"application/json": obj{"schema": g.schema(reflect.TypeOf(rt.doc.resp), false)}}
		case rt.doc.resp != nil:
			data := g.schema(reflect.TypeOf(rt.doc.resp), false)
			ok["content"] = obj{"application/json": obj{"schema": obj{
				"type": "object", "required": []string{"ok", "data"},
				"properties": obj{"ok": obj{"const": true}, "data": data},
			}}}
		case rt.doc.status == http.StatusNoContent:
			ok["description"] = "success, no content"
		default:
			ok["content"] = obj{"application/json": obj{"schema": obj{"type": "object"}}}
		}
		if rt.doc.stream != "" {
			ok["description"] = "success; streamed over " + rt.doc.stream + " (each message is the schema shown)"
		}
		status := strconv.Itoa(rt.doc.successStatus(rt.method))
		e := errResp
		if rt.doc.bare {
			e = bareErrResp
		}
		responses := obj{status: ok, "4XX": e, "5XX": e}
		if rt.doc.status == http.StatusAccepted {
			responses["202"] = obj{"description": "accepted: started, to be polled", "content": ok["content"]}
		}
		op["responses"] = responses
		p, _ := paths[docPath(rt.path)].(obj)
		if p == nil {
			p = obj{}
			paths[docPath(rt.path)] = p
		}
		p[strings.ToLower(rt.method)] = op
	}
	return obj{
		"openapi": "3.1.0",
		"info": obj{"title": "airlock", "version": version,
			"description": "Sandboxes for code that AI agents write. Every answer is {ok, data} or {ok: false, error: {code, message, field}}, " +
				"except on the compatibility surface /api/sandbox/... (seed 002): the object itself, or {error: {code, message, field}}."},
		"security":   []any{obj{"bearer": []any{}}},
		"paths":      paths,
		"components": obj{"schemas": g.defs, "securitySchemes": obj{"bearer": obj{"type": "http", "scheme": "bearer"}}},
	}
}

func operationID(rt route) string {
	p := pathParam.ReplaceAllString(rt.path, "by-$1")
	return strings.ToLower(rt.method) + strings.NewReplacer("/", "-", ".", "-").Replace(p)
}

// schemaGen turns Go types into JSON Schema, with named structs as components. A struct has two
// schemas where they differ: X, as answers carry it (required: every field without omitempty,
// since an answer always has it), and XInput, as a request may send it (required: only the fields
// tagged openapi:"required"; the daemon fills in the rest). Request bodies refer to the input
// schemas, answers to the others. Field tags add what reflection cannot see: `openapi:"required"`
// and `enum:"a,b,c"` (the values a string takes).
type schemaGen struct{ defs obj }

var (
	timeType    = reflect.TypeFor[time.Time]()
	commandType = reflect.TypeFor[api.Command]()
	vcpuType    = reflect.TypeFor[api.VCPU]()
)

// schema is t's schema; in asks for the input schemas of structs (above).
func (g *schemaGen) schema(t reflect.Type, in bool) obj {
	switch {
	case t == timeType:
		return obj{"type": "string", "format": "date-time"}
	case t == vcpuType:
		return obj{"oneOf": []any{obj{"type": "string", "pattern": `^[0-9]+(\.[0-9]+)?$`, "description": "vCPUs as a decimal string, e.g. \"2.0\" (answers use this form)"},
			obj{"type": "number"}}}
	case t == commandType:
		return obj{"oneOf": []any{obj{"type": "string", "description": "run by /bin/sh -c"}, obj{"type": "array", "items": obj{"type": "string"}}}}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.schema(t.Elem(), in)
	case reflect.String:
		return obj{"type": "string"}
	case reflect.Bool:
		return obj{"type": "boolean"}
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return obj{"type": "integer"}
	case reflect.Float64, reflect.Float32:
		return obj{"type": "number"}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return obj{"type": "string", "contentEncoding": "base64"}
		}
		return obj{"type": "array", "items": g.schema(t.Elem(), in)}
	case reflect.Map:
		return obj{"type": "object", "additionalProperties": g.schema(t.Elem(), in)}
	case reflect.Interface:
		return obj{}
	case reflect.Struct:
		return obj{"$ref": "#/components/schemas/" + g.component(t, in)}
	}
	return obj{}
}

// component defines t's schema (the input one when in) among the components, and returns its
// name: t's name, with "Input" when the input schema differs from the answer's.
func (g *schemaGen) component(t reflect.Type, in bool) string {
	name := t.Name()
	if in {
		out := g.defs[g.component(t, false)]
		s := g.object(t, name+"Input", true)
		if reflect.DeepEqual(s, out) {
			delete(g.defs, name+"Input")
			return name
		}
		return name + "Input"
	}
	g.object(t, name, false)
	return name
}

// object defines the component name as t's object schema, once, and returns it.
func (g *schemaGen) object(t reflect.Type, name string, in bool) obj {
	if s, done := g.defs[name].(obj); done {
		return s
	}
	g.defs[name] = obj{} // placeholder against recursion
	props := obj{}
	var required []string
	g.fields(t, props, &required, in)
	s := obj{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	g.defs[name] = s
	return s
}

// fields adds t's JSON fields to props, and those a message of its kind always has (in: a request
// must send) to required; embedded structs are flattened, as encoding/json does.
func (g *schemaGen) fields(t reflect.Type, props obj, required *[]string, in bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if f.Anonymous && tag == "" {
			g.fields(f.Type, props, required, in)
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		s := g.schema(f.Type, in)
		if enum := f.Tag.Get("enum"); enum != "" {
			s["enum"] = strings.Split(enum, ",")
		}
		props[tag] = s
		omitted := strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")
		if in && f.Tag.Get("openapi") == "required" || !in && !omitted {
			*required = append(*required, tag)
		}
	}
}
