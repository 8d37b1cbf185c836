package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/api"
)

// memReading is one look at the daemon's and the host's memory, in KiB as /proc gives them.
type memReading struct {
	RSSKB      int64 `json:"daemon_vm_rss_kb"`
	AnonKB     int64 `json:"daemon_rss_anon_kb"`
	FileKB     int64 `json:"daemon_rss_file_kb"`
	ShmemKB    int64 `json:"daemon_rss_shmem_kb"`
	AvailKB    int64 `json:"host_mem_available_kb"`
	Children   int   `json:"daemon_descendants"`
	ChildRSSKB int64 `json:"daemon_descendants_rss_kb"`
	// ChildAnonKB is the descendants' RssAnon: their private memory, without the shared pages
	// of the binaries and libraries they map.
	ChildAnonKB int64 `json:"daemon_descendants_rss_anon_kb"`
}

// idleRow is what -idle sandboxes of one level cost while they sit idle.
type idleRow struct {
	Level string `json:"level"`
	Count int    `json:"count"`
	Lang  string `json:"lang"` // what each ran once
	// DaemonRSSMB is the growth of the daemon's VmRSS.
	DaemonRSSMB float64 `json:"daemon_rss_delta_mb"`
	// SandboxesMB is what the sandboxes hold outside the daemon's RSS: the larger of their
	// cgroups' memory (the metrics' MemoryBytes, memory.current) and the growth of the private
	// memory (RssAnon) of the processes below the daemon — on cgroup v1 the pages an init
	// touched before it joined its cgroup stay charged elsewhere, so memory.current can be the
	// smaller. wasm: the RssAnon is that of the jails' inits (and of any worker still there),
	// plus the stores' tmpfs pages (the metrics' DiskUsedBytes), which are in no process's RSS.
	SandboxesMB   float64 `json:"sandboxes_mb"`
	SandboxesWhat string  `json:"sandboxes_what"`
	// StoresMB is the sum of the sandboxes' DiskUsedBytes.
	StoresMB float64 `json:"stores_mb"`
	// MetricsMemoryMB is the sum of the sandboxes' MemoryBytes (the process level's cgroups; the
	// wasm level's linear memory of running modules: none while idle, and it would be in the
	// daemon's RSS).
	MetricsMemoryMB float64 `json:"metrics_memory_mb"`
	// PerSandboxMB is (DaemonRSSMB + SandboxesMB) / Count.
	PerSandboxMB float64 `json:"per_sandbox_mb"`
	// HostMB is the drop of the host's MemAvailable (others' work moves it too).
	HostMB           float64 `json:"host_available_drop_mb"`
	HostPerSandboxMB float64 `json:"host_per_sandbox_mb"`
	// ChildrenDelta is how many more processes descend from the daemon (a process sandbox's
	// init and what it left running); ChildRSSMB and ChildAnonMB are the growth of their VmRSS
	// (which counts the shared pages of the binaries each maps) and RssAnon.
	ChildrenDelta int        `json:"daemon_descendants_delta"`
	ChildRSSMB    float64    `json:"daemon_descendants_rss_delta_mb"`
	ChildAnonMB   float64    `json:"daemon_descendants_rss_anon_delta_mb"`
	Before        memReading `json:"before"`
	After         memReading `json:"after"`
	TargetMB      float64    `json:"target_mb,omitempty"`
	Met           *bool      `json:"met,omitempty"`
}

