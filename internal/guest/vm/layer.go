package vm

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlockrun/airlock/internal/fsdiff"
	"github.com/airlockrun/airlock/internal/guest"
	"github.com/airlockrun/airlock/internal/snapshot"
)

// errNoDisk is a call about the writable disk in a VM that has none.
var errNoDisk = errors.New("this VM has no writable disk")

// scanLayer scans the writable layer (the disk, as init laid it out: guest.LayerLayout) live,
// as the host scans the other levels' (vmlink.LayerScan), and writes the tree to w; it closes w.
// The sandbox is not frozen: a scan is the state just after an exec, as on every level.
func scanLayer(w io.WriteCloser, p params) error {
	defer w.Close()
	if _, ok := p.disks[SerialLayer]; !ok {
		return errNoDisk
	}
	t, err := fsdiff.Scan(LayerDir, guest.LayerLayout)
	if err != nil {
		return err
	}
	return fsdiff.WriteTree(w, t)
}

// writeLayer writes the writable layer (the disk, as init laid it out: guest.LayerLayout) to w as
// a snapshot's tar stream, with the sandbox's cgroup frozen meanwhile, so the layer is one
// instant's; it closes w. The owners are the guest's ids, which are the sandbox's.
func writeLayer(w io.WriteCloser, p params) error {
	if _, ok := p.disks[SerialLayer]; !ok {
		w.Close()
		return errNoDisk
	}
	if err := freeze(true); err != nil {
		w.Close()
		return err
	}
	_, err := snapshot.WriteLayer(w, LayerDir, snapshot.WriteOptions{Layout: guest.LayerLayout})
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if ferr := freeze(false); err == nil {
		err = ferr
	}
	return err
}

// freeze freezes or thaws the sandbox's cgroup, and waits until the kernel says it is so.
func freeze(on bool) error {
	v, want := "0", "frozen 0"
	if on {
		v, want = "1", "frozen 1"
	}
	if err := os.WriteFile(filepath.Join(cgroupDir, "cgroup.freeze"), []byte(v), 0); err != nil {
		return fmt.Errorf("freeze the sandbox: %w", err)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		b, err := os.ReadFile(filepath.Join(cgroupDir, "cgroup.events"))
		if err == nil && strings.Contains(string(b), want) {
			return nil
		}
	}
	return fmt.Errorf("the sandbox's cgroup did not become %q", want)
}
