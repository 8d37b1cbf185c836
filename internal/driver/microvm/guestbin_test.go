package microvm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockrun/airlock/internal/guest"
)

// TestGuestBinary: the guests run the configured binary, else airlock-guest beside airlock when it
// says it is of airlock's build, else airlock itself, and say why.
func TestGuestBinary(t *testing.T) {
	testBin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := func(body string) string { return "#!/bin/sh\n" + body + "\n" }
	for _, tc := range []struct {
		name       string
		configured string
		beside     string // airlock-guest's script, "" for none
		build      string // this binary's guest.Build
		realSelf   bool   // airlock is a copy of this test binary (else a path with no file)
		want       string // "guest", "self" or the configured path
		why        string
	}{
		{name: "configured", configured: "/opt/guest", beside: script("echo b1"), build: "b1", want: "/opt/guest", why: "configured"},
		{name: "none beside", build: "b1", want: "self", why: "no airlock-guest beside"},
		{name: "same build", beside: script(`[ "$1" = build-id ] && echo b1`), build: "b1", want: "guest", why: "of this build"},
		{name: "other build", beside: script("echo b2"), build: "b1", want: "self", why: `of build "b2", this airlock of "b1"`},
		{name: "broken", beside: script("exit 3"), build: "b1", want: "self", why: "exit status 3"},
		// A binary built without make (go test's) proves nothing about its source.
		{name: "unstamped", beside: script("echo"), realSelf: true, want: "self", why: "not built by make build"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			self, beside := filepath.Join(dir, "airlock"), filepath.Join(dir, GuestName)
			if tc.realSelf {
				b, err := os.ReadFile(testBin)
				if err == nil {
					err = os.WriteFile(self, b, 0o755)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if tc.beside != "" {
				if err := os.WriteFile(beside, []byte(tc.beside), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			old := guest.Build
			guest.Build = tc.build
			defer func() { guest.Build = old }()
			got, why := guestBinary(tc.configured, self)
			want := map[string]string{"guest": beside, "self": self}[tc.want]
			if want == "" {
				want = tc.want
			}
			if got != want || !strings.Contains(why, tc.why) {
				t.Errorf("guestBinary = %s (%s), want %s (%q)", got, why, want, tc.why)
			}
		})
	}
}
