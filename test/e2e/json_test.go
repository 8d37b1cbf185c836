package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// resultKeys are the field names of the exec result object (docs/api.md#http-api).
var (
	resultKeys = []string{"executionId", "exitCode", "stdout", "stderr", "durationMs", "timedOut",
		"oomKilled", "truncated", "limitEvents", "resourceUsage"}
	usageKeys = []string{"peakMemoryMb", "cpuTimeMs", "networkEgressBytes"}
	eventKeys = []string{"type", "message", "time"} // "count" only where the kernel counts
)

// decodeResult parses airlock's --json output, checking that it is one object with every field.
func decodeResult(t *testing.T, out string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		t.Fatalf("--json output is not a JSON object: %v\n%.500s", err, out)
	}
	if dec.More() {
		t.Errorf("--json output has more than one value")
	}
	for _, k := range resultKeys {
		if _, ok := obj[k]; !ok {
			t.Errorf("result has no %q field", k)
		}
	}
	if u, ok := obj["resourceUsage"].(map[string]any); !ok {
		t.Errorf("resourceUsage is %T, want an object", obj["resourceUsage"])
	} else {
		for _, k := range usageKeys {
			if _, ok := u[k]; !ok {
				t.Errorf("resourceUsage has no %q field", k)
			}
		}
	}
	evs, ok := obj["limitEvents"].([]any)
	if !ok {
		t.Errorf("limitEvents is %T (%v), want an array", obj["limitEvents"], obj["limitEvents"])
	}
	for i, e := range evs {
		ev, ok := e.(map[string]any)
		if !ok {
			t.Errorf("limitEvents[%d] is %T, want an object", i, e)
			continue
		}
		for _, k := range eventKeys {
			if _, ok := ev[k]; !ok {
				t.Errorf("limitEvents[%d] has no %q field: %v", i, k, ev)
			}
		}
		if _, ok := ev["count"]; !ok {
			t.Logf("note: limitEvents[%d] (%v) has no \"count\" field (omitted when zero)", i, ev["type"])
		}
	}
	return obj
}

func num(t *testing.T, obj map[string]any, path ...string) float64 {
	t.Helper()
	var v any = obj
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%v: not an object", path)
		}
		v = m[p]
	}
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%v = %v (%T), want a number", path, v, v)
	}
	f, _ := n.Float64()
	return f
}

func eventTypes(obj map[string]any) []string {
	var types []string
	evs, _ := obj["limitEvents"].([]any)
	for _, e := range evs {
		if ev, ok := e.(map[string]any); ok {
			s, _ := ev["type"].(string)
			types = append(types, s)
		}
	}
	return types
}

