package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/image"
	"github.com/airlockrun/airlock/internal/image/imagetest"
	"github.com/airlockrun/airlock/internal/server"
	"github.com/airlockrun/airlock/internal/store"
	"github.com/airlockrun/airlock/internal/testutil"
)

// imageVerb runs an image verb with its own streams.
func imageVerb(verb func(*env, []string) int, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	e := &env{stdout: &out, stderr: &errOut, log: slog.New(slog.DiscardHandler)}
	code = verb(e, args)
	return code, out.String(), errOut.String()
}

func TestImageVerbs(t *testing.T) {
	testutil.RequiresRoot(t, "unpacking preserves owners")
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	host := imagetest.Registry(t)
	base := imagetest.Layer(t, imagetest.File("base", "shared", 0o644))
	ref1 := imagetest.PushLayers(t, host, "cli/one:v1", v1.Config{}, base, imagetest.Layer(t, imagetest.File("one", "1", 0o644)))
	ref2 := imagetest.PushLayers(t, host, "cli/two:v1", v1.Config{}, base, imagetest.Layer(t, imagetest.File("two", "2", 0o644)))
	dd := t.TempDir()

	code, out, errOut := imageVerb(pullCmd, "--data-dir", dd, ref1)
	if code != 0 || !strings.HasPrefix(out, "sha256:") || len(strings.TrimSpace(out)) != 71 {
		t.Fatalf("pull: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// Not a terminal: a plain line per layer and status.
	if strings.Count(errOut, "downloading\n") != 2 || strings.Count(errOut, "done\n") != 2 || strings.Contains(errOut, "\r") {
		t.Errorf("pull progress:\n%s", errOut)
	}
	digest1 := strings.TrimSpace(out)
	code, _, errOut = imageVerb(pullCmd, ref2, "--data-dir", dd)
	if code != 0 || strings.Count(errOut, "exists\n") != 1 {
		t.Fatalf("pull two: exit %d, stderr %q", code, errOut)
	}

	for _, c := range []struct {
		name   string
		verb   func(*env, []string) int
		args   []string
		code   int
		stdout string // substring
		stderr string // substring
	}{
		{"pull usage", pullCmd, []string{"--data-dir", dd}, 2, "", "usage: airlock pull"},
		{"pull bad ref", pullCmd, []string{"--data-dir", dd, "Not A Ref"}, 1, "", "not a valid image reference"},
		{"pull missing", pullCmd, []string{"--data-dir", dd, host + "/cli/nope:v1"}, 1, "", "not found"},
		{"ls", imagesCmd, []string{"ls", "--data-dir", dd}, 0, ref1, ""},
		{"ls default", imagesCmd, []string{"--data-dir", dd}, 0, "REF", ""},
		{"ls digest", imagesCmd, []string{"ls", "--data-dir", dd}, 0, digest1[:len("sha256:")+12] + " ", ""},
		{"unknown subcommand", imagesCmd, []string{"frob", "--data-dir", dd}, 2, "", "unknown subcommand"},
		{"rm usage", imagesCmd, []string{"rm", "--data-dir", dd}, 2, "", "usage"},
		{"rm missing", imagesCmd, []string{"rm", "--data-dir", dd, "nope:v1"}, 1, "", "airlock pull nope:v1"},
		{"rm", imagesCmd, []string{"rm", "--data-dir", dd, ref1}, 0, ref1 + "\n", ""},
		{"prune after rm has nothing", imagesCmd, []string{"prune", "--data-dir", dd}, 0, "removed 0 layers", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := imageVerb(c.verb, c.args...)
			if code != c.code || !strings.Contains(out, c.stdout) || !strings.Contains(errOut, c.stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q, %q", code, out, errOut, c.code, c.stdout, c.stderr)
			}
		})
	}

	code, out, _ = imageVerb(imagesCmd, "ls", "--json", "--data-dir", dd)
	var imgs []image.Image
	if err := json.Unmarshal([]byte(out), &imgs); code != 0 || err != nil || len(imgs) != 1 || imgs[0].Ref != ref2 {
		t.Errorf("ls --json: exit %d, %v, %q", code, err, out)
	}
	if code, out, _ = imageVerb(imagesCmd, "rm", ref2, "--data-dir", dd); code != 0 {
		t.Fatalf("rm two: %d", code)
	}
	if code, out, _ = imageVerb(imagesCmd, "ls", "--json", "--data-dir", dd); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("ls --json of an empty store: %q", out)
	}
}

func TestProgressViewTTY(t *testing.T) {
	var buf bytes.Buffer
	v := &progressView{w: &buf, tty: true, last: map[string]string{}}
	a, b := "sha256:"+strings.Repeat("a", 64), "sha256:"+strings.Repeat("b", 64)
	v.update(image.Progress{Layer: a, Done: 0, Total: 45_600_000, Status: image.StatusDownloading})
	v.update(image.Progress{Layer: b, Done: 0, Total: 1_000_000, Status: image.StatusDownloading})
	v.update(image.Progress{Layer: a, Done: 12_300_000, Total: 45_600_000, Status: image.StatusDownloading})
	want := "sha256:aaaaaaaa  0.0/45.6 MB  downloading\n" +
		"sha256:bbbbbbbb  0.0/1.0 MB  downloading\n" +
		"\x1b[2A\r\x1b[Ksha256:aaaaaaaa  12.3/45.6 MB  downloading\x1b[2B\r"
	if buf.String() != want {
		t.Errorf("got %q\nwant %q", buf.String(), want)
	}
}

