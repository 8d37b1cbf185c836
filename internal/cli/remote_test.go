package cli

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client/clienttest"
)

// airlockCLI runs the command line with stdin (a file, so never a terminal) and returns the exit
// status and what was printed.
func airlockCLI(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "stdin"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(stdin); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code = Main(args, f, &out, &errOut)
	return code, out.String(), errOut.String()
}

// fakeDaemon starts a fake daemon and points AIRLOCK_HOST and AIRLOCK_TOKEN at it.
func fakeDaemon(t *testing.T) *clienttest.Daemon {
	t.Helper()
	d := clienttest.NewDaemon()
	t.Cleanup(d.Close)
	t.Setenv("AIRLOCK_HOST", d.URL)
	t.Setenv("AIRLOCK_TOKEN", clienttest.Token)
	return d
}

func newTestRemote(name string) (*remote, *bytes.Buffer) {
	var stderr bytes.Buffer
	return newRemote(&env{stdout: io.Discard, stderr: &stderr}, name, ""), &stderr
}

func TestParseCreate(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want api.Spec
		json bool
		code int
	}{
		{"nothing set leaves the daemon's defaults", nil, api.Spec{}, false, -1},
		{"resources", []string{"--cpu", "0.5", "--memory", "512M", "--disk", "1G", "--pids", "32", "--nofile", "256"},
			api.Spec{Resources: api.Resources{CPU: 0.5, MemoryMB: 512, DiskMB: 1024, MaxProcesses: 32, MaxOpenFiles: 256}}, false, -1},
		{"identity and placement", []string{"--name", "n", "--agent-id", "a1", "--isolation", "wasm", "--user", "root", "--workdir", "/w", "--image", "python:3.12"},
			api.Spec{Name: "n", AgentID: "a1", Isolation: "wasm", User: "root", Workdir: "/w", Image: "python:3.12"}, false, -1},
		{"maps and lists", []string{"--env", "A=1", "--env", "B=x=y", "--metadata", "team=ml", "--ro", "/data:/in", "--rw", "/out", "--block", "/etc/x"},
			api.Spec{Environment: map[string]string{"A": "1", "B": "x=y"}, Metadata: map[string]string{"team": "ml"},
				Filesystem: api.Filesystem{ReadOnly: []string{"/data:/in"}, ReadWrite: []string{"/out"}, Blocked: []string{"/etc/x"}}}, false, -1},
		{"allow-domain implies restricted", []string{"--allow-domain", "pypi.org", "--allow-domain", "*.github.com"},
			api.Spec{Network: api.Network{EgressPolicy: "restricted", AllowedDomains: []string{"pypi.org", "*.github.com"}}}, false, -1},
		{"an explicit policy stays", []string{"--network", "open", "--allow-domain", "x.org"},
			api.Spec{Network: api.Network{EgressPolicy: "open", AllowedDomains: []string{"x.org"}}}, false, -1},
		{"durations round up to seconds", []string{"--max-duration", "90m", "--idle-timeout", "1.5"},
			api.Spec{Timeout: api.Timeout{MaxDurationSeconds: 5400, IdleTimeoutSeconds: 2}}, false, -1},
		{"--timeout is --max-duration", []string{"--timeout", "30s"}, api.Spec{Timeout: api.Timeout{MaxDurationSeconds: 30}}, false, -1},
		{"flags after nothing and --json", []string{"--json"}, api.Spec{}, true, -1},
		{"explicit zero cpu", []string{"--cpu", "0"}, api.Spec{}, false, 2},
		{"explicit zero pids", []string{"--pids", "0"}, api.Spec{}, false, 2},
		{"bad size", []string{"--memory", "lots"}, api.Spec{}, false, 2},
		{"bad env", []string{"--env", "NOVALUE"}, api.Spec{}, false, 2},
		{"bad metadata", []string{"--metadata", "=v"}, api.Spec{}, false, 2},
		{"unknown flag", []string{"--gpu"}, api.Spec{}, false, 2},
		{"stray argument", []string{"python"}, api.Spec{}, false, 2},
		{"help", []string{"--help"}, api.Spec{}, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, _ := newTestRemote("create")
			spec, asJSON, code := parseCreate(r, c.args)
			if code != c.code {
				t.Fatalf("code %d, want %d", code, c.code)
			}
			if code >= 0 {
				return
			}
			if !reflect.DeepEqual(spec, c.want) || asJSON != c.json {
				t.Errorf("spec %+v json=%v\nwant %+v json=%v", spec, asJSON, c.want, c.json)
			}
		})
	}
}

func TestParseCreateZeroMessage(t *testing.T) {
	r, stderr := newTestRemote("create")
	parseCreate(r, []string{"--cpu", "0"})
	if !strings.Contains(stderr.String(), "--cpu: must be between 0.01 and 8 vCPUs") {
		t.Errorf("stderr %q", stderr)
	}
}

