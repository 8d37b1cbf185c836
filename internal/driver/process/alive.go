package process

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// A paused sandbox is frozen, init included, so when its daemon dies init cannot count its orphan
// grace: the host counts it instead. A driver that makes adoptable sandboxes touches a file in
// its state dir while it runs (every second); after a kill, that file's time is when the
// sandboxes were orphaned, give or take a beat, and the next driver does not adopt a frozen one
// whose grace ran out meanwhile (Adopt): it is reclaimed, as its running siblings ended by
// themselves.

// aliveFile is the file the driver keeps touching.
func (d *Driver) aliveFile() string { return filepath.Join(d.cfg.StateDir, "alive") }

// heartbeat notes, once, when the previous driver on the state dir was last alive, then touches
// the file every beat until stop is closed, and removes it then (a clean stop orphans nothing).
func (d *Driver) heartbeat(stop <-chan struct{}) {
	if st, err := os.Stat(d.aliveFile()); err == nil {
		d.orphanedAt = st.ModTime()
	}
	beat := min(time.Second, d.cfg.OrphanGrace/4)
	failing := false // said once per run of failures, not every beat
	touch := func() {
		now := time.Now()
		err := os.Chtimes(d.aliveFile(), now, now)
		if errors.Is(err, fs.ErrNotExist) {
			err = os.MkdirAll(d.cfg.StateDir, 0o700)
			if err == nil {
				var f *os.File
				if f, err = os.Create(d.aliveFile()); err == nil {
					f.Close()
				}
			}
		}
		if err != nil && !failing {
			// The next driver would not know when this one died, and would adopt a paused
			// sandbox whose grace ran out.
			d.log.Warn("the heartbeat file cannot be kept", "file", d.aliveFile(), "err", err)
		}
		failing = err != nil
	}
	touch()
	d.beats.Add(1)
	go func() {
		defer d.beats.Done()
		t := time.NewTicker(beat)
		defer t.Stop()
		for {
			select {
			case <-stop:
				os.Remove(d.aliveFile())
				return
			case <-t.C:
				touch()
			}
		}
	}()
}

// orphanedTooLong reports whether a frozen sandbox of the previous driver outlived its grace: the
// previous driver was last alive more than the grace ago.
func (d *Driver) orphanedTooLong() (time.Duration, bool) {
	if d.orphanedAt.IsZero() {
		return 0, false // no trace of a previous driver (a clean stop, or an older airlock)
	}
	gone := time.Since(d.orphanedAt)
	return gone, gone > d.cfg.OrphanGrace
}
