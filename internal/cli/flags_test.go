package cli

import (
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
)

func TestParseMiB(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"512M", 512, true}, {"512m", 512, true}, {"512MiB", 512, true}, {"512MB", 512, true},
		{"1G", 1024, true}, {"1.5g", 1536, true}, {"2048K", 2, true}, {"256", 256, true}, {"1T", 1 << 20, true},
		{"100K", 0, false}, {"abc", 0, false}, {"-1G", 0, false}, {"0", 0, false}, {"", 0, false},
	} {
		got, err := parseMiB(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseMiB(%q) = %d, %v; want %d ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestDurationFlag(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"30s", 30 * time.Second, true}, {"2m", 2 * time.Minute, true}, {"90", 90 * time.Second, true},
		{"0.5", 500 * time.Millisecond, true}, {"-1s", 0, false}, {"0", 0, false}, {"soon", 0, false},
	} {
		var d time.Duration
		err := durationFlag{&d}.Set(c.in)
		if (err == nil) != c.ok || (c.ok && d != c.want) {
			t.Errorf("duration %q = %v, %v; want %v ok=%v", c.in, d, err, c.want, c.ok)
		}
	}
}

func TestCredentialFlags(t *testing.T) {
	t.Setenv("AIRLOCK_TEST_AUTH", "Bearer sk-test")
	for _, c := range []struct {
		in      string
		want    api.Credential
		wantErr bool
	}{
		{in: "api.a.com:Authorization:secret=openai", want: api.Credential{Host: "api.a.com", Header: "Authorization", Secret: "openai"}},
		{in: "api.a.com:Authorization:env=AIRLOCK_TEST_AUTH", want: api.Credential{Host: "api.a.com", Header: "Authorization", Value: "Bearer sk-test"}},
		{in: "api.a.com:Authorization:env=AIRLOCK_TEST_UNSET", wantErr: true},
		{in: "api.a.com:Authorization:value=sk-plain", wantErr: true}, // never on the command line
		{in: "api.a.com:Authorization", wantErr: true},
		{in: ":Authorization:secret=x", wantErr: true},
	} {
		f := specFlags{creds: listFlag{c.in}}
		got, err := f.credentials()
		if (err != nil) != c.wantErr {
			t.Errorf("%q: error %v, want error %v", c.in, err, c.wantErr)
			continue
		}
		if !c.wantErr && (len(got) != 1 || got[0] != c.want) {
			t.Errorf("%q: %+v, want %+v", c.in, got, c.want)
		}
	}
}