func TestViaDaemon(t *testing.T) {
	for _, c := range []struct {
		host   string
		h      hostFlags
		daemon bool
	}{
		{"", hostFlags{}, false},
		{"127.0.0.1:7070", hostFlags{}, true},
		{"127.0.0.1:7070", hostFlags{dataDir: "/d"}, false},
		{"127.0.0.1:7070", hostFlags{configFile: "/c.json"}, false},
	} {
		t.Setenv("AIRLOCK_HOST", c.host)
		if got := viaDaemon(&c.h); got != c.daemon {
			t.Errorf("AIRLOCK_HOST=%q %+v: via daemon %v, want %v", c.host, c.h, got, c.daemon)
		}
	}
}

// TestImageVerbsViaDaemon runs the image verbs with AIRLOCK_HOST set: they go through the
// image API of a daemon (the real API server over its own store), not the data dir.
func TestImageVerbsViaDaemon(t *testing.T) {
	testutil.RequiresRoot(t, "unpacking preserves owners")
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	host := imagetest.Registry(t)
	ref := imagetest.PushLayers(t, host, "cli/remote:v1", v1.Config{}, imagetest.Layer(t, imagetest.File("f", "x", 0o644)))
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "airlock.db"), store.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	key, _, err := st.CreateAdminKey(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	daemonStore, err := image.Open(t.TempDir(), image.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(server.New(server.Config{}, nil, st, nil, server.Images{Store: daemonStore}, slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	t.Setenv("AIRLOCK_HOST", srv.URL)
	t.Setenv("AIRLOCK_TOKEN", key)
	if !viaDaemon(&hostFlags{}) {
		t.Fatal("AIRLOCK_HOST does not select the daemon; not pulling into the default data dir")
	}

	code, out, errOut := imageVerb(pullCmd, ref)
	if code != 0 || !strings.HasPrefix(out, "sha256:") || !strings.Contains(errOut, "pulling "+ref+" on the daemon at "+srv.URL) {
		t.Fatalf("pull: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if img, err := daemonStore.Get(ref); err != nil || img.Digest != strings.TrimSpace(out) {
		t.Fatalf("the daemon's store has %+v, %v", img, err)
	}
	local := t.TempDir() // --data-dir: the local store, whatever AIRLOCK_HOST says
	for _, c := range []struct {
		name           string
		verb           func(*env, []string) int
		args           []string
		code           int
		stdout, stderr string // substrings
	}{
		{"ls", imagesCmd, []string{"ls"}, 0, ref, ""},
		{"ls has the layer count", imagesCmd, nil, 0, "LAYERS", ""},
		{"local ls is empty", imagesCmd, []string{"ls", "--json", "--data-dir", local}, 0, "[]", ""},
		{"pull bad ref", pullCmd, []string{"Not A Ref"}, 1, "", "airlock: \"Not A Ref\" is not a valid image reference"},
		{"pull missing", pullCmd, []string{host + "/cli/nope:v1"}, 1, "", "not found in registry"},
		{"rm missing", imagesCmd, []string{"rm", host + "/cli/nope:v1"}, 1, "", "not in the store"},
		{"rm", imagesCmd, []string{"rm", ref}, 0, ref + "\n", ""},
		{"ls after rm", imagesCmd, []string{"ls", "--json"}, 0, "[]", ""},
		{"prune", imagesCmd, []string{"prune"}, 0, "removed 0 layers", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := imageVerb(c.verb, c.args...)
			if code != c.code || !strings.Contains(out, c.stdout) || !strings.Contains(errOut, c.stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q, %q", code, out, errOut, c.code, c.stdout, c.stderr)
			}
		})
	}
	code, out, _ = imageVerb(imagesCmd, "prune", "--json")
	var rm api.ImageRemoval
	if err := json.Unmarshal([]byte(out), &rm); code != 0 || err != nil || rm.Refs == nil {
		t.Errorf("prune --json: exit %d, %v, %q", code, err, out)
	}

	t.Setenv("AIRLOCK_TOKEN", "alk_wrong")
	if code, _, errOut := imageVerb(imagesCmd, "ls"); code != 1 || !strings.Contains(errOut, "AIRLOCK_TOKEN") {
		t.Errorf("bad key: exit %d, stderr %q", code, errOut)
	}
	t.Setenv("AIRLOCK_HOST", "127.0.0.1:1")
	if code, _, errOut := imageVerb(pullCmd, ref); code != exitUnreachable || !strings.Contains(errOut, "cannot reach the daemon") {
		t.Errorf("no daemon: exit %d, stderr %q", code, errOut)
	}
}