// idleMemory reads memory, makes o.idle wasm sandboxes that each run one command and sit idle,
// reads again, then does the same with as many process sandboxes. All of them stay until cleanup.
func (b *bench) idleMemory() ([]idleRow, error) {
	var rows []idleRow
	for _, level := range levelNames {
		r, err := b.idleLevel(level, b.avail[0]) // python when installed: print(1)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// idleLevel measures o.idle sandboxes of level that ran l's command once.
func (b *bench) idleLevel(level string, l lang) (idleRow, error) {
	time.Sleep(b.o.settle)
	before, err := b.read()
	if err != nil {
		return idleRow{}, err
	}
	ids := make([]string, 0, b.o.idle)
	for range b.o.idle {
		if interrupted.Load() {
			return idleRow{}, errors.New("interrupted")
		}
		id, _, err := b.create(level)
		if err != nil {
			return idleRow{}, err
		}
		ids = append(ids, id)
		if _, err := b.exec(id, l); err != nil {
			return idleRow{}, err
		}
	}
	settle := b.o.settle
	if level == api.LevelWasm {
		// Idle means without workers: they go after the daemon's worker idle time.
		settle = max(settle, b.o.workerIdle+3*time.Second)
	}
	time.Sleep(settle)
	after, err := b.read()
	if err != nil {
		return idleRow{}, err
	}
	var disk, mem int64
	for _, id := range ids {
		ctx, cancel := call()
		m, err := b.d.c.Metrics(ctx, id)
		cancel()
		if err != nil {
			return idleRow{}, fmt.Errorf("metrics of %s: %w", id, err)
		}
		disk += m.Current.DiskUsedBytes
		mem += m.Current.MemoryBytes
	}
	r := idleRow{Level: level, Count: len(ids), Lang: l.Name, Before: before, After: after,
		DaemonRSSMB:     kbToMB(after.RSSKB - before.RSSKB),
		MetricsMemoryMB: float64(mem) / (1 << 20),
		StoresMB:        float64(disk) / (1 << 20),
		HostMB:          kbToMB(before.AvailKB - after.AvailKB),
		ChildrenDelta:   after.Children - before.Children,
		ChildRSSMB:      kbToMB(after.ChildRSSKB - before.ChildRSSKB),
		ChildAnonMB:     kbToMB(after.ChildAnonKB - before.ChildAnonKB),
	}
	if level == api.LevelWasm {
		r.TargetMB = targetIdleMBEach
	}
	switch {
	case level == api.LevelWasm && r.ChildAnonMB+r.StoresMB > r.MetricsMemoryMB:
		r.SandboxesMB, r.SandboxesWhat = r.ChildAnonMB+r.StoresMB, fmt.Sprintf("their jails' RssAnon + stores' tmpfs; cgroups' memory.current %.1f", r.MetricsMemoryMB)
	case level == api.LevelWasm:
		r.SandboxesMB, r.SandboxesWhat = r.MetricsMemoryMB, fmt.Sprintf("cgroups' memory.current (stores included); jails' RssAnon + stores %.1f", r.ChildAnonMB+r.StoresMB)
	case r.ChildAnonMB > r.MetricsMemoryMB:
		r.SandboxesMB, r.SandboxesWhat = r.ChildAnonMB, fmt.Sprintf("their processes' RssAnon; cgroups' memory.current %.1f", r.MetricsMemoryMB)
	default:
		r.SandboxesMB, r.SandboxesWhat = r.MetricsMemoryMB, fmt.Sprintf("cgroups' memory.current; their processes' RssAnon %.1f", r.ChildAnonMB)
	}
	r.PerSandboxMB = (r.DaemonRSSMB + r.SandboxesMB) / float64(r.Count)
	r.HostPerSandboxMB = r.HostMB / float64(r.Count)
	if r.TargetMB > 0 {
		met := r.PerSandboxMB <= r.TargetMB
		r.Met = &met
	}
	return r, nil
}

func kbToMB(kb int64) float64 { return float64(kb) / 1024 }

// read reads the daemon's and the host's memory five times 200 ms apart and keeps the median
// of each figure, so one passing spike of either does not make the reading.
func (b *bench) read() (memReading, error) {
	var rs []memReading
	for i := range 5 {
		if i > 0 {
			time.Sleep(200 * time.Millisecond)
		}
		r, err := readMem(b.d.pid)
		if err != nil {
			return memReading{}, err
		}
		rs = append(rs, r)
	}
	med := func(f func(memReading) int64) int64 {
		xs := make([]int64, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
		}
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	return memReading{
		RSSKB:       med(func(r memReading) int64 { return r.RSSKB }),
		AnonKB:      med(func(r memReading) int64 { return r.AnonKB }),
		FileKB:      med(func(r memReading) int64 { return r.FileKB }),
		ShmemKB:     med(func(r memReading) int64 { return r.ShmemKB }),
		AvailKB:     med(func(r memReading) int64 { return r.AvailKB }),
		Children:    int(med(func(r memReading) int64 { return int64(r.Children) })),
		ChildRSSKB:  med(func(r memReading) int64 { return r.ChildRSSKB }),
		ChildAnonKB: med(func(r memReading) int64 { return r.ChildAnonKB }),
	}, nil
}

// readMem reads pid's RSS from /proc/PID/status, its descendants', and the host's MemAvailable.
func readMem(pid int) (memReading, error) {
	st, err := statusFields(pid, "VmRSS", "RssAnon", "RssFile", "RssShmem")
	if err != nil {
		return memReading{}, fmt.Errorf("the daemon's memory: %w", err)
	}
	mi, err := kbFields("/proc/meminfo", "MemAvailable")
	if err != nil {
		return memReading{}, err
	}
	r := memReading{RSSKB: st["VmRSS"], AnonKB: st["RssAnon"], FileKB: st["RssFile"], ShmemKB: st["RssShmem"], AvailKB: mi["MemAvailable"]}
	for _, c := range descendants(pid) {
		if f, err := statusFields(c, "VmRSS", "RssAnon"); err == nil {
			r.Children++
			r.ChildRSSKB += f["VmRSS"]
			r.ChildAnonKB += f["RssAnon"]
		}
	}
	return r, nil
}

func statusFields(pid int, names ...string) (map[string]int64, error) {
	return kbFields(fmt.Sprintf("/proc/%d/status", pid), names...)
}

// kbFields reads "Name:   123 kB" lines of a /proc file; every name must be there.
func kbFields(path string, names ...string) (map[string]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || !slices.Contains(names, k) {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, k, err)
		}
		out[k] = n
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return nil, fmt.Errorf("%s has no %s", path, n)
		}
	}
	return out, sc.Err()
}