// TestJSONResult checks the exec result object airlock run --json prints.
func TestJSONResult(t *testing.T) {
	tests := []struct {
		name                 string
		args                 []string
		wantCode             int // airlock's exit status
		wantExitCode         int // the object's exitCode
		wantStdout, wantErr  string
		timedOut, oomKilled  bool
		wantEvent            string // a limit event type that must be reported, "" for none
		wantPeakMemAtLeastMb float64
	}{
		{name: "stdout and stderr apart", args: []string{"--", "sh", "-c", "echo out; echo err >&2; exit 3"},
			wantCode: 3, wantExitCode: 3, wantStdout: "out\n", wantErr: "err\n"},
		{name: "success", args: []string{"--", "sh", "-c", "echo hello"},
			wantStdout: "hello\n"},
		{name: "timeout", args: []string{"--timeout", "1s", "--", "sleep", "100"},
			wantCode: 124, wantExitCode: 124, timedOut: true, wantEvent: "limit.timeout"},
		{name: "memory limit", args: []string{"--memory", "64M", "--", "python3", "-c", "b=bytearray(512<<20)"},
			wantCode: 137, wantExitCode: 137, oomKilled: true, wantEvent: "limit.memory", wantPeakMemAtLeastMb: 32},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"run", "--json"}, tc.args...)
			r := runAirlock(t, nil, args...)
			if r.code != tc.wantCode {
				t.Errorf("airlock %q: exit %d, want %d (stderr %q)", args, r.code, tc.wantCode, r.stderr)
			}
			if r.stderr != "" {
				t.Errorf("airlock --json wrote to its own stderr: %q", r.stderr)
			}
			obj := decodeResult(t, r.stdout)
			if got := num(t, obj, "exitCode"); int(got) != tc.wantExitCode {
				t.Errorf("exitCode = %v, want %d", got, tc.wantExitCode)
			}
			if obj["stdout"] != tc.wantStdout || obj["stderr"] != tc.wantErr {
				t.Errorf("stdout, stderr = %q, %q, want %q, %q", obj["stdout"], obj["stderr"], tc.wantStdout, tc.wantErr)
			}
			if id, _ := obj["executionId"].(string); !strings.HasPrefix(id, "exec_") {
				t.Errorf("executionId = %q, want exec_…", id)
			}
			if obj["timedOut"] != tc.timedOut || obj["oomKilled"] != tc.oomKilled || obj["truncated"] != false {
				t.Errorf("timedOut, oomKilled, truncated = %v, %v, %v, want %v, %v, false",
					obj["timedOut"], obj["oomKilled"], obj["truncated"], tc.timedOut, tc.oomKilled)
			}
			if d := num(t, obj, "durationMs"); d <= 0 {
				t.Errorf("durationMs = %v, want > 0", d)
			}
			if m := num(t, obj, "resourceUsage", "peakMemoryMb"); m <= 0 || m < tc.wantPeakMemAtLeastMb {
				t.Errorf("resourceUsage.peakMemoryMb = %v, want > 0 and >= %v", m, tc.wantPeakMemAtLeastMb)
			}
			if c := num(t, obj, "resourceUsage", "cpuTimeMs"); c < 0 {
				t.Errorf("resourceUsage.cpuTimeMs = %v, want >= 0", c)
			}
			if n := num(t, obj, "resourceUsage", "networkEgressBytes"); n != 0 {
				t.Errorf("resourceUsage.networkEgressBytes = %v with --network none, want 0", n)
			}
			types := eventTypes(obj)
			if tc.wantEvent == "" && len(types) != 0 {
				t.Errorf("limitEvents = %v, want none", types)
			}
			if tc.wantEvent != "" && !contains(types, tc.wantEvent) {
				t.Errorf("limitEvents = %v, want a %s event", types, tc.wantEvent)
			}
		})
	}
}

// TestStreaming checks that without --json the command's stdout, stderr and stdin are airlock's.
func TestStreaming(t *testing.T) {
	tests := []struct {
		name                string
		stdin               string
		nilStdin            bool
		cmd                 []string
		wantCode            int
		wantStdout, wantErr string
	}{
		{name: "stdout and stderr apart", cmd: []string{"sh", "-c", "echo out; echo err >&2; exit 3"},
			wantCode: 3, wantStdout: "out\n", wantErr: "err\n"},
		{name: "stdin passed", stdin: "hi\n", cmd: []string{"cat"}, wantStdout: "hi\n"},
		{name: "stdin multi-line", stdin: "a\nb\nc\n", cmd: []string{"wc", "-l"}, wantStdout: "3\n"},
		{name: "no stdin", nilStdin: true, cmd: []string{"cat"}},
		{name: "interleaved", cmd: []string{"sh", "-c", "for i in 1 2 3; do echo o$i; echo e$i >&2; done"},
			wantStdout: "o1\no2\no3\n", wantErr: "e1\ne2\ne3\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r result
			if tc.nilStdin {
				r = runAirlock(t, nil, append([]string{"run", "--"}, tc.cmd...)...)
			} else {
				r = runAirlock(t, strings.NewReader(tc.stdin), append([]string{"run", "--"}, tc.cmd...)...)
			}
			if r.code != tc.wantCode {
				t.Errorf("exit %d, want %d (stderr %q)", r.code, tc.wantCode, r.stderr)
			}
			if strings.TrimLeft(r.stdout, " ") != tc.wantStdout || r.stderr != tc.wantErr {
				t.Errorf("stdout, stderr = %q, %q, want %q, %q", r.stdout, r.stderr, tc.wantStdout, tc.wantErr)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
