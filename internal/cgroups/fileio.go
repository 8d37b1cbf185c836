package cgroups

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"strconv"

	"golang.org/x/sys/unix"
)

// The helpers below use raw syscalls instead of os.ReadFile/os.WriteFile:
// cgroup control files report size 0, are always tiny except cgroup.procs,
// and are touched several times per sandbox start, so avoiding the fstat and
// the extra allocations of the os package keeps the hot path short.

// writeFile writes val to path with a single write(2), which cgroupfs
// requires (it parses one value per write call).
func writeFile(path, val string) error {
	fd, err := openRetry(path, unix.O_WRONLY|unix.O_CLOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	for {
		_, err = unix.Write(fd, []byte(val))
		// The Go runtime preempts goroutines with SIGURG, and cgroup writes
		// that reclaim memory (memory.limit_in_bytes, memory.max) return
		// EINTR when a signal arrives, so a retry is needed, not an error.
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// readFile reads the whole of a cgroup control file. Control files are
// seq_files, which fill the caller's buffer unless the end is reached, so a
// short read means EOF and saves the extra read(2) that would return 0.
func readFile(path string) ([]byte, error) {
	fd, err := openRetry(path, unix.O_RDONLY|unix.O_CLOEXEC)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	buf := make([]byte, 0, 512)
	for {
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		buf = buf[:len(buf)+n]
		if n == 0 || len(buf) < cap(buf) {
			return buf, nil
		}
		buf = append(buf, make([]byte, cap(buf))...)[:len(buf)]
	}
}

func openRetry(path string, flags int) (int, error) {
	for {
		fd, err := unix.Open(path, flags, 0)
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// readInt reads a file holding a single integer, such as pids.current.
func readInt(path string) (int64, error) {
	b, err := readFile(path)
	if err != nil {
		return 0, err
	}
	return parseInt(b)
}

func parseInt(b []byte) (int64, error) {
	s := string(bytes.TrimSpace(b))
	if s == "max" {
		return -1, nil
	}
	return strconv.ParseInt(s, 10, 64)
}

// keyed returns the value of the "key N" line of a flat keyed file such as
// cpu.stat or memory.events; ok is false when the key is absent, which
// happens on older kernels for newer counters.
func keyed(data []byte, key string) (v int64, ok bool) {
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if len(line) > len(key) && line[len(key)] == ' ' && string(line[:len(key)]) == key {
			n, err := strconv.ParseInt(string(bytes.TrimSpace(line[len(key)+1:])), 10, 64)
			if err != nil {
				return 0, false
			}
			return n, true
		}
	}
	return 0, false
}

// parsePids parses the one-pid-per-line format of cgroup.procs.
func parsePids(data []byte, into map[int]struct{}) error {
	for _, f := range bytes.Fields(data) {
		pid, err := strconv.Atoi(string(f))
		if err != nil {
			return err
		}
		into[pid] = struct{}{}
	}
	return nil
}

// subdirs lists the child cgroups of dir. A vanished dir yields none, since
// a cgroup removed concurrently has no processes left to find. It reads the
// directory with getdents64 directly: os.File.ReadDir costs several extra
// syscalls, and this runs for every hierarchy in Procs and Stats.
func subdirs(dir string) ([]string, error) {
	// kernfs keeps a directory's link count at 2 plus its subdirectories, so a leaf cgroup, the
	// common case, costs one stat instead of open, getdents and close.
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err == nil && st.Nlink == 2 {
		return nil, nil
	}
	fd, err := openRetry(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, nil
		}
		return nil, err
	}
	defer unix.Close(fd)
	var out []string
	buf := make([]byte, 8192)
	for {
		n, err := unix.Getdents(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		// struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name.
		for off := 0; off+19 < n; {
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			if reclen == 0 || off+reclen > n {
				return nil, fmt.Errorf("getdents %s: malformed record", dir)
			}
			name := buf[off+19 : off+reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			// kernfs always fills d_type, so DT_UNKNOWN need not be handled.
			if buf[off+18] == unix.DT_DIR && string(name) != "." && string(name) != ".." {
				out = append(out, string(name))
			}
			off += reclen
		}
		// The kernel stops only when the next entry does not fit, and any
		// entry (name <= 255 bytes) fits in 280, so more room than that
		// means the directory is exhausted.
		if n == 0 || n+280 < len(buf) {
			return out, nil
		}
	}
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
