package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/image/imagetest"
)

// TestImagesThroughDaemon drives the image API of airlock serve, with the SDK and with the CLI
// pointed at the daemon by AIRLOCK_HOST: pull from a registry on loopback, list, get, the
// refusals, a sandbox made from the pulled image (the same store), removal while that sandbox
// lives, and prune once it is gone.
func TestImagesThroughDaemon(t *testing.T) {
	check := leakCheck(t)
	host := imagetest.Registry(t)
	ref := imagetest.Push(t, host, "e2e/busybox:1", imagetest.Busybox(t), v1.Config{Env: []string{"FROM_IMAGE=yes"}})
	dir := t.TempDir() + "/data"
	tenantKey, key := newKey(t, dir, "t1"), newAdminKey(t, dir)
	// The registry is on loopback, which a daemon's pulls reach only when the operator says so.
	cfg := filepath.Join(t.TempDir(), "airlock.json")
	if err := os.WriteFile(cfg, []byte(`{`+processDefault+`, "images":{"allowPrivateNetworks":true}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, dir, "--config", cfg)
	c, tc := d.client(key), d.client(tenantKey)
	cliKey := func(key string, args ...string) result { t.Helper(); return d.cli(t, key, nil, args...) }
	cli := func(args ...string) result { t.Helper(); return cliKey(key, args...) }

	// Images are daemon-wide: a tenant key lists them, and may neither pull nor remove one, nor
	// have the daemon pull an image the operator did not approve by creating a sandbox of it.
	if r := cliKey(tenantKey, "pull", ref); r.code != 1 || !strings.Contains(r.stderr, "admin key") {
		t.Fatalf("pull with a tenant key: %+v", r)
	}
	notApproved := smallSpec()
	notApproved.Image = ref
	if _, err := tc.Create(bg(), notApproved); clientErr(t, err).Code != api.CodeImageNotAllowed {
		t.Fatalf("create from an image not pulled nor approved: %v", err)
	}

	// With AIRLOCK_HOST the verbs ask the daemon, which wants a key (and a CLI that went to the
	// default data dir instead would succeed here: stop before it pulls there).
	if r := cliKey("alk_wrong", "images", "ls"); r.code != 1 || !strings.Contains(r.stderr, "AIRLOCK_TOKEN") {
		t.Fatalf("images ls with a wrong key: %+v", r)
	}
	// The CLI pulls through the daemon: the image is in the daemon's store.
	r := cli("pull", ref)
	digest := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(digest, "sha256:") || !strings.Contains(r.stderr, "on the daemon at "+d.url) {
		t.Fatalf("pull: %+v", r)
	}
	img, err := c.Image(bg(), ref)
	if err != nil || img.Digest != digest || len(img.Layers) != 1 || img.Size <= 0 {
		t.Fatalf("image after pull: %+v, %v", img, err)
	}
	if r = cli("images", "ls", "--json"); r.code != 0 {
		t.Fatalf("images ls: %+v", r)
	}
	var listed []api.Image
	if err := json.Unmarshal([]byte(r.stdout), &listed); err != nil || len(listed) != 1 || listed[0].Ref != ref {
		t.Errorf("images ls --json: %v %q", err, r.stdout)
	}

	for _, s := range []struct {
		name, method, path, body string
		status                   int
		code, field, msg         string
	}{
		{"pull again", "POST", "/api/v1/images", `{"ref":"` + ref + `"}`, 201, "", "", ""},
		{"get", "GET", "/api/v1/images/" + ref, "", 200, "", "", ""},
		{"get by digest", "GET", "/api/v1/images/" + digest, "", 200, "", "", ""},
		{"get unknown", "GET", "/api/v1/images/" + host + "/e2e/nope:1", "", 404, api.CodeNotFound, "", "not in the store"},
		{"bad ref", "POST", "/api/v1/images", `{"ref":"Not A Ref"}`, 400, api.CodeInvalidArgument, "ref", "not a valid image reference"},
		{"missing in the registry", "POST", "/api/v1/images", `{"ref":"` + host + `/e2e/missing:1"}`, 404, api.CodeNotFound, "", "not found in registry"},
		{"registry unreachable", "POST", "/api/v1/images", `{"ref":"127.0.0.1:1/e2e/x:1"}`, 422, api.CodeUnavailable, "", "unreachable"},
		{"no key", "", "/api/v1/images", "", 401, api.CodeUnauthorized, "", ""},
		{"tenant removes", "DELETE", "/api/v1/images/" + ref, "", 403, api.CodeForbidden, "", "admin key"},
		{"tenant prunes", "POST", "/api/v1/images/prune", "", 403, api.CodeForbidden, "", "admin key"},
	} {
		k, method := key, s.method
		if method == "" {
			k, method = "", "GET"
		}
		if strings.HasPrefix(s.name, "tenant") {
			k = tenantKey
		}
		status, e := rawJSON(t, d.url, k, method, s.path, s.body, nil)
		if status != s.status {
			t.Errorf("%s: %d %+v, want %d", s.name, status, e, s.status)
			continue
		}
		if s.status >= 300 && (e.Code != s.code || e.Field != s.field || !strings.Contains(e.Message, s.msg)) {
			t.Errorf("%s: %+v, want %s %q %q", s.name, e, s.code, s.field, s.msg)
		}
	}

	// A tenant's sandbox from the image the operator pulled, then the image removed under it:
	// the sandbox keeps its layers.
	if r = cliKey(tenantKey, "images", "ls"); r.code != 0 || !strings.Contains(r.stdout, ref) {
		t.Errorf("images ls with a tenant key: %+v", r)
	}
	spec := smallSpec()
	spec.Image = ref
	sb, err := tc.Create(bg(), spec)
	if err != nil {
		t.Fatalf("create from the pulled image: %v", err)
	}
	if res, err := tc.Exec(bg(), sb.ID, api.ExecRequest{Command: []string{"/bin/sh", "-c", "echo $FROM_IMAGE; ls /bin/busybox"}}); err != nil || res.Stdout != "yes\n/bin/busybox\n" {
		t.Fatalf("exec in the image's sandbox: %+v, %v", res, err)
	}
	if r = cli("images", "rm", ref); r.code != 0 || r.stdout != ref+"\n" || !strings.Contains(r.stderr, "1 layers kept while a live sandbox uses them") {
		t.Errorf("images rm in use: %+v", r)
	}
	if res, err := tc.Exec(bg(), sb.ID, api.ExecRequest{Command: []string{"/bin/busybox", "true"}}); err != nil || res.ExitCode != 0 {
		t.Errorf("exec after the image's removal: %+v, %v", res, err)
	}
	if r = cli("images", "rm", ref); r.code != 1 || !strings.Contains(r.stderr, "not in the store") {
		t.Errorf("images rm twice: %+v", r)
	}
	if r = cli("images", "prune"); r.code != 0 || r.stdout != "removed 0 layers, freed 0.0 MB; 1 in use kept\n" {
		t.Errorf("images prune in use: %+v", r)
	}
	if _, err := tc.Terminate(bg(), sb.ID); err != nil {
		t.Fatal(err)
	}
	rm, err := c.PruneImages(bg())
	if err != nil || rm.LayersRemoved != 1 || rm.BytesFreed <= 0 || rm.LayersInUse != 0 {
		t.Errorf("prune after the sandbox: %+v, %v", rm, err)
	}
	if r = cli("images", "ls"); r.code != 0 || strings.Contains(r.stdout, ref) {
		t.Errorf("images ls after all: %+v", r)
	}
	check()
}
