package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
)

// A tool's arguments are checked against its input schema (JSON Schema, draft 2020-12 unless the
// schema names another) by santhosh-tekuri/jsonschema, never by hand. airlock adds three keywords
// (docs/tools.md#argument-rules), compiled as a vocabulary of that library:
//
//	x-airlock-path-prefix   {allow: [...], deny: [...]}: a string that is an absolute path whose
//	                        cleaned form is under one of allow (when given) and under none of deny
//	x-airlock-email-domains [...]: a string that is an address at one of these domains
//	                        ("company.com", or "*.company.com" for any name below it)
//	x-airlock-sensitive     true: the value is redacted in the audit log (an annotation)
const (
	KeywordPathPrefix   = "x-airlock-path-prefix"
	KeywordEmailDomains = "x-airlock-email-domains"
	KeywordSensitive    = "x-airlock-sensitive"
)

// Redacted replaces a sensitive argument's value in the audit log.
const Redacted = "[redacted]"

// schemaURL is where a tool's schema is compiled from: a name, never fetched.
const schemaURL = "airlock:///tool-schema.json"

// vocabURL names airlock's vocabulary of keywords.
const vocabURL = "https://airlock.run/schema/tools-vocabulary"

// Schema is a tool's compiled input schema.
type Schema struct {
	doc map[string]any
	sch *jsonschema.Schema
	// sensitive are the argument paths marked x-airlock-sensitive: property names, "*" for every
	// item of an array.
	sensitive [][]string
}

// noLoader refuses every URL: a schema's $ref reaches only inside the schema (and the drafts'
// metaschemas, built into the library). Without it the library's default would read files of
// the daemon's host (file://) for a tenant's schema.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("$ref %q: a tool's schema may refer only inside itself", url)
}

// CompileSchema checks and compiles raw (nil: {"type":"object"}), at most maxBytes as JSON.
// Errors are *errdefs.FieldError naming inputSchema.
func CompileSchema(raw map[string]any, maxBytes int) (*Schema, error) {
	if raw == nil {
		raw = map[string]any{"type": "object"}
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, errdefs.Invalid("inputSchema", "cannot encode: %v", err)
	}
	if maxBytes > 0 && len(b) > maxBytes {
		return nil, errdefs.TooLarge("inputSchema", "is %d bytes as JSON; a tool's schema may have at most %d (config tools.limits.maxSchemaBytes)", len(b), maxBytes)
	}
	if t, ok := raw["type"]; !ok || t != "object" {
		return nil, errdefs.Invalid("inputSchema.type", `must be "object": a tool's arguments are a JSON object`)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, errdefs.Invalid("inputSchema", "%v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.AssertVocabs()
	c.UseLoader(noLoader{})
	c.RegisterVocabulary(vocabulary())
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, errdefs.Invalid("inputSchema", "%v", err)
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, errdefs.Invalid("inputSchema", "%s", strings.ReplaceAll(err.Error(), schemaURL, "inputSchema"))
	}
	s := &Schema{doc: raw, sch: sch}
	s.sensitive = sensitivePaths(raw, nil, 0)
	return s, nil
}

// Doc is the schema as it was given (or the default).
func (s *Schema) Doc() map[string]any { return s.doc }

// printer formats the library's messages.
var printer = message.NewPrinter(language.English)

// Validate checks args against the schema. A failure is a 400 invalid_arguments naming the
// argument's JSON pointer (field) and the keyword it broke (rule).
func (s *Schema) Validate(args map[string]any) error {
	if args == nil {
		args = map[string]any{}
	}
	// The arguments as encoding/json decoded them (float64 numbers, which the library takes)
	// are validated as they are: a call's hot path.
	err := s.sch.Validate(args)
	if err == nil {
		return nil
	}
	ve, ok := errors.AsType[*jsonschema.ValidationError](err)
	if !ok {
		return &errdefs.FieldError{Field: "arguments", Code: api.CodeInvalidArguments, Message: err.Error()}
	}
	leaf := firstLeaf(ve)
	field, rule := pointer(leaf.InstanceLocation), strings.Join(leaf.ErrorKind.KeywordPath(), "/")
	switch k := leaf.ErrorKind.(type) {
	case *kind.Required:
		field = pointer(append(slices.Clone(leaf.InstanceLocation), k.Missing[0]))
	case *kind.AdditionalProperties:
		field = pointer(append(slices.Clone(leaf.InstanceLocation), k.Properties[0]))
	}
	if rule == "" {
		rule = "schema"
	}
	if field == "" {
		field = "/"
	}
	return &errdefs.FieldError{Field: field, Rule: rule, Code: api.CodeInvalidArguments,
		Message: fmt.Sprintf("does not match the tool's schema (%s): %s", rule, leaf.ErrorKind.LocalizedString(printer))}
}

// firstLeaf is the first error without causes, in instance-location then keyword order, so
// that the same arguments always name the same field.
func firstLeaf(ve *jsonschema.ValidationError) *jsonschema.ValidationError {
	var leaves []*jsonschema.ValidationError
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, e)
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	slices.SortStableFunc(leaves, func(a, b *jsonschema.ValidationError) int {
		if c := strings.Compare(pointer(a.InstanceLocation), pointer(b.InstanceLocation)); c != 0 {
			return c
		}
		return strings.Compare(strings.Join(a.ErrorKind.KeywordPath(), "/"), strings.Join(b.ErrorKind.KeywordPath(), "/"))
	})
	return leaves[0]
}

