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
		"properties": obj{"ok": obj{"const": false}, "error": g.schema(reflect.TypeFor[api.Error]())},
	}}}}
	// The compatibility surface's errors: {"error": {...}}, no envelope.
	bareErrResp := obj{"description": "error", "content": obj{"application/json": obj{"schema": g.schema(reflect.TypeFor[api.CompatError]())}}}
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
			op["requestBody"] = obj{"required": true, "content": obj{"application/json": obj{"schema": g.schema(reflect.TypeOf(rt.doc.body))}}}
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
			ok["content"] = obj{"application/json": obj{"schema": g.schema(reflect.TypeOf(rt.doc.resp))}}
		case rt.doc.resp != nil:
			data := g.schema(reflect.TypeOf(rt.doc.resp))
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

// schemaGen turns Go types into JSON Schema, with named structs as components.
type schemaGen struct{ defs obj }

var (
	timeType    = reflect.TypeFor[time.Time]()
	commandType = reflect.TypeFor[api.Command]()
	vcpuType    = reflect.TypeFor[api.VCPU]()
)

func (g *schemaGen) schema(t reflect.Type) obj {
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
		return g.schema(t.Elem())
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
		return obj{"type": "array", "items": g.schema(t.Elem())}
	case reflect.Map:
		return obj{"type": "object", "additionalProperties": g.schema(t.Elem())}
	case reflect.Interface:
		return obj{}
	case reflect.Struct:
		name := t.Name()
		if _, done := g.defs[name]; !done {
			g.defs[name] = obj{} // placeholder against recursion
			props := obj{}
			g.fields(t, props)
			g.defs[name] = obj{"type": "object", "properties": props}
		}
		return obj{"$ref": "#/components/schemas/" + name}
	}
	return obj{}
}

// fields adds t's JSON fields to props; embedded structs are flattened, as encoding/json does.
func (g *schemaGen) fields(t reflect.Type, props obj) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if f.Anonymous && tag == "" {
			g.fields(f.Type, props)
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		props[tag] = g.schema(f.Type)
	}
}
