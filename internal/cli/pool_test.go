package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/airlockrun/airlock/api"
)

func TestParsePoolPut(t *testing.T) {
	for _, c := range []struct {
		name  string
		args  []string
		shape []string // create's flags of the same shape: the pool's spec must be create's
		want  api.Pool
		json  bool
		code  int
		msg   string // in stderr, for a refusal
	}{
		{name: "shape as create builds it", args: []string{"warm", "--size", "2"},
			shape: []string{"--memory", "512M", "--cpu", "0.5", "--disk", "1G", "--pids", "32", "--nofile", "256", "--isolation", "container", "--runtime", "runc",
				"--image", "python:3.12", "--user", "root", "--workdir", "/w", "--ro", "/data:/in", "--rw", "/out", "--block", "/etc/x", "--network", "restricted", "--network-mbps", "10"},
			want: api.Pool{Name: "warm", Size: 2, Spec: api.Spec{Isolation: "container", Runtime: "runc", Image: "python:3.12", User: "root", Workdir: "/w",
				Resources:  api.Resources{CPU: 0.5, MemoryMB: 512, DiskMB: 1024, MaxProcesses: 32, MaxOpenFiles: 256, NetworkMbps: 10},
				Filesystem: api.Filesystem{ReadOnly: []string{"/data:/in"}, ReadWrite: []string{"/out"}, Blocked: []string{"/etc/x"}},
				Network:    api.Network{EgressPolicy: "restricted"}}}, code: -1},
		{name: "refill, max age and json", args: []string{"--refill", "2.5", "warm", "--max-age", "90m", "--size", "1", "--json"},
			want: api.Pool{Name: "warm", Size: 1, RefillPerSecond: 2.5, MaxAgeSeconds: 5400}, json: true, code: -1},
		{name: "max age rounds up to seconds", args: []string{"warm", "--size", "1", "--max-age", "1.5"}, want: api.Pool{Name: "warm", Size: 1, MaxAgeSeconds: 2}, code: -1},
		{name: "--env", args: []string{"warm", "--size", "1", "--env", "A=1"}, code: 2, msg: "--env belongs to the create that claims"},
		{name: "--name", args: []string{"warm", "--size", "1", "--name", "n"}, code: 2, msg: "--name belongs"},
		{name: "--agent-id", args: []string{"warm", "--size", "1", "--agent-id", "a"}, code: 2, msg: "--agent-id belongs"},
		{name: "--metadata", args: []string{"warm", "--size", "1", "--metadata", "k=v"}, code: 2, msg: "--metadata belongs"},
		{name: "--timeout", args: []string{"warm", "--size", "1", "--timeout", "1m"}, code: 2, msg: "--timeout belongs"},
		{name: "--max-duration", args: []string{"warm", "--size", "1", "--max-duration", "1m"}, code: 2, msg: "--max-duration belongs"},
		{name: "--idle-timeout", args: []string{"warm", "--size", "1", "--idle-timeout", "1m"}, code: 2, msg: "--idle-timeout belongs"},
		{name: "--allow-domain", args: []string{"warm", "--size", "1", "--allow-domain", "pypi.org"}, code: 2, msg: "--allow-domain belongs"},
		{name: "--credential", args: []string{"warm", "--size", "1", "--credential", "h:X:secret=s"}, code: 2, msg: "--credential belongs"},
		{name: "several", args: []string{"warm", "--env", "A=1", "--size", "1", "--name", "n"}, code: 2, msg: "--env, --name belong"},
		{name: "no size", args: []string{"warm"}, code: 2, msg: "--size is required"},
		{name: "no name", args: []string{"--size", "1"}, code: 2, msg: "want one pool name"},
		{name: "two names", args: []string{"a", "b", "--size", "1"}, code: 2, msg: "want one pool name"},
		{name: "explicit zero refill", args: []string{"warm", "--size", "1", "--refill", "0"}, code: 2, msg: "--refill: must be positive"},
		{name: "explicit zero cpu", args: []string{"warm", "--size", "1", "--cpu", "0"}, code: 2, msg: "--cpu: must be between"},
		{name: "bad max age", args: []string{"warm", "--size", "1", "--max-age", "soon"}, code: 2, msg: "--max-age"},
		{name: "help", args: []string{"--help"}, code: 0, msg: "usage: airlock pool put"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, stderr := newTestRemote("pool put")
			p, asJSON, code := parsePoolPut(r, append(c.args, c.shape...))
			if code != c.code || !strings.Contains(stderr.String(), c.msg) {
				t.Fatalf("code %d, stderr %q; want %d, %q", code, stderr, c.code, c.msg)
			}
			if code >= 0 {
				return
			}
			if !reflect.DeepEqual(p, c.want) || asJSON != c.json {
				t.Errorf("pool %+v json=%v\nwant %+v json=%v", p, asJSON, c.want, c.json)
			}
			rc, _ := newTestRemote("create")
			spec, _, _ := parseCreate(rc, c.shape)
			if !reflect.DeepEqual(p.Spec, spec) {
				t.Errorf("pool's shape %+v\ncreate's spec %+v", p.Spec, spec)
			}
		})
	}
}