// pointer is a JSON pointer (RFC 6901) of tokens.
func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
}

// Redact returns a copy of args with every x-airlock-sensitive value replaced by Redacted.
func (s *Schema) Redact(args map[string]any) map[string]any {
	if len(s.sensitive) == 0 || args == nil {
		return args
	}
	out := deepCopy(args).(map[string]any)
	for _, p := range s.sensitive {
		redactAt(out, p)
	}
	return out
}

func redactAt(v any, p []string) {
	if len(p) == 0 {
		return
	}
	switch x := v.(type) {
	case map[string]any:
		if p[0] == "*" {
			return
		}
		if _, ok := x[p[0]]; !ok {
			return
		}
		if len(p) == 1 {
			x[p[0]] = Redacted
			return
		}
		redactAt(x[p[0]], p[1:])
	case []any:
		if p[0] != "*" {
			return
		}
		for i := range x {
			if len(p) == 1 {
				x[i] = Redacted
			} else {
				redactAt(x[i], p[1:])
			}
		}
	}
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = deepCopy(e)
		}
		return l
	}
	return v
}

// sensitivePaths finds the properties (and array items) marked x-airlock-sensitive under
// schema s, following properties and items (not $ref: a sensitive field is marked where it is).
func sensitivePaths(s map[string]any, at []string, depth int) [][]string {
	if depth > 32 {
		return nil
	}
	var out [][]string
	if v, _ := s[KeywordSensitive].(bool); v && len(at) > 0 {
		return [][]string{slices.Clone(at)}
	}
	if props, ok := s["properties"].(map[string]any); ok {
		for name, p := range props {
			if ps, ok := p.(map[string]any); ok {
				out = append(out, sensitivePaths(ps, append(slices.Clone(at), name), depth+1)...)
			}
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		out = append(out, sensitivePaths(items, append(slices.Clone(at), "*"), depth+1)...)
	}
	return out
}

// The vocabulary of airlock's keywords.

// vocabMeta checks the keywords' own shape when a schema is compiled.
const vocabMeta = `{
	"properties": {
		"x-airlock-path-prefix": {
			"type": "object",
			"properties": {
				"allow": {"type": "array", "items": {"type": "string", "pattern": "^/"}},
				"deny":  {"type": "array", "items": {"type": "string", "pattern": "^/"}}
			},
			"additionalProperties": false
		},
		"x-airlock-email-domains": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
		"x-airlock-sensitive": {"type": "boolean"}
	}
}`

func vocabulary() *jsonschema.Vocabulary {
	meta, err := jsonschema.UnmarshalJSON(strings.NewReader(vocabMeta))
	if err != nil {
		panic(err) // a constant
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(vocabURL, meta); err != nil {
		panic(err)
	}
	return &jsonschema.Vocabulary{URL: vocabURL, Schema: c.MustCompile(vocabURL), Compile: compileKeywords}
}

// keywords is the compiled form of airlock's keywords in one schema object.
type keywords struct {
	allow, deny []string // cleaned path prefixes
	hasPrefix   bool
	domains     []string // lower-case
}

func compileKeywords(_ *jsonschema.CompilerContext, obj map[string]any) (jsonschema.SchemaExt, error) {
	var k keywords
	if pp, ok := obj[KeywordPathPrefix].(map[string]any); ok {
		k.hasPrefix = true
		k.allow, k.deny = cleanPrefixes(pp["allow"]), cleanPrefixes(pp["deny"])
	}
	if ds, ok := obj[KeywordEmailDomains].([]any); ok {
		for _, d := range ds {
			if s, ok := d.(string); ok {
				k.domains = append(k.domains, strings.ToLower(strings.TrimSuffix(s, ".")))
			}
		}
	}
	if !k.hasPrefix && k.domains == nil {
		return nil, nil
	}
	return &k, nil
}

func cleanPrefixes(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, e := range l {
		if s, ok := e.(string); ok {
			out = append(out, path.Clean(s))
		}
	}
	return out
}

// Validate implements jsonschema.SchemaExt: only strings are checked (type says the rest).
func (k *keywords) Validate(ctx *jsonschema.ValidatorContext, v any) {
	s, ok := v.(string)
	if !ok {
		return
	}
	if k.hasPrefix {
		if reason := k.checkPath(s); reason != "" {
			ctx.AddError(&extError{keyword: KeywordPathPrefix, msg: reason})
		}
	}
	if k.domains != nil {
		if reason := checkDomain(s, k.domains); reason != "" {
			ctx.AddError(&extError{keyword: KeywordEmailDomains, msg: reason})
		}
	}
}

// checkPath says why p breaks the prefixes, or "". The check is on the path's cleaned form, so
// that /workspace/../system is /system; it is lexical (the sandbox's own mounts and permissions
// are the boundary for what a link points at).
func (k *keywords) checkPath(p string) string {
	if !path.IsAbs(p) {
		return fmt.Sprintf("%q is not an absolute path", p)
	}
	clean := path.Clean(p)
	for _, d := range k.deny {
		if under(clean, d) {
			return fmt.Sprintf("%s is under %s, which is denied", clean, d)
		}
	}
	if len(k.allow) == 0 {
		return ""
	}
	for _, a := range k.allow {
		if under(clean, a) {
			return ""
		}
	}
	return fmt.Sprintf("%s is under none of the allowed prefixes %s", clean, strings.Join(k.allow, ", "))
}

// under reports whether clean path p is prefix or below it, by whole components.
func under(p, prefix string) bool {
	return prefix == "/" || p == prefix || strings.HasPrefix(p, prefix+"/")
}

// checkDomain says why addr is not an address at one of domains, or "".
func checkDomain(addr string, domains []string) string {
	at := strings.LastIndexByte(addr, '@')
	if at <= 0 || at == len(addr)-1 {
		return fmt.Sprintf("%q is not an email address", addr)
	}
	d := strings.ToLower(strings.TrimSuffix(addr[at+1:], "."))
	for _, want := range domains {
		if suffix, ok := strings.CutPrefix(want, "*."); ok {
			if strings.HasSuffix(d, "."+suffix) {
				return ""
			}
		} else if d == want {
			return ""
		}
	}
	return fmt.Sprintf("%s is not one of the allowed domains %s", d, strings.Join(domains, ", "))
}

// extError is a failure of one of airlock's keywords.
type extError struct{ keyword, msg string }

func (e *extError) KeywordPath() []string                   { return []string{e.keyword} }
func (e *extError) LocalizedString(*message.Printer) string { return e.msg }
