package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/guest"
	"github.com/airlockrun/airlock/internal/snapshot"
)

var _ driver.Snapshotter = (*Sandbox)(nil)

// Snapshot implements driver.Snapshotter. A layer init built (Launcher.InitLayer: the process
// level's) is saved as files only: its processes run on the host's kernel, and saving them would
// take CRIU, which does not work on every kernel (mem is ignored). The layer is read through
// init's clone of it (the host cannot see the sandbox's mount namespace otherwise) while the
// sandbox's cgroup is frozen. Otherwise the sandbox is saved the way its Launcher says.
func (s *Sandbox) Snapshot(ctx context.Context, w io.Writer, mem string) (bool, error) {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	if s.destroyed {
		return false, fmt.Errorf("snapshot: sandbox %s is destroyed: %w", s.id, errdefs.ErrConflict)
	}
	if err := s.ended("snapshot"); err != nil {
		return false, err
	}
	if !s.l.InitLayer {
		if s.l.Snapshot == nil {
			return false, fmt.Errorf("snapshot: this level cannot save sandboxes: %w", errdefs.ErrUnavailable)
		}
		if mem != "" && s.l.Control != nil {
			return s.snapshotMemory(ctx, w, mem)
		}
		if mem != "" && s.l.SavesMachine {
			// Between execs: none holds a stream the save would cut.
			if !s.gate.TryLock() {
				return false, fmt.Errorf("snapshot: an exec is running in sandbox %s, and a snapshot with memory is taken between execs; wait for it, or ask for files only (memory: false): %w", s.id, errdefs.ErrConflict)
			}
			defer s.gate.Unlock()
			return s.l.Snapshot(ctx, w, mem, s.paused)
		}
		return s.l.Snapshot(ctx, w, "", s.paused)
	}
	if err := s.holdLayer(ctx, "snapshot"); err != nil {
		return false, err
	}
	if !s.paused {
		fctx, cancel := context.WithTimeout(ctx, freezeTimeout)
		err := s.cg.Freeze(fctx)
		cancel()
		if err != nil {
			return false, fmt.Errorf("snapshot: freeze sandbox %s: %w", s.id, err)
		}
		defer s.thaw(context.WithoutCancel(ctx), "snapshot")
	}
	_, err := snapshot.WriteLayer(w, fmt.Sprintf("/proc/self/fd/%d", s.layer.Fd()), snapshot.WriteOptions{
		Layout: guest.LayerLayout, SandboxID: s.uids.SandboxID,
	})
	return false, err
}

// SavesMemory implements driver.Snapshotter: only a sandbox whose init dials its control socket
// (a runtime with a kernel of its own that it can save, gVisor's: see redial.go), or one that is
// a whole machine its level saves (a VM).
func (s *Sandbox) SavesMemory() bool { return s.l.Control != nil || s.l.SavesMachine }

// fetchLayer asks init for its clone of the writable layer.
func (s *Sandbox) fetchLayer(ctx context.Context) (*os.File, error) {
	m, err := s.request(ctx, guest.MsgLayer)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	if len(m.Files) != 1 {
		m.CloseFiles()
		return nil, fmt.Errorf("snapshot: init did not hand over the layer")
	}
	return m.Files[0], nil
}

// feed copies a snapshot's layer into w (init's pipe) and then reads layer to its end whatever
// init did with it, so that the snapshot's digest is always checked. A corrupt snapshot's error
// wins over the broken pipe it may have caused.
func feed(w io.WriteCloser, layer io.Reader) error {
	_, err := io.Copy(w, layer)
	w.Close()
	if _, derr := io.Copy(io.Discard, layer); derr != nil {
		return derr
	}
	return err
}

// seeded waits for the feeder of a restore and says what it found: a corrupt snapshot fails the
// restore even when init took everything it was given.
func seeded(fed <-chan error, err error) error {
	if fed == nil {
		return err
	}
	ferr := <-fed
	if errors.Is(ferr, snapshot.ErrCorrupt) {
		return ferr
	}
	if err != nil {
		return err
	}
	if ferr != nil {
		return fmt.Errorf("restore the snapshot's layer: %w", ferr)
	}
	return nil
}
