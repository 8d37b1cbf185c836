// Package procfs reads what airlock needs to know about processes from /proc: which process a
// pid names for good (pid and start time), whether it has exited, which processes run with a uid
// of a range, a network namespace's traffic and the largest process. It is a leaf: the levels,
// the host side of airlock's init, init itself (reading its sandbox's /proc) and the host-wide
// uid allocator share it.
package procfs

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// StartTime reads a process's start time in clock ticks since boot: with its pid, it names one
// process for good (a pid alone may be reused).
func StartTime(pid int) (uint64, error) {
	f, err := stat(pid)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(f[19], 10, 64) // field 22 overall
}

// Alive reports whether process pid still runs and is the one that started at start (a
// StartTime).
func Alive(pid int, start uint64) bool {
	now, err := StartTime(pid)
	return err == nil && now == start
}

// Zombie reports whether process pid has exited and waits to be reaped (or is gone).
func Zombie(pid int) bool {
	f, err := stat(pid)
	return err != nil || f[0] == "Z"
}

// stat returns the fields of /proc/PID/stat after the command name, from the state (field 3
// overall) on.
func stat(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	// The command name (field 2) may hold spaces and parentheses: count from the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil, errors.New("malformed /proc stat")
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 20 {
		return nil, errors.New("malformed /proc stat")
	}
	return fields, nil
}

// OwnerLine names this process for good, for an owner file: its pid and its start time (a pid
// alone may be reused).
func OwnerLine() ([]byte, error) {
	st, err := StartTime(os.Getpid())
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, "%d %d\n", os.Getpid(), st), nil
}

// OwnerAlive reports whether the process that dir's owner file (an OwnerLine) names still runs.
func OwnerAlive(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "owner"))
	if err != nil {
		return false
	}
	var pid int
	var st uint64
	if _, err := fmt.Sscan(string(b), &pid, &st); err != nil {
		return false
	}
	return Alive(pid, st)
}

// PidsInUIDRange returns the host pids with a uid in [lo, hi): real, effective, saved or
// filesystem. Zombies are included (see Zombie).
func PidsInUIDRange(lo, hi uint64) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if uidIn(pid, lo, hi) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// uidIn reports whether any uid of process pid lies in [lo, hi).
func uidIn(pid int, lo, hi uint64) bool {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "Uid:")
		if !ok {
			continue
		}
		for _, field := range strings.Fields(rest) {
			if uid, err := strconv.ParseUint(field, 10, 32); err == nil && uid >= lo && uid < hi {
				return true
			}
		}
		return false
	}
	return false
}
