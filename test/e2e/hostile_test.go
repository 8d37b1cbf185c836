package e2e

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/internal/testutil"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

// hostile is a daemon with an operator's configuration (volumes, a template, a scoped secret,
// approved images, quotas, pool bounds) and three keys: tenants t1 and t2, and an admin.
type hostile struct {
	d                 *daemon
	dataDir           string
	shared, ro, tmpl  string // the volumes' and the template's host directories
	t1, t2, t3, admin string // keys
	c1, c2, adminC    *client.Client
	registry          net.Listener // a "registry" on loopback that records every connection
	registryAddr      string
	dialledMu         sync.Mutex // guards dialled
	dialled           int
}

func newHostile(t *testing.T) *hostile {
	t.Helper()
	h := &hostile{dataDir: filepath.Join(t.TempDir(), "data")}
	base := t.TempDir()
	h.shared, h.ro, h.tmpl = filepath.Join(base, "shared"), filepath.Join(base, "ro"), filepath.Join(base, "tmpl")
	for _, d := range []string{h.shared, h.ro, h.tmpl} {
		if err := os.MkdirAll(d, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(h.shared, "hello"), []byte("from the operator\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.ro, "hello"), []byte("read me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A file only host root may read, where a volume lies: no sandbox may reach it.
	if err := os.WriteFile(filepath.Join(base, "root-only"), []byte("host secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	var err error
	if h.registry, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.registry.Close() })
	go func() {
		for {
			c, err := h.registry.Accept()
			if err != nil {
				return
			}
			h.dialledMu.Lock()
			h.dialled++
			h.dialledMu.Unlock()
			c.Close()
		}
	}()
	h.registryAddr = h.registry.Addr().String()

	cfg := map[string]any{
		"volumes": map[string]any{
			"shared": map[string]any{"hostPath": h.shared, "tenants": []string{"t1"}},
			"ro":     map[string]any{"hostPath": h.ro, "readOnly": true, "tenants": []string{"*"}},
		},
		"templates": map[string]any{"tmpl": map[string]any{"dir": h.tmpl, "tenants": []string{"t1"}}},
		"network": map[string]any{"secrets": map[string]any{
			"tok": map[string]any{"value": "s3cret-value", "hosts": []string{"api.good.test"}, "tenants": []string{"t1"}},
		}},
		// Tenants may have the daemon pull any image: the address guard is what stops them.
		"images": map[string]any{"allowed": []string{"*"}},
		"tenants": map[string]any{
			"defaults": map[string]any{"maxSandboxes": 6},
			"overrides": map[string]any{"t2": map[string]any{"maxSandboxes": 2, "maxMemoryMb": 600},
				"t3": map[string]any{"requestsPerSecond": 20, "burst": 20}},
		},
		"limits": map[string]any{"maxPools": 2, "maxPoolSandboxes": 4},
		// An operator's tool granted to t1 alone.
		"tools":    map[string]any{"tools": []any{map[string]any{"name": "t1_only", "tenants": []string{"t1"}, "exec": map[string]any{"command": []string{"true"}}}}},
		"defaults": map[string]any{"isolation": "process"}, // processDefault
	}
	b, _ := json.Marshal(cfg)
	cfgFile := filepath.Join(t.TempDir(), "airlock.json")
	if err := os.WriteFile(cfgFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	h.t1, h.t2, h.t3, h.admin = newKey(t, h.dataDir, "t1"), newKey(t, h.dataDir, "t2"), newKey(t, h.dataDir, "t3"), newAdminKey(t, h.dataDir)
	h.d = startDaemon(t, h.dataDir, "--config", cfgFile)
	h.c1, h.c2, h.adminC = h.d.client(h.t1), h.d.client(h.t2), h.d.client(h.admin)
	return h
}

// levels are the isolation levels (and runtimes) this host offers, as the daemon says.
func (h *hostile) levels(t *testing.T) []api.Spec {
	t.Helper()
	caps, err := h.c1.Capabilities(bg())
	if err != nil {
		t.Fatal(err)
	}
	var out []api.Spec
	for _, l := range caps.Levels {
		switch {
		case !l.Available:
		case l.Level == api.LevelProcess || l.Level == api.LevelWasm:
			out = append(out, api.Spec{Isolation: l.Level})
		case l.Level == api.LevelContainer:
			for _, rt := range []string{"runc", "runsc"} {
				out = append(out, api.Spec{Isolation: l.Level, Runtime: rt})
			}
		}
	}
	return out
}

func levelName(s api.Spec) string {
	if s.Runtime != "" {
		return s.Isolation + "-" + s.Runtime
	}
	return s.Isolation
}

// sh runs script in a sandbox: sh -c on the native levels, the same in Python on wasm.
func sh(t *testing.T, c *client.Client, sb api.Sandbox, script, py string) api.ExecResult {
	t.Helper()
	cmd := []string{"/bin/sh", "-c", script}
	if sb.Isolation == api.LevelWasm {
		cmd = []string{"python3", "-c", py}
	}
	res, err := c.Exec(bg(), sb.ID, api.ExecRequest{Command: cmd, Timeout: 20})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	return res
}

// TestHostileTenant is issue 21's list, tried as a hostile tenant would, at every level the host
// offers: every attempt is refused with the right status, and the host and the other tenant
// are untouched.
func TestHostileTenant(t *testing.T) {
	testutil.RequiresRoot(t, "it makes sandboxes")
	check := leakCheck(t)
	h := newHostile(t)
	defer func() {
		// Nothing is left once the daemon has stopped: no process, cgroup or mount.
		if err := h.d.stop(); err != nil {
			t.Error(err)
		}
		check()
	}()

	t.Run("host paths", func(t *testing.T) {
		for _, lv := range h.levels(t) {
			t.Run(levelName(lv), func(t *testing.T) {
				body := func(fs string) string {
					rt := ""
					if lv.Runtime != "" {
						rt = `,"runtime":"` + lv.Runtime + `"`
					}
					return `{"isolation":"` + lv.Isolation + `"` + rt + `,"resources":{"memoryMb":256,"diskMb":256},` + fs + `}`
				}
				for _, c := range []struct{ name, fs, field string }{
					{"readOnly HOST:DEST", `"filesystem":{"readOnly":["/etc:/hostetc"]}`, "filesystem.readOnly[0]"},
					{"readOnly the data dir", `"filesystem":{"readOnly":["` + h.dataDir + `:/data"]}`, "filesystem.readOnly[0]"},
					{"readWrite HOST:DEST", `"filesystem":{"readWrite":["` + h.shared + `:/rw"]}`, "filesystem.readWrite[0]"},
					{"rootfs", `"rootfs":"` + h.dataDir + `"`, "rootfs"},
					{"volume by host path", `"volumes":[{"name":"` + h.shared + `","path":"/v"}]`, "volumes[0].name"},
				} {
					status, e := rawJSON(t, h.d.url, h.t1, "POST", "/api/v1/sandboxes", body(c.fs), nil)
					if status != http.StatusBadRequest || e.Field != c.field {
						t.Errorf("%s: %d %+v, want 400 naming %s", c.name, status, e, c.field)
					}
				}
				// Paths inside the sandbox are the sandbox's (seed 002's read_only), enforced by the
				// kernel; a granted volume mounts, read-only where the operator says so.
				spec := lv
				spec.Resources = api.Resources{MemoryMB: 256, DiskMB: 256}
				spec.Filesystem = api.Filesystem{ReadOnly: []string{"/workspace/data"}, ReadWrite: []string{"/scratch"}}
				spec.Volumes = []api.VolumeMount{{Name: "shared", Path: "/shared"}, {Name: "ro", Path: "/ro"}}
				// The SDK's host-side fields never cross the API.
				spec.Binds, spec.RootDir = []api.Bind{{Host: "/etc", Path: "/hostetc"}}, h.dataDir
				sb, err := h.c1.Create(bg(), spec)
				if err != nil {
					t.Fatalf("create: %v", err)
				}
				defer terminate(bg(), t, h.c1, sb.ID)
				// Each level writes its own file: each sandbox has its own host uid.
				newFile := "/shared/new-" + levelName(lv)
				res := sh(t, h.c1, sb, `cat /shared/hello; cat /ro/hello; echo w > `+newFile+` && echo shared-written
echo x > /ro/x 2>/dev/null || echo ro-refused
echo x > /workspace/data/x 2>/dev/null || echo data-refused
echo x > /scratch/x && echo scratch-written
cat /hostetc/shadow 2>/dev/null || echo no-hostetc
ls /airlock.db 2>/dev/null || echo no-db`, `
import os
print(open("/shared/hello").read(), end="")
print(open("/ro/hello").read(), end="")
open("`+newFile+`", "w").write("w\n"); print("shared-written")
for p, what in (("/ro/x", "ro"), ("/workspace/data/x", "data")):
    try:
        open(p, "w").write("x")
        print(what + "-written")
    except OSError:
        print(what + "-refused")
open("/scratch/x", "w").write("x"); print("scratch-written")
print("no-hostetc" if not os.path.exists("/hostetc/shadow") else open("/hostetc/shadow").read())
print("no-db" if not os.path.exists("/airlock.db") else "db")`)
				mustContain(t, "sandbox paths and volumes (stderr "+res.Stderr+")", res.Stdout, "from the operator", "read me", "shared-written",
					"ro-refused", "data-refused", "scratch-written", "no-hostetc", "no-db")
				if b, err := os.ReadFile(filepath.Join(h.shared, filepath.Base(newFile))); err != nil || string(b) != "w\n" {
					t.Errorf("the operator's volume did not get the sandbox's file: %q %v", b, err)
				}
				if _, err := os.Stat(filepath.Join(h.ro, "x")); err == nil {
					t.Error("a read-only volume was written")
				}
			})
		}
	})

	t.Run("compat route", func(t *testing.T) {
		status, e := rawJSON(t, h.d.url, h.t1, "POST", "/api/sandbox/create",
			`{"agent_id":"a","config":{"filesystem":{"read_write":["/etc:/x"]}}}`, nil)
		if status != http.StatusBadRequest || !strings.Contains(e.Field, "filesystem") {
			t.Errorf("compat read_write host path: %d %+v", status, e)
		}
	})

	t.Run("cli", func(t *testing.T) {
		r := h.d.cli(t, h.t1, nil, "create", "--ro", "/etc:/hostetc")
		if r.code == 0 || !strings.Contains(r.stderr, "--ro") {
			t.Errorf("airlock create --ro HOST:DEST: %+v", r)
		}
		if r := h.d.cli(t, h.t1, nil, "create", "--rootfs", "/"); r.code != 2 {
			t.Errorf("airlock create --rootfs: %+v (a flag of run only)", r)
		}
		if r := h.d.cli(t, h.t2, nil, "create", "--volume", "shared:/s"); r.code == 0 || !strings.Contains(r.stderr, "not granted") {
			t.Errorf("airlock create --volume of another tenant: %+v", r)
		}
		r = h.d.cli(t, h.t2, nil, "volumes")
		if r.code != 0 || !strings.Contains(r.stdout, "ro") || strings.Contains(r.stdout, "shared") || strings.Contains(r.stdout, h.ro) {
			t.Errorf("airlock volumes as t2: %+v", r)
		}
		if r := h.d.cli(t, h.t2, nil, "templates"); r.code != 0 || !strings.Contains(r.stdout, "host") || strings.Contains(r.stdout, "tmpl") {
			t.Errorf("airlock templates as t2 (tmpl is t1's): %+v", r)
		}
		if r := h.d.cli(t, h.t1, nil, "templates"); r.code != 0 || !strings.Contains(r.stdout, "tmpl") || strings.Contains(r.stdout, h.tmpl) {
			t.Errorf("airlock templates as t1 (its template, not where it lies): %+v", r)
		}
		if r := h.d.cli(t, h.admin, nil, "volumes"); r.code != 0 || !strings.Contains(r.stdout, h.shared) {
			t.Errorf("airlock volumes as admin: %+v", r)
		}
		if r := h.d.cli(t, h.t2, nil, "tenants"); r.code != 0 || !strings.Contains(r.stdout, "t2") || strings.Contains(r.stdout, "t1") {
			t.Errorf("airlock tenants as t2: %+v", r)
		}
	})

	t.Run("grants", func(t *testing.T) {
		for _, c := range []struct {
			name string
			c    *client.Client
			spec api.Spec
			code string
		}{
			{"volume of another tenant", h.c2, api.Spec{Volumes: []api.VolumeMount{{Name: "shared", Path: "/s"}}}, api.CodeVolumeNotGranted},
			{"unknown volume", h.c1, api.Spec{Volumes: []api.VolumeMount{{Name: "etc", Path: "/s"}}}, api.CodeVolumeNotGranted},
			{"template of another tenant", h.c2, api.Spec{Template: "tmpl"}, api.CodeTemplateNotGranted},
			{"secret to a foreign host", h.c1, api.Spec{Network: api.Network{AllowedDomains: []string{"evil.test"},
				Credentials: []api.Credential{{Host: "evil.test", Header: "X-Stolen", Secret: "tok"}}}}, api.CodeSecretNotGranted},
			{"secret of another tenant", h.c2, api.Spec{Network: api.Network{AllowedDomains: []string{"api.good.test"},
				Credentials: []api.Credential{{Host: "api.good.test", Header: "Authorization", Secret: "tok"}}}}, api.CodeSecretNotGranted},
		} {
			_, err := c.c.Create(bg(), c.spec)
			if ce := clientErr(t, err); ce.StatusCode != http.StatusForbidden || ce.Code != c.code || !errors.Is(err, client.ErrForbidden) {
				t.Errorf("%s: %+v, want 403 %s", c.name, ce, c.code)
			}
		}
		// Nor live, through a policy change.
		sb, err := h.c1.Create(bg(), smallSpec())
		if err != nil {
			t.Fatal(err)
		}
		defer terminate(bg(), t, h.c1, sb.ID)
		_, err = h.c1.UpdateNetwork(bg(), sb.ID, api.Network{AllowedDomains: []string{"evil.test"},
			Credentials: []api.Credential{{Host: "evil.test", Header: "X-Stolen", Secret: "tok"}}})
		if ce := clientErr(t, err); ce.Code != api.CodeSecretNotGranted {
			t.Errorf("PUT network binding a secret to a foreign host: %+v", ce)
		}
	})

	t.Run("another tenant's things", func(t *testing.T) {
		sb, err := h.c1.Create(bg(), smallSpec())
		if err != nil {
			t.Fatal(err)
		}
		defer terminate(bg(), t, h.c1, sb.ID)
		snap, err := h.c1.Snapshot(bg(), sb.ID, api.SnapshotRequest{Name: "mine"})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if _, err := h.c1.DeleteSnapshot(bg(), snap.ID); err != nil {
				t.Errorf("delete snapshot: %v", err)
			}
		}()
		hook, err := h.c1.CreateWebhook(bg(), api.WebhookRequest{URL: "https://hooks.example.com/x"})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if _, err := h.c1.DeleteWebhook(bg(), hook.ID); err != nil {
				t.Errorf("delete webhook: %v", err)
			}
		}()
		for _, c := range []struct{ method, path string }{
			{"GET", "/api/v1/sandboxes/" + sb.ID}, {"POST", "/api/v1/sandboxes/" + sb.ID + "/exec"},
			{"GET", "/api/v1/sandboxes/" + sb.ID + "/files?path=/etc/passwd"}, {"DELETE", "/api/v1/sandboxes/" + sb.ID},
			{"GET", "/api/v1/snapshots/" + snap.ID}, {"DELETE", "/api/v1/snapshots/" + snap.ID},
			{"POST", "/api/v1/sandboxes/" + sb.ID + "/restore"},
			{"GET", "/api/v1/webhooks/" + hook.ID}, {"DELETE", "/api/v1/webhooks/" + hook.ID},
			// The agent's routes and seed 002's surface answer another tenant's id the same way.
			{"POST", "/api/v1/sandboxes/" + sb.ID + "/start"}, {"POST", "/api/v1/sandboxes/" + sb.ID + "/agent/stdin"},
			{"GET", "/api/sandbox/" + sb.ID}, {"POST", "/api/sandbox/" + sb.ID + "/run"}, {"DELETE", "/api/sandbox/" + sb.ID},
		} {
			body := ""
			switch {
			case strings.HasSuffix(c.path, "/exec"):
				body = `{"command":"true"}`
			case strings.HasSuffix(c.path, "/run"):
				body = `{"code":"print(1)"}`
			case strings.HasSuffix(c.path, "/restore"):
				body = `{"snapshotId":"` + snap.ID + `"}`
			}
			if status, e := rawJSON(t, h.d.url, h.t2, c.method, c.path, body, nil); status != http.StatusNotFound {
				t.Errorf("t2 %s %s: %d %+v, want 404", c.method, c.path, status, e)
			}
		}
		// t2's fork from t1's snapshot.
		if _, err := h.c2.Create(bg(), api.Spec{FromSnapshot: snap.ID}); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("create from another tenant's snapshot: %v", err)
		}
		if res, err := h.c1.Exec(bg(), sb.ID, api.ExecRequest{Command: api.Shell("echo still mine")}); err != nil || res.Stdout != "still mine\n" {
			t.Errorf("t1's sandbox after t2's tries: %+v %v", res, err)
		}
	})

	t.Run("tools", func(t *testing.T) { h.tools(t) })
	t.Run("browser keys and the audit check", h.browserAndAudit)

	t.Run("daemon-wide resources", func(t *testing.T) {
		pool := `{"spec":{"resources":{"memoryMb":128,"diskMb":64}},"size":1}`
		for _, c := range []struct{ method, path, body string }{
			{"PUT", "/api/v1/pools/mine", pool}, {"DELETE", "/api/v1/pools/warm", ""},
			{"POST", "/api/v1/images", `{"ref":"` + h.registryAddr + `/x:1"}`},
			{"DELETE", "/api/v1/images/busybox:1", ""}, {"POST", "/api/v1/images/prune", ""},
		} {
			status, e := rawJSON(t, h.d.url, h.t1, c.method, c.path, c.body, nil)
			if status != http.StatusForbidden || e.Code != api.CodeForbidden || !strings.Contains(e.Message, "admin key") {
				t.Errorf("tenant %s %s: %d %+v, want 403 naming the admin key", c.method, c.path, status, e)
			}
		}
		// The operator's pools are bounded too: a flood is refused whole.
		if _, err := h.adminC.PutPool(bg(), api.Pool{Name: "flood", Spec: smallSpec(), Size: 60}); clientErr(t, err).Code != api.CodeQuotaExceeded {
			t.Errorf("flood pool: %v", err)
		}
		if _, err := h.adminC.PutPool(bg(), api.Pool{Name: "warm", Spec: smallSpec(), Size: 1}); err != nil {
			t.Fatalf("admin pool: %v", err)
		}
		other := smallSpec()
		other.Resources.MemoryMB = 128
		if _, err := h.adminC.PutPool(bg(), api.Pool{Name: "warm2", Spec: other, Size: 1}); err != nil {
			t.Fatalf("admin pool: %v", err)
		}
		third := smallSpec()
		third.Resources.MemoryMB = 64
		if _, err := h.adminC.PutPool(bg(), api.Pool{Name: "warm3", Spec: third, Size: 1}); clientErr(t, err).Field != "quota.maxPools" {
			t.Errorf("a third pool past maxPools: %v", err)
		}
		if ps, err := h.c1.Pools(bg()); err != nil || len(ps) != 2 {
			t.Errorf("tenant lists pools: %v %v", ps, err)
		}
		for _, n := range []string{"warm", "warm2"} {
			if _, err := h.adminC.DeletePool(bg(), n); err != nil {
				t.Error(err)
			}
		}
	})

	t.Run("image refs that dial", func(t *testing.T) {
		for _, ref := range []string{h.registryAddr + "/e2e/x:1", "169.254.169.254/e2e/x:1", "localhost:" + strings.Split(h.registryAddr, ":")[1] + "/e2e/x:1"} {
			spec := smallSpec()
			spec.Image = ref
			_, err := h.c1.Create(bg(), spec)
			ce := clientErr(t, err)
			if ce.StatusCode != http.StatusForbidden || ce.Code != api.CodeImageNotAllowed || !strings.Contains(ce.Message, "not allowed") ||
				strings.Contains(ce.Message, "refused") || strings.Contains(ce.Message, "connect") {
				t.Errorf("tenant image %s: %+v, want a 403 that says only 'not allowed'", ref, ce)
			}
			// The operator's pull through the API is guarded alike.
			if _, err := h.adminC.Pull(bg(), ref); clientErr(t, err).Code != api.CodeImageNotAllowed {
				t.Errorf("admin pull %s: %v", ref, err)
			}
		}
		h.dialledMu.Lock()
		defer h.dialledMu.Unlock()
		if h.dialled != 0 {
			t.Errorf("the daemon dialled the loopback registry %d times", h.dialled)
		}
	})

	t.Run("quotas", func(t *testing.T) {
		big := smallSpec()
		big.Resources.MemoryMB = 512
		a, err := h.c2.Create(bg(), big)
		if err != nil {
			t.Fatal(err)
		}
		_, err = h.c2.Create(bg(), big)
		if ce := clientErr(t, err); ce.StatusCode != http.StatusTooManyRequests || ce.Field != "quota.maxMemoryMb" {
			t.Errorf("memory past the quota: %+v", ce)
		}
		small := smallSpec()
		small.Resources.MemoryMB = 64
		b, err := h.c2.Create(bg(), small)
		if err != nil {
			t.Fatal(err)
		}
		_, err = h.c2.Create(bg(), small)
		if ce := clientErr(t, err); ce.StatusCode != http.StatusTooManyRequests || ce.Field != "quota.maxSandboxes" {
			t.Errorf("sandboxes past the quota: %+v", ce)
		}
		ts, err := h.c2.Tenants(bg())
		if err != nil || len(ts) != 1 || ts[0].Usage.Sandboxes != 2 || ts[0].Usage.MemoryMB != 576 || ts[0].Quota.MaxMemoryMB != 600 {
			t.Errorf("t2's tenants view: %+v %v", ts, err)
		}
		// Another tenant is not bounded by t2's use.
		if c, err := h.c1.Create(bg(), big); err != nil {
			t.Errorf("t1 beside a full t2: %v", err)
		} else {
			terminate(bg(), t, h.c1, c.ID)
		}
		// Ended sandboxes give their share back: terminated, and failed (its init killed from the
		// host).
		terminate(bg(), t, h.c2, b.ID)
		for _, pid := range cgroupProcs("airlock", uidalloc.InstanceOf(h.dataDir), a.ID) {
			_ = syscall.Kill(pid, syscall.SIGKILL) // one gone already: the loop below checks the sandbox failed
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			sb, err := h.c2.Get(bg(), a.ID)
			if err == nil && sb.Status == api.StatusFailed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a sandbox whose init was killed: %+v %v", sb, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		for range 2 { // twice: what failed counts no more than what was terminated
			c, err := h.c2.Create(bg(), big)
			if err != nil {
				t.Fatalf("after a failure and a termination: %v", err)
			}
			terminate(bg(), t, h.c2, c.ID)
		}
		all, err := h.adminC.Tenants(bg())
		if err != nil || len(all) < 4 {
			t.Errorf("admin's tenants view: %+v %v", all, err)
		}
		// The request rate (t3's): a burst of 20, then 429 with Retry-After.
		var limited int
		var retry string
		for range 60 {
			req, _ := http.NewRequest("GET", h.d.url+"/api/v1/sandboxes", nil)
			req.Header.Set("Authorization", "Bearer "+h.t3)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests {
				limited++
				retry = resp.Header.Get("Retry-After")
			}
		}
		if limited < 20 || retry == "" {
			t.Errorf("60 requests at once against 20/s with a burst of 20: %d limited, Retry-After %q", limited, retry)
		}
		if _, err := h.c1.List(bg(), client.ListOptions{}); err != nil {
			t.Errorf("t1 while t3 is limited: %v", err)
		}
	})

	t.Run("admin key", func(t *testing.T) {
		r := runAirlock(t, nil, "keys", "ls", "--data-dir", h.dataDir)
		if r.code != 0 || !strings.Contains(r.stdout, "admin") || !strings.Contains(r.stdout, "tenant") {
			t.Errorf("keys ls: %+v", r)
		}
		sb, err := h.adminC.Create(bg(), api.Spec{Resources: api.Resources{MemoryMB: 128, DiskMB: 64}, Volumes: []api.VolumeMount{{Name: "shared", Path: "/s"}}})
		if err != nil {
			t.Fatalf("the operator uses every volume: %v", err)
		}
		terminate(bg(), t, h.adminC, sb.ID)
		if list, err := h.c1.List(bg(), client.ListOptions{}); err != nil || containsID(list, sb.ID) {
			t.Errorf("t1 sees the operator's sandbox: %v", err)
		}
	})
}

func containsID(list []api.Sandbox, id string) bool {
	for _, s := range list {
		if s.ID == id {
			return true
		}
	}
	return false
}

// tools tries the tool gateway's routes as t2 on t1's tools, servers, policies and sandboxes,
// and what a tenant may not define: none of it reaches anything of t1's or makes the daemon dial.
func (h *hostile) tools(t *testing.T) {
	sb, err := h.c1.Create(bg(), smallSpec())
	if err != nil {
		t.Fatal(err)
	}
	defer terminate(bg(), t, h.c1, sb.ID)
	defer terminateToolSandboxes(t, h.c1)
	defer terminateToolSandboxes(t, h.c2)
	exe := &api.ExecBackend{Command: api.Command{"echo", "mine"}, Stdin: api.ToolStdinNone}
	if _, err := h.c1.PutTool(bg(), api.ToolDefinition{Name: "mine", Exec: exe}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.c1.PutToolServer(bg(), api.ToolServer{Name: "srv", Command: api.Command{"cat"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.c1.PutToolPolicy(bg(), api.ToolPolicy{Name: "pol", AgentID: "bot", Deny: []string{"*"}}); err != nil {
		t.Fatal(err)
	}
	// t2 on t1's names: 404 for the resources, 403 tool_not_allowed for calls; nothing listed.
	for _, c := range []struct {
		method, path, body string
		status             int
	}{
		{"GET", "/api/v1/tools/mine", "", 404}, {"DELETE", "/api/v1/tools/mine", "", 404},
		{"POST", "/api/v1/tools/mine/call", `{}`, 403}, {"POST", "/api/v1/tools/t1_only/call", `{}`, 403},
		{"POST", "/api/v1/tools/srv__anything/call", `{}`, 403},
		{"GET", "/api/v1/tool-servers/srv", "", 404}, {"DELETE", "/api/v1/tool-servers/srv", "", 404},
		{"GET", "/api/v1/tool-policies/pol", "", 404}, {"DELETE", "/api/v1/tool-policies/pol", "", 404},
		// A tenant key on another tenant's policies (an admin key's right).
		{"GET", "/api/v1/tool-policies?tenant=t1", "", 403}, {"GET", "/api/v1/tool-policies/pol?tenant=t1", "", 403},
		{"DELETE", "/api/v1/tool-policies/pol?tenant=t1", "", 403}, {"PUT", "/api/v1/tool-policies/x", `{"tenant":"t1","deny":["*"]}`, 403},
		// t1's sandbox as the sandbox of t2's calls.
		{"POST", "/api/v1/tools/run_code/call", `{"arguments":{"code":"print(1)"},"sandboxId":"` + sb.ID + `"}`, 404},
		{"POST", "/api/v1/tools/read_file/call", `{"arguments":{"path":"/etc/passwd"},"sandboxId":"` + sb.ID + `"}`, 404},
	} {
		if status, e := rawJSON(t, h.d.url, h.t2, c.method, c.path, c.body, nil); status != c.status {
			t.Errorf("t2 %s %s: %d %+v, want %d", c.method, c.path, status, e, c.status)
		}
	}
	ts, err := h.c2.Tools(bg(), client.ToolsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range ts {
		if tl.Name == "mine" || tl.Name == "t1_only" || strings.HasPrefix(tl.Name, "srv__") {
			t.Errorf("t2 lists t1's tool %s", tl.Name)
		}
	}
	if ps, _ := h.c2.ToolPolicies(bg(), client.PolicyOptions{}); len(ps) != 0 {
		t.Errorf("t2 lists policies %+v", ps)
	}
	// A tool of t2's that names t1's sandbox, or a volume granted to t1 only, runs nowhere.
	if _, err := h.c2.PutTool(bg(), api.ToolDefinition{Name: "borrow", Exec: exe, Sandbox: &api.ToolSandbox{SandboxID: sb.ID}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.c2.CallTool(bg(), "borrow", api.ToolCallRequest{}); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("t2's tool in t1's sandbox: want 404, got %v", err)
	}
	vol := &api.ToolSandbox{Spec: &api.Spec{Resources: api.Resources{MemoryMB: 64, DiskMB: 64}, Volumes: []api.VolumeMount{{Name: "shared", Path: "/s"}}}}
	if _, err := h.c2.PutTool(bg(), api.ToolDefinition{Name: "vol", Exec: exe, Sandbox: vol}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.c2.CallTool(bg(), "vol", api.ToolCallRequest{}); clientErr(t, err).Code != api.CodeVolumeNotGranted {
		t.Errorf("t2's tool with t1's volume: want 403 volume_not_granted, got %v", err)
	}
	// Nothing a tenant defines makes the daemon dial where it chooses: the daemon's own egress
	// and URL servers are the operator's; an http tool or http_fetch leaves through a sandbox,
	// and one without a network sends nothing.
	target := "http://" + h.registryAddr + "/x"
	if _, err := h.c2.PutTool(bg(), api.ToolDefinition{Name: "direct", HTTP: &api.HTTPBackend{URL: target, Egress: api.ToolEgressDaemon}}); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("a tenant's daemon egress: want 403, got %v", err)
	}
	if _, err := h.c2.PutToolServer(bg(), api.ToolServer{Name: "up", URL: target}); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("a tenant's URL server: want 403, got %v", err)
	}
	offline := &api.ToolSandbox{Spec: &api.Spec{Resources: api.Resources{MemoryMB: 64, DiskMB: 64}, Network: api.Network{EgressPolicy: api.EgressNone}}}
	if _, err := h.c2.PutTool(bg(), api.ToolDefinition{Name: "viaproxy", HTTP: &api.HTTPBackend{URL: target}, Sandbox: offline}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.c2.CallTool(bg(), "viaproxy", api.ToolCallRequest{}); !errors.Is(err, client.ErrConflict) {
		t.Errorf("an http tool through a sandbox without a network: want 409, got %v", err)
	}
	if _, err := h.c2.CallTool(bg(), api.ToolHTTPFetch, api.ToolCallRequest{Arguments: map[string]any{"url": target}}); !errors.Is(err, client.ErrConflict) {
		t.Errorf("http_fetch from the default workspace: want 409, got %v", err)
	}
	if _, err := h.c2.PutTool(bg(), api.ToolDefinition{Name: "local", InputSchema: map[string]any{"type": "object", "properties": map[string]any{
		"a": map[string]any{"$ref": "file://" + h.dataDir + "/airlock.db"}}}, Exec: exe}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("a schema $ref to a host file: want 400, got %v", err)
	}
	h.dialledMu.Lock()
	if h.dialled != 0 {
		t.Errorf("the daemon dialled the loopback listener %d times", h.dialled)
	}
	h.dialledMu.Unlock()
	// t1's MCP session is t1's.
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`
	mcpPost := func(key, session, body string) (int, string) {
		method := http.MethodPost
		if m, rest, ok := strings.Cut(body, " "); ok && (m == http.MethodGet || m == http.MethodDelete) {
			method, body = m, rest
		}
		req, _ := http.NewRequest(method, h.d.url+"/mcp", strings.NewReader(body))
		req.Close = true
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body) // the status is what is checked
		return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
	}
	status, session := mcpPost(h.t1, "", body)
	if status != http.StatusOK || session == "" {
		t.Fatalf("t1's initialize: %d, session %q", status, session)
	}
	if status, _ := mcpPost(h.t2, session, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); status != http.StatusForbidden {
		t.Errorf("t2 on t1's MCP session: %d, want 403", status)
	}
	if status, _ := mcpPost("", session, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); status != http.StatusUnauthorized {
		t.Errorf("no key on t1's MCP session: %d, want 401", status)
	}
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		if status, _ := mcpPost(h.t2, session, m+" "); status != http.StatusForbidden {
			t.Errorf("t2's %s of t1's MCP session: %d, want 403", m, status)
		}
	}
	if status, _ := mcpPost(h.t1, session, http.MethodDelete+" "); status != http.StatusNoContent && status != http.StatusOK {
		t.Errorf("t1 ends its own MCP session: %d", status)
	}
}
