package tools

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
)

func mustSchema(t *testing.T, js string) *Schema {
	t.Helper()
	var raw map[string]any
	if err := json.Unmarshal([]byte(js), &raw); err != nil {
		t.Fatal(err)
	}
	s, err := CompileSchema(raw, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Seed 001's parameter validation: send_email only to a valid address at company.com, and
// delete_file never under /system/ — declared in the schema, checked by the library.
const (
	sendEmailSchema = `{"type": "object", "required": ["to", "subject"], "additionalProperties": false,
		"properties": {
			"to": {"type": "string", "format": "email", "x-airlock-email-domains": ["company.com"]},
			"subject": {"type": "string", "maxLength": 200},
			"body": {"type": "string", "x-airlock-sensitive": true}}}`
	deleteFileSchema = `{"type": "object", "required": ["path"],
		"properties": {"path": {"type": "string", "x-airlock-path-prefix": {"allow": ["/workspace", "/tmp"], "deny": ["/system/", "/workspace/.git"]}}}}`
)

func TestSeed001Validation(t *testing.T) {
	email, del := mustSchema(t, sendEmailSchema), mustSchema(t, deleteFileSchema)
	for _, c := range []struct {
		name        string
		s           *Schema
		args        string
		field, rule string // "" field: valid
	}{
		{"to company.com runs", email, `{"to": "a@company.com", "subject": "hi"}`, "", ""},
		{"upper-case domain is the same domain", email, `{"to": "a@Company.COM", "subject": "hi"}`, "", ""},
		{"to example.org refused", email, `{"to": "bob@example.org", "subject": "hi"}`, "/to", KeywordEmailDomains},
		{"malformed address refused", email, `{"to": "not an address", "subject": "hi"}`, "/to", "format"},
		{"a subdomain is another domain", email, `{"to": "a@evil.company.com", "subject": "hi"}`, "/to", KeywordEmailDomains},
		{"company.com as a suffix of another name", email, `{"to": "a@notcompany.com", "subject": "hi"}`, "/to", KeywordEmailDomains},
		{"missing subject", email, `{"to": "a@company.com"}`, "/subject", "required"},
		{"unknown argument", email, `{"to": "a@company.com", "subject": "x", "bcc": "e@evil.test"}`, "/bcc", "additionalProperties"},
		{"wrong type", email, `{"to": 5, "subject": "x"}`, "/to", "type"},
		{"delete in the workspace", del, `{"path": "/workspace/build/out.txt"}`, "", ""},
		{"delete /system/x refused", del, `{"path": "/system/x"}`, "/path", KeywordPathPrefix},
		{"delete /system itself refused", del, `{"path": "/system"}`, "/path", KeywordPathPrefix},
		{"traversal cleaned first", del, `{"path": "/workspace/../system/x"}`, "/path", KeywordPathPrefix},
		{"a denied prefix inside an allowed one", del, `{"path": "/workspace/.git/config"}`, "/path", KeywordPathPrefix},
		{"a name that only starts like an allowed one", del, `{"path": "/workspaces/x"}`, "/path", KeywordPathPrefix},
		{"outside every allowed prefix", del, `{"path": "/etc/passwd"}`, "/path", KeywordPathPrefix},
		{"relative paths refused", del, `{"path": "x/../../system"}`, "/path", KeywordPathPrefix},
		{"doubled slashes cleaned", del, `{"path": "//system//x"}`, "/path", KeywordPathPrefix},
	} {
		t.Run(c.name, func(t *testing.T) {
			var args map[string]any
			if err := json.Unmarshal([]byte(c.args), &args); err != nil {
				t.Fatal(err)
			}
			err := c.s.Validate(args)
			if c.field == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			fe, ok := errors.AsType[*errdefs.FieldError](err)
			if !ok {
				t.Fatalf("want a field error naming %s, got %v", c.field, err)
			}
			if fe.Field != c.field || fe.Rule != c.rule || fe.Code != api.CodeInvalidArguments || !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("got field %q rule %q code %q (%s); want field %q rule %q code %s", fe.Field, fe.Rule, fe.Code, fe.Message, c.field, c.rule, api.CodeInvalidArguments)
			}
		})
	}
}

func TestSchemaCompile(t *testing.T) {
	for _, c := range []struct {
		name, schema, want string
	}{
		{"not an object schema", `{"type": "string"}`, "inputSchema.type"},
		{"a remote $ref is never fetched", `{"type": "object", "properties": {"a": {"$ref": "http://127.0.0.1:1/x.json"}}}`, "refer only inside"},
		{"a file $ref is never read", `{"type": "object", "properties": {"a": {"$ref": "file:///etc/passwd"}}}`, "refer only inside"},
		{"a bad pattern", `{"type": "object", "properties": {"a": {"type": "string", "pattern": "("}}}`, "inputSchema"},
		{"a bad path prefix", `{"type": "object", "properties": {"a": {"x-airlock-path-prefix": {"allow": ["relative"]}}}}`, "inputSchema"},
		{"an unknown prefix field", `{"type": "object", "properties": {"a": {"x-airlock-path-prefix": {"alow": ["/x"]}}}}`, "inputSchema"},
		{"empty domains", `{"type": "object", "properties": {"a": {"x-airlock-email-domains": []}}}`, "inputSchema"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var raw map[string]any
			if err := json.Unmarshal([]byte(c.schema), &raw); err != nil {
				t.Fatal(err)
			}
			_, err := CompileSchema(raw, 64<<10)
			if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("want an invalid_argument naming %q, got %v", c.want, err)
			}
		})
	}
	big := map[string]any{"type": "object", "description": strings.Repeat("x", 70<<10)}
	if _, err := CompileSchema(big, 64<<10); !errors.Is(err, errdefs.ErrTooLarge) {
		t.Errorf("a schema over the cap: want ErrTooLarge, got %v", err)
	}
	if s, err := CompileSchema(nil, 0); err != nil || s.Validate(map[string]any{"x": 1}) != nil {
		t.Errorf("the default schema takes any object: %v", err)
	}
}

func TestRedact(t *testing.T) {
	s := mustSchema(t, `{"type": "object", "properties": {
		"body": {"type": "string", "x-airlock-sensitive": true},
		"auth": {"type": "object", "properties": {"token": {"type": "string", "x-airlock-sensitive": true}, "user": {"type": "string"}}},
		"keys": {"type": "array", "items": {"type": "string", "x-airlock-sensitive": true}}}}`)
	args := map[string]any{"body": "secret text", "auth": map[string]any{"token": "t0k", "user": "u"}, "keys": []any{"k1", "k2"}, "other": "x"}
	got := s.Redact(args)
	want := `{"auth":{"token":"[redacted]","user":"u"},"body":"[redacted]","keys":["[redacted]","[redacted]"],"other":"x"}`
	if b, _ := json.Marshal(got); string(b) != want {
		t.Errorf("redacted: %s, want %s", b, want)
	}
	if args["body"] != "secret text" {
		t.Error("Redact changed the caller's arguments")
	}
}
