package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
)

// snapshotDaemon is a fake of the daemon's snapshot routes over one sandbox, sbx_1, enough to see
// each verb send its request and print the answer. It refuses unknown fields as the daemon does
// and a name over 128 characters or a count over 64 naming the field.
type snapshotDaemon struct {
	mu    sync.Mutex // guards the fields below
	n     int        // snapshots taken
	snaps []api.Snapshot
	last  string // the last request, "METHOD ESCAPED-PATH BODY"
}

// fakeSnapshots starts a snapshotDaemon and points AIRLOCK_HOST and AIRLOCK_TOKEN at it.
func fakeSnapshots(t *testing.T) *snapshotDaemon {
	t.Helper()
	d := &snapshotDaemon{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/snapshots", d.snapshot)
	mux.HandleFunc("GET /api/v1/sandboxes/{id}/snapshots", d.list)
	mux.HandleFunc("GET /api/v1/snapshots", d.list)
	mux.HandleFunc("GET /api/v1/snapshots/{snapshotId}", d.get)
	mux.HandleFunc("DELETE /api/v1/snapshots/{snapshotId}", d.get)
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/restore", d.restore)
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/fork", d.fork)
	mux.HandleFunc("POST /api/v1/sandboxes", d.create)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body bytes.Buffer
		_, _ = body.ReadFrom(r.Body) // a short body shows in d.last
		d.mu.Lock()
		d.last = strings.TrimSpace(r.Method + " " + r.URL.EscapedPath() + " " + body.String())
		d.mu.Unlock()
		r.Body = http.NoBody
		r2 := r.Clone(r.Context())
		r2.Body = readCloser{bytes.NewReader(body.Bytes())}
		mux.ServeHTTP(w, r2)
	}))
	t.Cleanup(srv.Close)
	t.Setenv("AIRLOCK_HOST", srv.URL)
	t.Setenv("AIRLOCK_TOKEN", "t")
	return d
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// sent returns the last request the daemon got.
func (d *snapshotDaemon) sent() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last
}

func answer(w http.ResponseWriter, status int, data any) {
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(api.Response[any]{OK: true, Data: data})
}

func refuse(w http.ResponseWriter, status int, code, field, format string, args ...any) {
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(api.Response[any]{Error: &api.Error{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}})
}

// decodeStrict decodes r's body, if any, into v; false means it answered the refusal.
func decodeStrict(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && err.Error() != "EOF" {
		refuse(w, 400, api.CodeInvalidArgument, "body", "%v", err)
		return false
	}
	return true
}

// sandbox answers false with a 404 unless the path names sbx_1.
func (d *snapshotDaemon) sandbox(w http.ResponseWriter, r *http.Request) bool {
	if id := r.PathValue("id"); id != "sbx_1" {
		refuse(w, 404, api.CodeNotFound, "", "sandbox %q not found", id)
		return false
	}
	return true
}

// take makes a snapshot of sbx_1; d.mu must be held.
func (d *snapshotDaemon) take(req api.SnapshotRequest) api.Snapshot {
	d.n++
	s := api.Snapshot{ID: fmt.Sprintf("snap_%d", d.n), SandboxID: "sbx_1", Name: req.Name, Description: req.Description,
		Isolation: api.LevelProcess, SizeMB: 1.25 * float64(d.n), Digest: "sha256:ab", CreatedAt: time.Now().Add(-90 * time.Second)}
	if s.Name == "" {
		s.Name = s.ID
	}
	d.snaps = append([]api.Snapshot{s}, d.snaps...) // newest first
	return s
}

