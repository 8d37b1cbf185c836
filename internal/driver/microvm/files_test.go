package microvm_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/errdefs"
)

// testFiles checks the files API of sb, a fresh default VM (TestBoot's: no boot of its own),
// served by its guest agent: a file written is the sandbox user's and seen by its commands,
// read back, listed, stat'ed; directories made and removed; a path that climbs out stays in the
// sandbox's root; errors keep their kinds (missing: not found, over the limit: too large); a
// paused VM refuses.
func testFiles(t *testing.T, sb driver.Sandbox) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fs, err := sb.(driver.FileServer).OpenFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	body := strings.Repeat("airlock ", 100000) // 800 kB: several windows of the link
	info, err := fs.Write("/workspace/d/a.txt", strings.NewReader(body), 0o640, 1<<20, true)
	if err != nil || info.Size != int64(len(body)) {
		t.Fatalf("write: %+v %v", info, err)
	}
	res := drivertest.Exec(t, sb, 20*time.Second, "stat -c '%u %a %s' /workspace/d/a.txt")
	if res.Stdout != "1000 640 800000\n" {
		t.Fatalf("the written file in the sandbox: %q %s", res.Stdout, res.Stderr)
	}
	rc, info, err := fs.Open("/workspace/d/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(got) != body || info.Size != int64(len(body)) {
		t.Fatalf("read back %d bytes (%+v): %v", len(got), info, err)
	}
	drivertest.Exec(t, sb, 10*time.Second, "echo made > /workspace/b.txt")
	list, err := fs.List("/workspace")
	if err != nil || len(list) != 2 || list[0].Name != "b.txt" || list[1].Name != "d" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if _, err := fs.Mkdir("/workspace/x/y", true); err != nil {
		t.Fatal(err)
	}
	if err := fs.Remove("/workspace/x", true); err != nil {
		t.Fatal(err)
	}
	if rc, _, err := fs.Open("/../../workspace/b.txt"); err != nil {
		t.Fatalf("a path climbing out: %v", err)
	} else {
		b, _ := io.ReadAll(rc)
		rc.Close()
		if string(b) != "made\n" {
			t.Fatalf("a path climbing out read %q", b)
		}
	}
	cases := []struct {
		name string
		call func() error
		want error
	}{
		{"missing", func() error { _, err := fs.Stat("/workspace/nope"); return err }, errdefs.ErrNotFound},
		{"too large", func() error {
			_, err := fs.Write("/workspace/big", strings.NewReader(body), 0o644, 1000, false)
			return err
		}, errdefs.ErrTooLarge},
		{"read-only root", func() error { _, err := fs.Write("/usr/x", strings.NewReader("x"), 0o644, 10, false); return err }, nil},
	}
	for _, c := range cases {
		err := c.call()
		if err == nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if err := sb.(driver.Pauser).Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.(driver.FileServer).OpenFiles(ctx); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("files of a paused VM: %v, want a conflict", err)
	}
	if err := sb.(driver.Pauser).Resume(ctx); err != nil {
		t.Fatal(err)
	}
}
