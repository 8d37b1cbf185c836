package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestExitStatus checks that airlock run exits with the command's own status, 124 for a
// timeout, 137 for the memory limit and 127 for a command that does not exist.
func TestExitStatus(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		want       int
		maxElapsed time.Duration // 0: no bound
	}{
		{"true", []string{"--", "true"}, 0, 0},
		{"exit 3", []string{"--", "sh", "-c", "exit 3"}, 3, 0},
		{"exit 255", []string{"--", "sh", "-c", "exit 255"}, 255, 0},
		{"killed by signal", []string{"--", "sh", "-c", "kill -TERM $$"}, 128 + 15, 0},
		{"timeout", []string{"--timeout", "1s", "--", "sleep", "100"}, 124, 5 * time.Second},
		{"timeout in seconds", []string{"--timeout", "1", "--", "sleep", "100"}, 124, 5 * time.Second},
		{"memory limit", []string{"--memory", "64M", "--", "python3", "-c", "b=bytearray(512<<20)"}, 137, 0},
		{"no such command", []string{"--", "no-such-cmd"}, 127, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runAirlock(t, nil, append([]string{"run"}, tc.args...)...)
			if r.code != tc.want {
				t.Errorf("airlock run %q: exit %d, want %d (stderr %q)", tc.args, r.code, tc.want, r.stderr)
			}
			if tc.maxElapsed > 0 && r.elapsed > tc.maxElapsed {
				t.Errorf("airlock run %q took %v, want < %v", tc.args, r.elapsed, tc.maxElapsed)
			}
		})
	}
}