func (d *snapshotDaemon) snapshot(w http.ResponseWriter, r *http.Request) {
	var req api.SnapshotRequest
	if !d.sandbox(w, r) || !decodeStrict(w, r, &req) {
		return
	}
	if len(req.Name) > 128 {
		refuse(w, 400, api.CodeInvalidArgument, "name", "at most 128 characters")
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	answer(w, 201, d.take(req))
}

func (d *snapshotDaemon) list(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("id") != "" && !d.sandbox(w, r) {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	answer(w, 200, d.snaps)
}

// get answers a snapshot, and deletes it for a DELETE.
func (d *snapshotDaemon) get(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, s := range d.snaps {
		if s.ID == r.PathValue("snapshotId") {
			if r.Method == http.MethodDelete {
				d.snaps = append(d.snaps[:i], d.snaps[i+1:]...)
			}
			answer(w, 200, s)
			return
		}
	}
	refuse(w, 404, api.CodeNotFound, "", "snapshot %q not found", r.PathValue("snapshotId"))
}

func (d *snapshotDaemon) restore(w http.ResponseWriter, r *http.Request) {
	var req api.RestoreRequest
	if !d.sandbox(w, r) || !decodeStrict(w, r, &req) {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.snaps {
		if s.ID == req.SnapshotID {
			answer(w, 200, api.Sandbox{ID: "sbx_1", Status: api.StatusReady, Reason: "restored"})
			return
		}
	}
	refuse(w, 404, api.CodeNotFound, "snapshotId", "snapshot %q not found", req.SnapshotID)
}

func (d *snapshotDaemon) fork(w http.ResponseWriter, r *http.Request) {
	var req api.ForkRequest
	if !d.sandbox(w, r) || !decodeStrict(w, r, &req) {
		return
	}
	if req.Count > 64 {
		refuse(w, 400, api.CodeInvalidArgument, "count", "must be between 1 and 64")
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	f := api.Fork{Snapshot: d.take(api.SnapshotRequest{})}
	for i := range max(req.Count, 1) {
		f.Sandboxes = append(f.Sandboxes, api.Sandbox{ID: fmt.Sprintf("sbx_fork%d", i+1), Status: api.StatusReady,
			Spec: api.Spec{Name: fmt.Sprintf("%s-%d", req.Name, i+1), FromSnapshot: f.Snapshot.ID}})
	}
	answer(w, 201, f)
}

func (d *snapshotDaemon) create(w http.ResponseWriter, r *http.Request) {
	var spec api.Spec
	if decodeStrict(w, r, &spec) {
		answer(w, 201, api.Sandbox{ID: "sbx_2", Status: api.StatusReady, Spec: spec})
	}
}

// TestSnapshotVerbs runs snapshot, restore, fork, snapshots and create --from-snapshot against the
// fake, in order: each row sees what the rows before it did.
func TestSnapshotVerbs(t *testing.T) {
	d := fakeSnapshots(t)
	for _, c := range []struct {
		name          string
		args          []string
		code          int
		stdout, errOn string // stdout is matched exactly unless it starts with "~" (substring)
		sent          string // the request, when the verb sends one; "~" as for stdout
	}{
		{"snapshot", []string{"snapshot", "sbx_1"}, 0, "snap_1\n", "", "POST /api/v1/sandboxes/sbx_1/snapshots {}"},
		{"snapshot named, flags after the ID", []string{"snapshot", "sbx_1", "--name", "deps", "--description", "after pip install", "--json"}, 0,
			"~\"name\": \"deps\",\n  \"description\": \"after pip install\"", "",
			`POST /api/v1/sandboxes/sbx_1/snapshots {"name":"deps","description":"after pip install"}`},
		{"snapshot names the flag", []string{"snapshot", "--name", strings.Repeat("n", 129), "sbx_1"}, 1, "", "airlock: --name: at most 128 characters\n", ""},
		{"snapshot of an unknown sandbox", []string{"snapshot", "sbx_nope"}, 1, "", "airlock: sandbox \"sbx_nope\" not found\n", ""},
		{"snapshot escapes the ID", []string{"snapshot", "a/b"}, 1, "", "not found", "POST /api/v1/sandboxes/a%2Fb/snapshots {}"},
		{"snapshots ls", []string{"snapshots", "ls"}, 0, "~SNAPSHOT   SANDBOX   NAME     LEVEL     SIZE      MEMORY   CREATED\n" +
			"snap_2     sbx_1     deps     process   2.5 MiB   no       1m\n" +
			"snap_1     sbx_1     snap_1   process   1.2 MiB   no       1m\n", "", "GET /api/v1/snapshots"},
		{"snapshots is ls", []string{"snapshots", "--json"}, 0, "~\"snapshotId\": \"snap_2\"", "", "GET /api/v1/snapshots"},
		{"snapshots ls of a sandbox", []string{"snapshots", "ls", "--sandbox", "sbx_1", "--json"}, 0, "~\"sandboxId\": \"sbx_1\"", "",
			"GET /api/v1/sandboxes/sbx_1/snapshots"},
		{"snapshots ls of an unknown sandbox", []string{"snapshots", "ls", "--sandbox", "sbx_nope"}, 1, "", "sandbox \"sbx_nope\" not found", ""},
		{"snapshots inspect", []string{"snapshots", "inspect", "snap_1"}, 0, "~\"snapshotId\": \"snap_1\",\n  \"sandboxId\": \"sbx_1\"", "",
			"GET /api/v1/snapshots/snap_1"},
		{"snapshots inspect escapes the ID", []string{"snapshots", "inspect", "snap/1"}, 1, "", "not found", "GET /api/v1/snapshots/snap%2F1"},
		{"restore", []string{"restore", "sbx_1", "snap_1"}, 0, "sbx_1\n", "", `POST /api/v1/sandboxes/sbx_1/restore {"snapshotId":"snap_1"}`},
		{"restore --json", []string{"restore", "--json", "sbx_1", "snap_2"}, 0, "~\"reason\": \"restored\"", "", ""},
		{"restore of an unknown snapshot", []string{"restore", "sbx_1", "snap_nope"}, 1, "", "airlock: SNAPSHOT_ID: snapshot \"snap_nope\" not found\n", ""},
		{"fork", []string{"fork", "sbx_1"}, 0, "sbx_fork1\n", "forked sbx_1 from snapshot snap_3, kept until `airlock snapshots rm snap_3`\n",
			"POST /api/v1/sandboxes/sbx_1/fork {}"},
		{"fork several, named", []string{"fork", "--count", "3", "sbx_1", "--name", "w"}, 0, "sbx_fork1\nsbx_fork2\nsbx_fork3\n", "snapshot snap_4",
			`POST /api/v1/sandboxes/sbx_1/fork {"count":3,"name":"w"}`},
		{"fork --json", []string{"fork", "--json", "sbx_1"}, 0, "~\"snapshot\": {\n    \"snapshotId\": \"snap_5\"", "", ""},
		{"fork names the flag", []string{"fork", "--count", "65", "sbx_1"}, 1, "", "airlock: --count: must be between 1 and 64\n", ""},
		{"snapshots rm goes on after a failure", []string{"snapshots", "rm", "snap_nope", "snap_1"}, 1, "snap_1\n", "airlock: snapshot \"snap_nope\" not found\n",
			"DELETE /api/v1/snapshots/snap_1"},
		{"snapshots rm --json", []string{"snapshots", "rm", "--json", "snap_2"}, 0, "~\"snapshotId\": \"snap_2\"", "", ""},
		{"deleted ones are gone", []string{"snapshots", "inspect", "snap_1"}, 1, "", "snapshot \"snap_1\" not found", ""},
		{"create --from-snapshot", []string{"create", "--from-snapshot", "snap_3", "--env", "A=1"}, 0, "sbx_2\n", "",
			`~POST /api/v1/sandboxes {"environment":{"A":"1"},`},
		{"create --from-snapshot sends it", []string{"create", "--from-snapshot", "snap_3", "--json"}, 0, "~\"fromSnapshot\": \"snap_3\"", "",
			`~"fromSnapshot":"snap_3"}`},

		{"usage: snapshot without ID", []string{"snapshot"}, 2, "", "airlock snapshot: want one sandbox ID (see airlock snapshot --help)\n", ""},
		{"usage: snapshot of two", []string{"snapshot", "sbx_1", "sbx_2"}, 2, "", "want one sandbox ID", ""},
		{"usage: snapshot unknown flag", []string{"snapshot", "--bogus", "sbx_1"}, 2, "", "flag provided but not defined: --bogus", ""},
		{"usage: snapshot --name without value", []string{"snapshot", "sbx_1", "--name"}, 2, "", "flag needs an argument: --name", ""},
		{"usage: restore without snapshot", []string{"restore", "sbx_1"}, 2, "", "airlock restore: want a sandbox ID and a snapshot ID", ""},
		{"usage: restore of three", []string{"restore", "sbx_1", "snap_1", "x"}, 2, "", "want a sandbox ID and a snapshot ID", ""},
		{"usage: fork without ID", []string{"fork"}, 2, "", "airlock fork: want one sandbox ID", ""},
		{"usage: fork --count 0", []string{"fork", "--count", "0", "sbx_1"}, 2, "", "airlock fork: --count: must be positive", ""},
		{"usage: fork --count not a number", []string{"fork", "--count", "two", "sbx_1"}, 2, "", "invalid value \"two\" for flag --count", ""},
		{"usage: snapshots unknown subcommand", []string{"snapshots", "list"}, 2, "", "airlock snapshots: unknown subcommand \"list\" (ls, inspect, rm)", ""},
		{"usage: snapshots ls argument", []string{"snapshots", "ls", "sbx_1"}, 2, "", "unexpected argument \"sbx_1\"", ""},
		{"usage: snapshots rm nothing", []string{"snapshots", "rm"}, 2, "", "airlock snapshots rm: want at least one snapshot ID", ""},
		{"usage: snapshots inspect nothing", []string{"snapshots", "inspect"}, 2, "", "airlock snapshots inspect: want one snapshot ID", ""},
		{"usage: create --from-snapshot without value", []string{"create", "--from-snapshot"}, 2, "", "flag needs an argument: --from-snapshot", ""},
		{"help: snapshot", []string{"snapshot", "--help"}, 0, "", "usage: airlock snapshot [--name NAME] [--description TEXT] [--memory[=false]] [--json] ID", ""},
		{"help: restore", []string{"restore", "-h"}, 0, "", "usage: airlock restore [--json] ID SNAPSHOT_ID", ""},
		{"help: fork", []string{"fork", "--help"}, 0, "", "  -count int", ""},
		{"help: snapshots rm", []string{"snapshots", "rm", "--help"}, 0, "", "usage: airlock snapshots rm [--json] SNAPSHOT_ID...", ""},
		{"help: create", []string{"create", "--help"}, 0, "", "  -from-snapshot string", ""},
		// Last: they take snapshots, whose numbers the cases above count on.
		{"snapshot --memory=false asks for files only", []string{"snapshot", "--memory=false", "sbx_1"}, 0, "~snap_", "",
			`POST /api/v1/sandboxes/sbx_1/snapshots {"memory":false}`},
		{"snapshot --memory insists on memory", []string{"snapshot", "sbx_1", "--memory"}, 0, "~snap_", "",
			`POST /api/v1/sandboxes/sbx_1/snapshots {"memory":true}`},
		{"fork --memory=false", []string{"fork", "--memory=false", "sbx_1"}, 0, "~sbx_fork", "",
			`POST /api/v1/sandboxes/sbx_1/fork {"memory":false}`},
		{"usage: snapshot --memory=maybe", []string{"snapshot", "--memory=maybe", "sbx_1"}, 2, "", `invalid boolean value "maybe" for --memory: "maybe" is not true or false`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			d.mu.Lock()
			d.last = ""
			d.mu.Unlock()
			code, out, errOut := airlockCLI(t, "", c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d; stderr %q", code, c.code, errOut)
			}
			if want, ok := strings.CutPrefix(c.stdout, "~"); ok {
				if !strings.Contains(out, want) {
					t.Errorf("stdout %q lacks %q", out, want)
				}
			} else if out != c.stdout {
				t.Errorf("stdout %q, want %q", out, c.stdout)
			}
			if !strings.Contains(errOut, c.errOn) {
				t.Errorf("stderr %q lacks %q", errOut, c.errOn)
			}
			sent := d.sent()
			if want, ok := strings.CutPrefix(c.sent, "~"); ok {
				if !strings.Contains(sent, want) {
					t.Errorf("sent %q, lacks %q", sent, want)
				}
			} else if c.sent != "" && sent != c.sent {
				t.Errorf("sent %q, want %q", sent, c.sent)
			}
			if c.code == exitUsage && sent != "" {
				t.Errorf("a usage error sent %q", sent)
			}
		})
	}
}

func TestSnapshotTable(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	snaps := []api.Snapshot{
		{ID: "snap_b", SandboxID: "sbx_2", Name: "warm", Isolation: "container", Runtime: "runsc", SizeMB: 312.04, Memory: true, CreatedAt: now.Add(-3 * time.Hour)},
		{ID: "snap_a", SandboxID: "sbx_1", Name: "", Isolation: "process", SizeMB: 0.05, CreatedAt: now.Add(-45 * time.Second)},
	}
	var b bytes.Buffer
	writeSnapshotTable(&b, snaps, now)
	want := "" +
		"SNAPSHOT   SANDBOX   NAME   LEVEL             SIZE        MEMORY   CREATED\n" +
		"snap_b     sbx_2     warm   container/runsc   312.0 MiB   yes      3h\n" +
		"snap_a     sbx_1     -      process           0.1 MiB     no       45s\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestParseCreateFromSnapshot: --from-snapshot only sets the spec's fromSnapshot; the rest of the
// spec is what the other flags make, so the daemon checks them against the snapshot's.
func TestParseCreateFromSnapshot(t *testing.T) {
	r, _ := newTestRemote("create")
	spec, _, code := parseCreate(r, []string{"--from-snapshot", "snap_1", "--memory", "512M", "--name", "n"})
	want := api.Spec{FromSnapshot: "snap_1", Name: "n", Resources: api.Resources{MemoryMB: 512}}
	if code != -1 || !reflect.DeepEqual(spec, want) {
		t.Errorf("code %d, spec %+v\nwant %+v", code, spec, want)
	}
	r, stderr := newTestRemote("pool put")
	if _, _, code := parsePoolPut(r, []string{"warm", "--size", "1", "--from-snapshot", "snap_1"}); code != exitUsage {
		t.Errorf("pool put --from-snapshot: code %d, %s; want a usage error", code, stderr)
	}
}
