package e2e

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestDoctor checks airlock doctor in both of its forms.
func TestDoctor(t *testing.T) {
	t.Run("text", func(t *testing.T) {
		r := runAirlock(t, nil, "doctor")
		if r.code != 0 {
			t.Fatalf("exit %d, want 0 (stderr %q)", r.code, r.stderr)
		}
		if !regexp.MustCompile(`(?m)^process\s+available\s*$`).MatchString(r.stdout) {
			t.Errorf("doctor does not list process as available:\n%s", r.stdout)
		}
		checks := regexp.MustCompile(`(?m)^\s+\[ok\s*\]\s+\S`).FindAllString(r.stdout, -1)
		if len(checks) == 0 {
			t.Errorf("doctor lists no passed checks:\n%s", r.stdout)
		}
		if regexp.MustCompile(`\[FAIL\]`).MatchString(r.stdout) {
			t.Errorf("doctor reports a failed required check while process is available:\n%s", r.stdout)
		}
		for _, l := range []string{"container", "wasm", "microvm", "enclave"} {
			if !regexp.MustCompile(`(?m)^` + l + `\s+\S`).MatchString(r.stdout) {
				t.Errorf("doctor does not mention level %s:\n%s", l, r.stdout)
			}
		}
	})
	t.Run("json", func(t *testing.T) {
		r := runAirlock(t, nil, "doctor", "--json")
		if r.code != 0 {
			t.Fatalf("exit %d, want 0 (stderr %q)", r.code, r.stderr)
		}
		var caps []map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &caps); err != nil {
			t.Fatalf("doctor --json is not an array of objects: %v\n%s", err, r.stdout)
		}
		found := false
		for i, c := range caps {
			level, ok := c["level"].(string)
			if !ok {
				t.Errorf("[%d] has no string \"level\": %v", i, c)
			}
			avail, ok := c["available"].(bool)
			if !ok {
				t.Errorf("[%d] has no bool \"available\": %v", i, c)
			}
			if level != "process" {
				continue
			}
			found = true
			if !avail {
				t.Errorf("process is not available: %v", c)
			}
			checks, ok := c["checks"].([]any)
			if !ok || len(checks) == 0 {
				t.Errorf("process has no checks: %v", c["checks"])
			}
			for j, ch := range checks {
				m, _ := ch.(map[string]any)
				for _, k := range []string{"name", "ok"} {
					if _, ok := m[k]; !ok {
						t.Errorf("process check %d has no %q: %v", j, k, ch)
					}
				}
			}
		}
		if !found {
			t.Errorf("doctor --json has no process level: %s", r.stdout)
		}
	})
}

// TestVersion checks airlock version.
func TestVersion(t *testing.T) {
	r := runAirlock(t, nil, "version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "airlock ") {
		t.Errorf("airlock version: exit %d, stdout %q, want 0 and \"airlock …\"", r.code, r.stdout)
	}
}

// TestUsageErrors checks the top-level command line.
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		want       int
		wantStderr string
	}{
		{"no verb", nil, 2, "usage: airlock"},
		{"unknown verb", []string{"frobnicate"}, 2, "frobnicate"},
		{"help", []string{"help"}, 0, "usage: airlock"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runAirlock(t, nil, tc.args...)
			if r.code != tc.want {
				t.Errorf("airlock %q: exit %d, want %d", tc.args, r.code, tc.want)
			}
			mustContain(t, "stderr", r.stderr, tc.wantStderr)
		})
	}
}

// TestConcurrentRuns starts 8 one-shot sandboxes at once; all succeed and nothing is left.
func TestConcurrentRuns(t *testing.T) {
	const n = 8
	procsBefore, cgBefore := sandboxProcs(), sandboxCgroups()
	results := make([]result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = tryAirlock(nil, "run", "--", "sh", "-c", "echo $$")
		}()
	}
	wg.Wait()
	for i, r := range results {
		if errs[i] != nil {
			t.Errorf("run %d: %v", i, errs[i])
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(r.stdout))
		if r.code != 0 || err != nil || pid <= 0 {
			t.Errorf("run %d: exit %d, stdout %q, stderr %q; want 0 and a pid", i, r.code, r.stdout, r.stderr)
		}
	}
	if live, _ := newProcs(procsBefore); len(live) > 0 {
		t.Errorf("sandbox processes left: %v", live)
	}
	if cg := newCgroups(cgBefore); len(cg) > 0 {
		t.Errorf("sandbox cgroups left: %v", cg)
	}
}
