package cgroups

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// MemoryWatch tells when a cgroup's memory use reaches a level below its limit, for a caller
// that enforces the level itself: a sandbox kernel of its own (gVisor) charges everything to one
// cgroup, and the host's OOM killer would end all of it where the caller ends one process.
//
// On v1 it is the memory controller's threshold notification (cgroup.event_control with an
// eventfd on memory.usage_in_bytes); on v2, memory.high at the level (the kernel throttles and
// reclaims above it) and a notification on memory.events.
type MemoryWatch struct {
	// C receives a value when use may have reached the level (it is never closed; Close stops
	// the watch). Over, then, tells whether it has.
	C     <-chan struct{}
	c     chan struct{}
	level int64
	usage string // the file whose value is the use
	fd    int    // eventfd (v1) or memory.events (v2)
	done  chan struct{}
	once  sync.Once
}

// WatchMemory watches for the cgroup's memory use to reach level bytes.
func (c *Cgroup) WatchMemory(level int64) (*MemoryWatch, error) {
	if c.err != nil {
		return nil, c.err
	}
	p := c.at[memoryCtrl]
	if p.mount == "" {
		return nil, fmt.Errorf("cgroup %s: no memory controller", c.id)
	}
	ch := make(chan struct{}, 1)
	w := &MemoryWatch{C: ch, c: ch, level: level, done: make(chan struct{})}
	if p.v2 {
		if err := writeFile(filepath.Join(p.mount, "memory.high"), strconv.FormatInt(level, 10)); err != nil {
			return nil, fmt.Errorf("cgroup %s: memory.high: %w", c.id, err)
		}
		fd, err := unix.Open(filepath.Join(p.mount, "memory.events"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("cgroup %s: memory.events: %w", c.id, err)
		}
		w.fd, w.usage = fd, filepath.Join(p.mount, "memory.current")
		go w.pollV2()
		return w, nil
	}
	usage := filepath.Join(p.mount, "memory.usage_in_bytes")
	ufd, err := unix.Open(usage, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cgroup %s: memory.usage_in_bytes: %w", c.id, err)
	}
	defer unix.Close(ufd)
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("cgroup %s: eventfd: %w", c.id, err)
	}
	ctl := fmt.Sprintf("%d %d %d", efd, ufd, level)
	if err := writeFile(filepath.Join(p.mount, "cgroup.event_control"), ctl); err != nil {
		unix.Close(efd)
		return nil, fmt.Errorf("cgroup %s: memory threshold: %w", c.id, err)
	}
	w.fd, w.usage = efd, usage
	go w.readV1()
	return w, nil
}

// readV1 forwards the eventfd's counts: the kernel signals every crossing of the level, either
// way; Over tells which. It polls, so that Close ends it within watchPoll.
func (w *MemoryWatch) readV1() {
	defer unix.Close(w.fd)
	var b [8]byte
	for {
		fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, watchPoll); err != nil && err != unix.EINTR {
			return
		}
		select {
		case <-w.done:
			return
		default:
		}
		if n, _ := unix.Read(w.fd, b[:]); n == 8 {
			w.notify()
		}
	}
}

// watchPoll is how often (ms) a watch's goroutine looks whether it was closed.
const watchPoll = 100

// pollV2 waits for memory.events to change (the kernel wakes pollers with POLLPRI).
func (w *MemoryWatch) pollV2() {
	defer unix.Close(w.fd)
	var b [512]byte
	for {
		_, _ = unix.Pread(w.fd, b[:], 0) // a read arms the next notification; poll reports a failure
		fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLPRI}}
		if _, err := unix.Poll(fds, watchPoll); err != nil && err != unix.EINTR {
			return
		}
		select {
		case <-w.done:
			return
		default:
		}
		if fds[0].Revents&(unix.POLLPRI|unix.POLLERR) != 0 || w.Over() {
			w.notify()
		}
	}
}

func (w *MemoryWatch) notify() {
	select {
	case w.c <- struct{}{}:
	default:
	}
}

// Over reports whether the use is at or above the level now.
func (w *MemoryWatch) Over() bool {
	b, err := os.ReadFile(w.usage)
	if err != nil {
		return false
	}
	n, err := parseInt(b)
	return err == nil && n >= w.level
}

// Close stops the watch (its goroutine ends within watchPoll, then closes the descriptor; on v1
// the kernel drops the threshold with the cgroup).
func (w *MemoryWatch) Close() {
	w.once.Do(func() { close(w.done) })
}
