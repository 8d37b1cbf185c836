package cgroups

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// Events is the part of Stats that counts limit events: what a caller samples before and after
// each command to tell which limits it hit.
type Events struct {
	OOMKills         int64 // as Stats.OOMKills
	PidsLimitHits    int64 // as Stats.PidsLimitHits
	ThrottledPeriods int64 // as Stats.ThrottledPeriods
}

// eventFile is where one Events counter is read from.
type eventFile struct {
	dir, name, key string
	// tree sums the nested child cgroups too: v1 counts these events only in the cgroup where
	// they happened.
	tree bool
	into func(*Events) *int64
}

// eventFiles lists the control files behind Events for the controllers the cgroup has.
func (c *Cgroup) eventFiles() []eventFile {
	var fs []eventFile
	if p := c.at[memoryCtrl]; p.v2 {
		fs = append(fs, eventFile{p.mount, "memory.events", "oom_kill", false, func(e *Events) *int64 { return &e.OOMKills }})
	} else if p.mount != "" {
		fs = append(fs, eventFile{p.mount, "memory.oom_control", "oom_kill", true, func(e *Events) *int64 { return &e.OOMKills }})
	}
	if p := c.at[pidsCtrl]; p.mount != "" {
		fs = append(fs, eventFile{p.mount, "pids.events", "max", !p.v2, func(e *Events) *int64 { return &e.PidsLimitHits }})
	}
	if p := c.at[cpuCtrl]; p.mount != "" {
		fs = append(fs, eventFile{p.mount, "cpu.stat", "nr_throttled", false, func(e *Events) *int64 { return &e.ThrottledPeriods }})
	}
	return fs
}

// Events reads the cgroup's limit-event counters: three control files instead of Stats' nine.
// A missing file (an older kernel) counts as zero.
func (c *Cgroup) Events() (Events, error) {
	var e Events
	if c.err != nil {
		return e, c.err
	}
	for _, f := range c.eventFiles() {
		n, err := c.eventSum(f.dir, f.name, f.key, f.tree)
		if err != nil {
			return e, err
		}
		*f.into(&e) = n
	}
	return e, nil
}

// EventReader reads Events through descriptors it keeps open: a sample costs a pread per control
// file (the kernel regenerates a control file read from offset 0) instead of a path walk, an open
// and a close each, for callers that sample around every command. It is safe for concurrent use.
// Close it when done; it does not keep the cgroup from being destroyed.
type EventReader struct {
	c     *Cgroup
	mu    sync.Mutex // guards files and buf: reads of one control file must not interleave
	files []openEventFile
	buf   [1024]byte // event files are a few short lines
}

type openEventFile struct {
	eventFile
	fd    int // the control file; -1 if it does not exist
	dirFd int // O_PATH descriptor of dir, to check for nested cgroups; -1 unless tree
}

// OpenEvents opens the cgroup's event counters for repeated reading.
func (c *Cgroup) OpenEvents() (*EventReader, error) {
	if c.err != nil {
		return nil, c.err
	}
	r := &EventReader{c: c}
	for _, f := range c.eventFiles() {
		of := openEventFile{eventFile: f, fd: -1, dirFd: -1}
		r.files = append(r.files, of)
		last := &r.files[len(r.files)-1]
		fd, err := openRetry(f.dir+"/"+f.name, unix.O_RDONLY|unix.O_CLOEXEC)
		if err != nil && !isNotExist(err) {
			r.Close()
			return nil, fmt.Errorf("cgroup %s: open %s/%s: %w", c.id, f.dir, f.name, err)
		}
		if err == nil {
			last.fd = fd
		}
		if f.tree {
			if last.dirFd, err = openRetry(f.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC); err != nil {
				r.Close()
				return nil, fmt.Errorf("cgroup %s: open %s: %w", c.id, f.dir, err)
			}
		}
	}
	return r, nil
}

// Read samples the counters.
func (r *EventReader) Read() (Events, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var e Events
	for _, f := range r.files {
		if f.fd < 0 {
			continue
		}
		if f.tree {
			// kernfs keeps a directory's link count at 2 plus its subdirectories; with any,
			// the slow path sums them.
			var st unix.Stat_t
			if err := unix.Fstat(f.dirFd, &st); err != nil || st.Nlink != 2 {
				n, err := r.c.eventSum(f.dir, f.name, f.key, true)
				if err != nil {
					return e, err
				}
				*f.into(&e) = n
				continue
			}
		}
		n, err := preadRetry(f.fd, r.buf[:])
		if err != nil {
			return e, fmt.Errorf("cgroup %s: read %s/%s: %w", r.c.id, f.dir, f.name, err)
		}
		*f.into(&e), _ = keyed(r.buf[:n], f.key)
	}
	return e, nil
}

// Close releases the descriptors.
func (r *EventReader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, f := range r.files {
		if f.fd >= 0 {
			unix.Close(f.fd)
		}
		if f.dirFd >= 0 {
			unix.Close(f.dirFd)
		}
		r.files[i].fd, r.files[i].dirFd = -1, -1
	}
	return nil
}

func preadRetry(fd int, buf []byte) (int, error) {
	for {
		n, err := unix.Pread(fd, buf, 0)
		if err != unix.EINTR {
			return n, err
		}
	}
}