func TestParseExec(t *testing.T) {
	for _, c := range []struct {
		name    string
		args    []string
		id      string
		cmd     []string
		i, tty  bool
		json    bool
		timeout float64
		code    int
	}{
		{"id and command", []string{"sbx_1", "--", "ls", "-l"}, "sbx_1", []string{"ls", "-l"}, false, false, false, 0, -1},
		{"without --", []string{"sbx_1", "ls", "-l"}, "sbx_1", []string{"ls", "-l"}, false, false, false, 0, -1},
		{"flags of the command stay its own", []string{"sbx_1", "--", "grep", "--json", "-i"}, "sbx_1", []string{"grep", "--json", "-i"}, false, false, false, 0, -1},
		{"-it defaults to a shell", []string{"-it", "sbx_1"}, "sbx_1", []string{"/bin/sh"}, true, true, false, 0, -1},
		{"-ti", []string{"-ti", "sbx_1", "--", "bash"}, "sbx_1", []string{"bash"}, true, true, false, 0, -1},
		{"-i -t apart", []string{"-i", "-t", "sbx_1"}, "sbx_1", []string{"/bin/sh"}, true, true, false, 0, -1},
		{"long flags", []string{"--interactive", "--tty", "--timeout", "1500ms", "sbx_1", "sh"}, "sbx_1", []string{"sh"}, true, true, false, 1.5, -1},
		{"json", []string{"--json", "sbx_1", "true"}, "sbx_1", []string{"true"}, false, false, true, 0, -1},
		{"no id", nil, "", nil, false, false, false, 0, 2},
		{"no command", []string{"sbx_1"}, "", nil, false, false, false, 0, 2},
		{"no command after --", []string{"sbx_1", "--"}, "", nil, false, false, false, 0, 2},
		{"json with a tty", []string{"--json", "-t", "sbx_1"}, "", nil, false, false, false, 0, 2},
		{"bad timeout", []string{"--timeout", "soon", "sbx_1", "true"}, "", nil, false, false, false, 0, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, _ := newTestRemote("exec")
			o, code := parseExec(r, c.args)
			if code != c.code {
				t.Fatalf("code %d, want %d", code, c.code)
			}
			if code >= 0 {
				return
			}
			if o.id != c.id || !reflect.DeepEqual([]string(o.req.Command), c.cmd) || o.interactive != c.i || o.tty != c.tty || o.asJSON != c.json || o.req.Timeout != c.timeout {
				t.Errorf("got %+v", o)
			}
		})
	}
}

func TestParseInterspersed(t *testing.T) {
	for _, c := range []struct {
		args []string
		pos  []string
		f    bool
	}{
		{[]string{"-f", "sbx_1"}, []string{"sbx_1"}, true},
		{[]string{"sbx_1", "-f"}, []string{"sbx_1"}, true},
		{[]string{"a", "b", "-f", "c"}, []string{"a", "b", "c"}, true},
		{[]string{"a", "--", "-f"}, []string{"a", "-f"}, false},
	} {
		r, _ := newTestRemote("logs")
		f := r.fs.Bool("f", false, "")
		pos, code := r.parse(c.args, true)
		if code >= 0 || !reflect.DeepEqual(pos, c.pos) || *f != c.f {
			t.Errorf("parse %q = %q, -f=%v, code %d; want %q, %v", c.args, pos, *f, code, c.pos, c.f)
		}
	}
}

func TestParseCopyArg(t *testing.T) {
	for in, want := range map[string]copyArg{
		"sbx_1:/workspace/a": {id: "sbx_1", path: "/workspace/a"},
		"sbx_1:rel":          {id: "sbx_1", path: "rel"},
		"./a:b":              {path: "./a:b"},
		"/tmp/x:y":           {path: "/tmp/x:y"},
		"file.txt":           {path: "file.txt"},
		":x":                 {path: ":x"},
		"-":                  {path: "-"},
	} {
		if got := parseCopyArg(in); got != want {
			t.Errorf("parseCopyArg(%q) = %+v, want %+v", in, got, want)
		}
	}
}

func TestAge(t *testing.T) {
	now := time.Date(2025, 1, 2, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		ago  time.Duration
		want string
	}{
		{0, "0s"}, {-time.Second, "0s"}, {45 * time.Second, "45s"}, {90 * time.Second, "1m"}, {59 * time.Minute, "59m"},
		{3 * time.Hour, "3h"}, {47 * time.Hour, "47h"}, {72 * time.Hour, "3d"},
	} {
		if got := age(now, now.Add(-c.ago)); got != c.want {
			t.Errorf("age(%v) = %q, want %q", c.ago, got, c.want)
		}
	}
	if got := age(now, time.Time{}); got != "-" {
		t.Errorf("age(zero) = %q", got)
	}
}

