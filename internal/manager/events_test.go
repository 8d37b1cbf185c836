package manager

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCapString(t *testing.T) {
	for _, c := range []struct {
		name string
		s    string
		n    int
		want string
	}{
		{"short", "curl/8.5", 256, "curl/8.5"},
		{"exact", "abcd", 4, "abcd"},
		{"long", "abcdef", 4, "abcd…[+2 bytes]"},
		{"rune boundary", "aé" + "é", 2, "a…[+4 bytes]"}, // é is 2 bytes: no half rune is kept
		{"empty", "", 4, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := capString(c.s, c.n)
			if got != c.want || !utf8.ValidString(got) {
				t.Errorf("capString(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
			}
		})
	}
}

// TestCapRequest: every string a client chooses is capped, whatever its size; the rest is kept.
func TestCapRequest(t *testing.T) {
	huge := strings.Repeat("x", 900<<10)
	r := capRequest(Request{Method: huge, Path: "/" + huge, SandboxID: huge, Remote: huge, UserAgent: huge,
		KeyID: "key_1", Status: 200, Code: "not_found"})
	for _, c := range []struct {
		field string
		got   string
		max   int
	}{
		{"method", r.Method, maxMethod},
		{"path", r.Path, maxPath},
		{"sandboxId", r.SandboxID, maxSandboxID},
		{"remote", r.Remote, maxRemote},
		{"userAgent", r.UserAgent, maxUserAgent},
	} {
		if len(c.got) > c.max+32 || !strings.Contains(c.got, "…[+") {
			t.Errorf("%s: %d bytes (%.40q...), want at most %d and a mark that it was cut", c.field, len(c.got), c.got, c.max)
		}
	}
	if r.KeyID != "key_1" || r.Status != 200 || r.Code != "not_found" {
		t.Errorf("capRequest changed what the daemon set: %+v", r)
	}
	ok := Request{Method: "POST", Path: "/api/v1/sandboxes/sbx_01J0/exec", SandboxID: "sbx_01J0", Remote: "127.0.0.1:5555", UserAgent: "airlock-go/1"}
	if got := capRequest(ok); got != ok {
		t.Errorf("an ordinary request was changed: %+v", got)
	}
}