// TestPoolPutHelpHidesClaimTimeFlags: the help shows the shape flags, not those refused.
func TestPoolPutHelpHidesClaimTimeFlags(t *testing.T) {
	r, stderr := newTestRemote("pool put")
	parsePoolPut(r, []string{"--help"})
	for _, f := range []string{"-memory", "-image", "-size", "-refill", "-max-age"} {
		if !strings.Contains(stderr.String(), "  "+f+" ") {
			t.Errorf("help lacks %s:\n%s", f, stderr)
		}
	}
	for _, f := range claimTimeFlags {
		if strings.Contains(stderr.String(), "  -"+f+" ") {
			t.Errorf("help shows %s:\n%s", f, stderr)
		}
	}
}

func TestPoolTable(t *testing.T) {
	ps := []api.PoolStatus{
		{Pool: api.Pool{Name: "py", Size: 4, Spec: api.Spec{Isolation: "container", Image: "python:3.12"}}, Source: "config", Ready: 3, Warming: 1,
			Claims: 2, Misses: 1, HitRate: 2.0 / 3},
		{Pool: api.Pool{Name: "small", Size: 2, Spec: api.Spec{Isolation: "process"}}, Source: "api", Ready: 2},
	}
	var b bytes.Buffer
	writePoolTable(&b, ps)
	want := "" +
		"NAME    SOURCE   SIZE   READY   WARMING   CLAIMS   MISSES   HIT%   ISOLATION   IMAGE\n" +
		"py      config   4      3       1         2        1        67     container   python:3.12\n" +
		"small   api      2      2       0         0        0        -      process     -\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestPoolPutNamesTheFlag: the daemon's field, of the pool or of its spec, is told as the flag
// behind it.
func TestPoolPutNamesTheFlag(t *testing.T) {
	var field string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(api.Response[any]{Error: &api.Error{Code: api.CodeInvalidArgument, Field: field, Message: "no good"}}) // a failure is the client's to see
	}))
	defer srv.Close()
	t.Setenv("AIRLOCK_HOST", srv.URL)
	for _, c := range []struct{ field, want string }{
		{"spec.resources.memoryMb", "--memory"},
		{"spec.filesystem.readOnly[0]", "--ro"},
		{"spec.isolation", "--isolation"},
		{"spec.runtime", "--runtime"},
		{"size", "--size"},
		{"refillPerSecond", "--refill"},
		{"maxAgeSeconds", "--max-age"},
		{"name", "NAME"},
	} {
		field = c.field
		code, _, errOut := airlockCLI(t, "", "pool", "put", "warm", "--size", "1")
		if code != 1 || errOut != "airlock: "+c.want+": no good\n" {
			t.Errorf("field %s: exit %d, stderr %q; want 1, %s", c.field, code, errOut, c.want)
		}
	}
}