func TestMiB(t *testing.T) {
	for n, want := range map[int64]string{0: "-", 512: "512M", 2048: "2G", 1536: "1536M", 1 << 20: "1T"} {
		if got := mib(n); got != want {
			t.Errorf("mib(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestSandboxTable(t *testing.T) {
	now := time.Date(2025, 1, 2, 12, 0, 0, 0, time.UTC)
	sbs := []api.Sandbox{
		{ID: "sbx_a", Status: "running", CreatedAt: now.Add(-90 * time.Second),
			Spec: api.Spec{Name: "web", Isolation: "process", AgentID: "agent-7", Resources: api.Resources{CPU: 1, MemoryMB: 2048}}},
		{ID: "sbx_bb", Status: "terminated", Reason: "idle", CreatedAt: now.Add(-3 * time.Hour),
			Spec: api.Spec{Isolation: "wasm", Resources: api.Resources{CPU: 0.5, MemoryMB: 512}}},
	}
	var b bytes.Buffer
	writeSandboxTable(&b, sbs, now)
	want := "" +
		"ID       NAME   STATUS              ISOLATION   CPU   MEMORY   AGENT     AGE\n" +
		"sbx_a    web    running             process     1     2G       agent-7   1m\n" +
		"sbx_bb   -      terminated (idle)   wasm        0.5   512M     -         3h\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	writeSandboxTable(&b, nil, now)
	if !strings.HasPrefix(b.String(), "ID ") || strings.Count(b.String(), "\n") != 1 {
		t.Errorf("empty table %q", b.String())
	}
}

func TestSandboxDetail(t *testing.T) {
	now := time.Date(2025, 1, 2, 12, 0, 0, 0, time.UTC)
	no := false
	sb := api.Sandbox{ID: "sbx_a", Status: "running", CreatedAt: now.Add(-time.Hour), ExpiresAt: now.Add(2 * time.Hour),
		Spec: api.Spec{Name: "web", Isolation: "process", User: "agent", Workdir: "/workspace",
			Resources:   api.Resources{CPU: 1, MemoryMB: 512, DiskMB: 1024, NetworkMbps: 100, MaxProcesses: 64, MaxOpenFiles: 1024},
			Timeout:     api.Timeout{MaxDurationSeconds: 3600, IdleTimeoutSeconds: 300},
			Network:     api.Network{EgressPolicy: "restricted", AllowedDomains: []string{"pypi.org"}, BlockLocalNetwork: &no},
			Environment: map[string]string{"B": "2", "A": "1"}},
		Transitions: []api.Transition{{From: "provisioning", To: "ready", Reason: "created", At: now.Add(-time.Hour)}}}
	var b bytes.Buffer
	writeSandboxDetail(&b, sb, now)
	for _, want := range []string{
		"ID:           sbx_a\n",
		"Status:       running\n",
		"Created:      2025-01-02T11:00:00Z (1h ago)\n",
		"Expires:      2025-01-02T14:00:00Z (in 2h)\n",
		"Resources:    cpu 1, memory 512M, disk 1G, network 100 Mbit/s, pids 64, open files 1024\n",
		"Timeouts:     max 1h0m0s, idle 5m0s\n",
		"Network:      restricted (pypi.org), local network reachable\n",
		"Environment:  A=1, B=2\n",
		"  TIME                   FROM           TO      REASON\n",
		"  2025-01-02T11:00:00Z   provisioning   ready   created\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "Agent:") || strings.Contains(b.String(), "Metadata:") {
		t.Errorf("empty rows printed:\n%s", b.String())
	}
}

func TestEventText(t *testing.T) {
	for _, c := range []struct {
		ev   api.Event
		want string
	}{
		{api.Event{Type: api.EventSandboxStatus, Data: map[string]any{"to": "running", "reason": "exec"}}, "status running (exec)"},
		{api.Event{Type: api.EventExecStarted, ExecutionID: "exec_1", Data: map[string]any{"command": []any{"sh", "-c", "ls"}}}, "exec_1 started: sh -c ls"},
		{api.Event{Type: api.EventExecExited, ExecutionID: "exec_1", Data: map[string]any{"exitCode": 0.0, "durationMs": 12.0}}, "exec_1 exited with status 0 after 12ms"},
		{api.Event{Type: "limit.memory", Message: "OOM kill"}, "limit.memory: OOM kill"},
		{api.Event{Type: "net.connect"}, "net.connect"},
	} {
		if got := eventText(c.ev); got != c.want {
			t.Errorf("eventText(%+v) = %q, want %q", c.ev, got, c.want)
		}
	}
}

func TestExecStatus(t *testing.T) {
	for _, c := range []struct {
		res  api.ExecResult
		want int
	}{
		{api.ExecResult{ExitCode: 0}, 0},
		{api.ExecResult{ExitCode: 3}, 3},
		{api.ExecResult{ExitCode: 137, TimedOut: true}, 124},
		{api.ExecResult{ExitCode: 137, OOMKilled: true}, 137},
		{api.ExecResult{ExitCode: 1, OOMKilled: true}, 1},
		{api.ExecResult{ExitCode: -1}, 1},
	} {
		if got := execStatus(c.res); got != c.want {
			t.Errorf("execStatus(%+v) = %d, want %d", c.res, got, c.want)
		}
	}
}
