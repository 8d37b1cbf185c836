package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/airlockrun/airlock/test/bench/stats"
)

// imageLevels are the levels an image's sandboxes are measured at.
var imageLevels = []struct{ name, flags string }{
	{"container/runsc", "--isolation container --runtime runsc"},
	{"container/runc", "--isolation container --runtime runc"},
	{"process", "--isolation process"},
}

// images measures, per level, pull and an image's first sandbox against later ones. Each round
// runs, per level and in random order, a later sandbox in a data dir that pulled the image once,
// and a first one: a fresh data dir, warmed by one host-root sandbox (state dirs, the generated
// /etc, the runtime's root) so that what is left to the image's first sandbox is what the image
// itself costs, then `airlock pull` (timed on its own), then the first sandbox (timed), then
// the data dir is cleared again (so the mount table does not grow).
func (w *world) images(c config) (*imageReport, error) {
	host, stop, err := startRegistry()
	if err != nil {
		return nil, err
	}
	defer stop()
	ref, err := pushBusybox(host)
	if err != nil {
		return nil, err
	}
	runArgv := func(cfg, flags string, image bool) []string {
		a := append([]string{w.airlock, "run", "--config", cfg}, strings.Fields(flags)...)
		if image {
			a = append(a, "--image", ref)
		}
		return append(a, "--", "/bin/true")
	}
	pull := func(dd string) (time.Duration, error) {
		d, _, err := w.timed("pull", []string{w.airlock, "pull", "--data-dir", dd, ref}, "-")
		return d, err
	}
	pulls := make([][]time.Duration, len(imageLevels))
	var cells []*cell
	for i, lv := range imageLevels {
		slug := strings.ReplaceAll(lv.name, "/", "-")
		dd, cfg, err := w.dataDir("later-" + slug)
		if err != nil {
			return nil, err
		}
		if _, err := pull(dd); err != nil {
			return nil, err
		}
		trial := 0
		first := runner{Name: "first-" + slug, run: func() (time.Duration, error) {
			trial++
			dd, cfg, err := w.dataDir(fmt.Sprintf("first-%s-%d", slug, trial))
			if err != nil {
				return 0, err
			}
			if _, _, err := w.timed("warm", runArgv(cfg, lv.flags, false), ""); err != nil {
				return 0, err
			}
			p, err := pull(dd)
			if err != nil {
				return 0, err
			}
			pulls[i] = append(pulls[i], p)
			d, _, err := w.timed("first", runArgv(cfg, lv.flags, true), "")
			if err != nil {
				return 0, err
			}
			return d, w.dropDataDir(dd)
		}}
		cells = append(cells, &cell{runtime: lv.name, side: "first", runner: first},
			&cell{runtime: lv.name, side: "later", runner: w.command("later-"+slug, runArgv(cfg, lv.flags, true), "")})
	}
	fmt.Fprintf(os.Stderr, "container benchmark: images: %d warm-up + %d measured rounds of %d levels\n", c.warmup, c.rounds, len(imageLevels))
	if err := rounds(c.warmup, c.rounds, cells, func() error { return nil }); err != nil {
		return nil, err
	}
	ir := &imageReport{Ref: ref}
	for i, lv := range imageLevels {
		first, later := cells[2*i].samples, cells[2*i+1].samples
		p := pulls[i][c.warmup:] // the measured rounds' pulls
		f, l := stats.Summarize(first), stats.Summarize(later)
		ir.Rows = append(ir.Rows, imageRow{Level: lv.name, Pull: stats.Summarize(p), First: f, Later: l,
			Ratio: stats.Ratio(f.P50, l.P50), FirstMS: stats.Millis(first), LaterMS: stats.Millis(later)})
	}
	return ir, nil
}

// startRegistry serves go-containerregistry's in-memory registry on 127.0.0.1; airlock speaks
// plain HTTP to loopback registries.
func startRegistry() (string, func(), error) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	return strings.TrimPrefix(srv.URL, "http://"), srv.Close, nil
}

// pushBusybox pushes a one-layer image of the host's static /bin/busybox with a few applets
// linked to it, a passwd and group with the sandbox user, /tmp and /workspace.
func pushBusybox(host string) (string, error) {
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return "", fmt.Errorf("busybox image: %w (apt-get install busybox-static)", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(h tar.Header, body []byte) {
		h.Size = int64(len(body))
		if err == nil {
			err = tw.WriteHeader(&h)
		}
		if err == nil {
			_, err = tw.Write(body)
		}
	}
	dir := func(n string, mode int64) { add(tar.Header{Typeflag: tar.TypeDir, Name: n, Mode: mode}, nil) }
	dir("bin/", 0o755)
	dir("etc/", 0o755)
	dir("tmp/", 0o1777)
	dir("workspace/", 0o755)
	add(tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755}, bb)
	for _, a := range []string{"sh", "true", "echo", "cat", "ls"} {
		add(tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777}, nil)
	}
	add(tar.Header{Typeflag: tar.TypeReg, Name: "etc/passwd", Mode: 0o644},
		[]byte("root:x:0:0:root:/root:/bin/sh\nagent:x:1000:1000:agent:/workspace:/bin/sh\n"))
	add(tar.Header{Typeflag: tar.TypeReg, Name: "etc/group", Mode: 0o644}, []byte("root:x:0:\nagent:x:1000:\n"))
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		return "", err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerBytes)), nil })
	if err != nil {
		return "", err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return "", err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return "", err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config = v1.Config{Env: []string{"PATH=/bin"}}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return "", err
	}
	ref := host + "/" + benchImage
	r, err := name.ParseReference(ref)
	if err != nil {
		return "", err
	}
	if err := remote.Write(r, img); err != nil {
		return "", fmt.Errorf("push %s: %w", ref, err)
	}
	return ref, nil
}
