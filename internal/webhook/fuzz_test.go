package webhook

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
)

// FuzzCheckRequest: a registration is either refused with a 400 naming one of its fields, or
// accepted with a URL that parses as http(s) with a host and selectors that are each "*", a
// type or a prefix, never empty.
func FuzzCheckRequest(f *testing.F) {
	for _, s := range [][3]string{
		{"https://hooks.example.com/a", "sandbox.,limit.", "0123456789abcdef"},
		{"http://127.0.0.1:8080/x", "*", ""},
		{"http://[fe80::1%25eth0]/", "exec.*", ""},
		{"http://user@host/", "a..b", "x"},
		{"HTTP://EXAMPLE.COM", ".x,*.y", ""},
		{"http://169.254.169.254/", "", ""},
		{"https://example.com:0/", "sandbox", "s"},
	} {
		f.Add(s[0], s[1], s[2], "desc")
	}
	d := New(nil, Config{}, nil)
	f.Fuzz(func(t *testing.T, rawURL, events, secret, description string) {
		req := api.WebhookRequest{URL: rawURL, Secret: secret, Description: description}
		if events != "" {
			req.Events = strings.Split(events, ",")
		}
		got, err := d.checkRequest(req)
		if err != nil {
			fe, ok := errors.AsType[*errdefs.FieldError](err)
			if !ok || !errors.Is(err, errdefs.ErrInvalidArgument) || fe.Message == "" ||
				!(fe.Field == "url" || fe.Field == "secret" || fe.Field == "description" || strings.HasPrefix(fe.Field, "events")) {
				t.Fatalf("refusal %v is not a 400 naming a field of the request", err)
			}
			return
		}
		u, err := url.Parse(got.URL)
		if err != nil || (strings.ToLower(u.Scheme) != "http" && strings.ToLower(u.Scheme) != "https") || u.Hostname() == "" || u.User != nil {
			t.Fatalf("accepted URL %q", got.URL)
		}
		if len(got.Events) == 0 {
			t.Fatal("accepted with no selector")
		}
		for _, s := range got.Events {
			if s == "" || (s != "*" && strings.Contains(s, "*")) || strings.HasPrefix(s, ".") || strings.Contains(s, "..") {
				t.Fatalf("accepted selector %q", s)
			}
		}
	})
}