// procs lists the host's processes with their parents and command lines.
func procs() map[int]procInfo {
	out := map[int]procInfo{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses, so cut at the last ')'.
		i := bytes.LastIndexByte(st, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(st[i+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		out[pid] = procInfo{ppid: ppid, argv: strings.Split(strings.TrimRight(string(cmd), "\x00"), "\x00")}
	}
	return out
}

type procInfo struct {
	ppid int
	argv []string
}

// descendants lists the processes below pid.
func descendants(pid int) []int {
	ps := procs()
	kids := map[int][]int{}
	for p, i := range ps {
		kids[i.ppid] = append(kids[i.ppid], p)
	}
	var out []int
	for q := kids[pid]; len(q) > 0; q = q[1:] {
		out = append(out, q[0])
		q = append(q, kids[q[0]]...)
	}
	return out
}

// dirSize is the bytes of the regular files under dir (0 if there is none).
func dirSize(dir string) int64 {
	var n int64
	// The walk cannot fail: its function skips what it cannot read and returns nil.
	_ = filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			if fi, err := e.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// copyDir copies the directories and regular files under src to dst.
func copyDir(src, dst string) error {
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("the first daemon's compilation cache: %w", err)
	}
	return filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		fi, err := e.Info()
		if err != nil {
			return err
		}
		switch {
		case e.IsDir():
			return os.MkdirAll(to, fi.Mode().Perm())
		case e.Type().IsRegular():
			return copyFile(p, to, fi.Mode().Perm())
		}
		return nil
	})
}

func copyFile(from, to string, mode os.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// hostFacts says what the figures were measured on.
type hostFacts struct {
	Kernel    string `json:"kernel"`
	NProc     int    `json:"nproc"`
	MemTotal  int64  `json:"mem_total_kb"`
	LoadStart string `json:"loadavg_start"`
	LoadEnd   string `json:"loadavg_end"`
}

func readHost() hostFacts {
	var u unix.Utsname
	_ = unix.Uname(&u) // it fails only for a bad address
	h := hostFacts{Kernel: unix.ByteSliceToString(u.Release[:]), NProc: runtime.NumCPU(), LoadStart: loadavg()}
	if mi, err := kbFields("/proc/meminfo", "MemTotal"); err == nil {
		h.MemTotal = mi["MemTotal"]
	}
	return h
}

// loadavg is the first three fields of /proc/loadavg.
func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