// TestSetupErrors checks that what airlock cannot or will not do exits 125 and says why on
// stderr, naming the flag (and, for numbers, the allowed range).
func TestSetupErrors(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		want       int
		wantStderr []string
	}{
		// Bad network policies are refused before any network exists (the working ones are
		// tested in network_test.go, inside a test-made namespace).
		{"allow-domain IP literal", []string{"--allow-domain", "10.0.0.1", "--", "true"}, 125, []string{"--allow-domain", "addresses"}},
		{"allow-domain wildcard inside", []string{"--allow-domain", "a.*.com", "--", "true"}, 125, []string{"--allow-domain", "wildcard"}},
		{"credential value on the command line", []string{"--credential", "api.a.com:Authorization:value=x", "--", "true"}, 125, []string{"--credential", "never the command line"}},
		{"network mbps too big", []string{"--network-mbps", "5000", "--", "true"}, 125, []string{"1000"}},
		{"network bogus", []string{"--network", "bogus", "--", "true"}, 125, []string{"--network"}},
		// A registry on a loopback port nothing listens on: unreachable, named in the error.
		{"image unreachable", []string{"--image", "127.0.0.1:1/missing:1", "--", "true"}, 125, []string{"127.0.0.1:1/missing"}},
		{"image and rootfs", []string{"--image", "127.0.0.1:1/x:1", "--rootfs", "/", "--", "true"}, 125, []string{"image"}},
		{"runtime without container", []string{"--runtime", "runc", "--", "true"}, 125, []string{"runtime"}},
		{"isolation not built", []string{"--isolation", "enclave", "--", "true"}, 125, []string{"enclave"}},
		{"isolation bogus", []string{"--isolation", "bogus", "--", "true"}, 125, []string{"--isolation"}},

		// Out-of-range numbers name the flag and the range.
		{"memory too big", []string{"--memory", "99999G", "--", "true"}, 125, []string{"--memory", "16", "32768"}},
		{"memory too small", []string{"--memory", "15M", "--", "true"}, 125, []string{"--memory", "16", "32768"}},
		{"cpu too big", []string{"--cpu", "9", "--", "true"}, 125, []string{"--cpu", "0.01", "8"}},
		{"cpu negative", []string{"--cpu", "-1", "--", "true"}, 125, []string{"--cpu", "0.01", "8"}},
		{"pids zero", []string{"--pids", "0", "--", "true"}, 125, []string{"--pids", "1", "512"}},
		{"pids negative", []string{"--pids", "-5", "--", "true"}, 125, []string{"--pids", "1", "512"}},
		{"cpu zero", []string{"--cpu", "0", "--", "true"}, 125, []string{"--cpu", "0.01", "8"}},
		{"nofile zero", []string{"--nofile", "0", "--", "true"}, 125, []string{"--nofile", "16", "65536"}},
		{"nofile too small", []string{"--nofile", "1", "--", "true"}, 125, []string{"--nofile", "16", "65536"}},
		{"disk too big", []string{"--disk", "999999G", "--", "true"}, 125, []string{"--disk", "1", "51200"}},
		{"timeout too long", []string{"--timeout", "100000", "--", "true"}, 125, []string{"--timeout", "1", "86400"}},

		// Unparsable values: the standard flag package says "-flag"; accept either spelling.
		{"disk not a size", []string{"--disk", "abc", "--", "true"}, 125, []string{"-disk", "abc"}},
		{"memory fraction of MiB", []string{"--memory", "1.5K", "--", "true"}, 125, []string{"-memory"}},
		{"timeout negative", []string{"--timeout", "-1s", "--", "true"}, 125, []string{"-timeout"}},
		{"timeout zero", []string{"--timeout", "0", "--", "true"}, 125, []string{"-timeout"}},
		{"unknown flag", []string{"--bogus", "--", "true"}, 125, []string{"-bogus"}},

		{"no command", nil, 125, []string{"no command"}},
		{"no command after --", []string{"--"}, 125, []string{"no command"}},
		{"user", []string{"--user", "bob", "--", "true"}, 125, []string{"--user"}},
		{"workdir relative", []string{"--workdir", "rel", "--", "true"}, 125, []string{"--workdir"}},
		{"env without =", []string{"--env", "NOEQ", "--", "true"}, 125, []string{"--env"}},
		{"ro relative", []string{"--ro", "relative/path", "--", "true"}, 125, []string{"--ro"}},
		{"ro relative with dest", []string{"--ro", "relative/path:/data", "--", "true"}, 125, []string{"--ro"}},
		{"ro missing host path", []string{"--ro", "/no/such/dir:/data", "--", "true"}, 125, []string{"--ro"}},
		{"rw relative", []string{"--rw", "rel:/out", "--", "true"}, 125, []string{"--rw"}},
		{"rw over /proc", []string{"--rw", "/tmp:/proc/x", "--", "true"}, 125, []string{"--rw"}},
		{"block relative", []string{"--block", "rel", "--", "true"}, 125, []string{"--block"}},
		{"rootfs missing", []string{"--rootfs", "/no/such/rootfs", "--", "true"}, 125, []string{"rootfs"}},
		{"rootfs the host's root", []string{"--rootfs", "/", "--", "true"}, 125, []string{"--rootfs", "host's own root"}},
		{"rootfs a link to the host's root", []string{"--rootfs", "/proc/self/root", "--", "true"}, 125, []string{"--rootfs", "host's own root"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runAirlock(t, nil, append([]string{"run"}, tc.args...)...)
			if r.code != tc.want {
				t.Errorf("airlock run %q: exit %d, want %d (stderr %q)", tc.args, r.code, tc.want, r.stderr)
			}
			mustContain(t, "stderr", r.stderr, tc.wantStderr...)
			if r.stdout != "" {
				t.Errorf("stdout is not empty: %q", r.stdout)
			}
			if strings.Contains(r.stderr, "e+") {
				t.Errorf("stderr prints a number in exponent notation: %q", firstLine(r.stderr))
			}
		})
	}
}

// TestHelp checks that --help is not an error.
func TestHelp(t *testing.T) {
	r := runAirlock(t, nil, "run", "--help")
	if r.code != 0 {
		t.Errorf("airlock run --help: exit %d, want 0", r.code)
	}
	mustContain(t, "stderr", r.stderr, "usage: airlock run", "-timeout", "-memory")
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
