package wasm_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/driver/wasm"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// status is /proc/PID/status as a map.
func status(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

// memoryDir is the sandbox's cgroup directory of the memory controller.
func memoryDir(t *testing.T, sb *wasm.Sandbox) (dir, limitFile string) {
	t.Helper()
	for _, p := range sb.Jail().Cgroup().Paths() {
		if _, err := os.Stat(filepath.Join(p, "memory.limit_in_bytes")); err == nil {
			return p, "memory.limit_in_bytes"
		}
		if _, err := os.Stat(filepath.Join(p, "memory.max")); err == nil {
			return p, "memory.max"
		}
	}
	t.Fatalf("no memory cgroup among %v", sb.Jail().Cgroup().Paths())
	return "", ""
}

// TestWorkerJailed: the process that runs the guests is not the daemon, nor root: an
// unprivileged host uid and gid, no capabilities, seccomp filtering, no_new_privs, in the
// sandbox's cgroup, whose memory limit is the sandbox's memoryMb.
func TestWorkerJailed(t *testing.T) {
	d, _ := newDriver(t)
	sb := newSandbox(t, d, sandbox.Spec{Resources: sandbox.Resources{MemoryMB: 256}}).(*wasm.Sandbox)
	// What the worker holds as it loads the interpreters (docs/levels.md quotes it).
	t.Logf("worker RssAnon: started %s", status(t, sb.WorkerPid())["RssAnon"])
	for _, argv := range [][]string{{"python3", "-c", "print(1)"}, {"node", "-e", "console.log(1)"}} {
		if res := run(t, sb, 30*time.Second, argv...); res.Stdout != "1\n" {
			t.Fatalf("%v: %+v", argv, res)
		}
		t.Logf("worker RssAnon: after %s %s", argv[0], status(t, sb.WorkerPid())["RssAnon"])
	}
	pid := sb.WorkerPid()
	if pid == 0 || pid == os.Getpid() {
		t.Fatalf("worker pid %d (this process %d)", pid, os.Getpid())
	}
	st := status(t, pid)
	for _, k := range []string{"Uid", "Gid"} {
		for _, id := range strings.Fields(st[k]) {
			if id == "0" {
				t.Errorf("%s: %s, host root", k, st[k])
			}
		}
	}
	for k, want := range map[string]string{"CapEff": "0000000000000000", "CapPrm": "0000000000000000", "CapBnd": "0000000000000000", "Seccomp": "2", "NoNewPrivs": "1"} {
		if st[k] != want {
			t.Errorf("%s: %q, want %q", k, st[k], want)
		}
	}
	t.Logf("worker %d: Uid %s, RssAnon %s, VmRSS %s, threads %s", pid, st["Uid"], st["RssAnon"], st["VmRSS"], st["Threads"])
	dir, limitFile := memoryDir(t, sb)
	procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Fields(string(procs)), strconv.Itoa(pid)) {
		t.Errorf("worker %d is not in the sandbox's cgroup %s (%q)", pid, dir, procs)
	}
	limit, err := os.ReadFile(filepath.Join(dir, limitFile))
	if err != nil || strings.TrimSpace(string(limit)) != strconv.Itoa(256<<20) {
		t.Errorf("%s: %q %v, want memoryMb 256", limitFile, limit, err)
	}
}

// TestHostileReads: a guest reaches none of the host's secrets — /etc/shadow, the daemon's data
// directory, the daemon's environment — by any path it has: absolute, "..", its preopens,
// symlinks planted in its store (absolute and relative, to files and to "/"), in Python and
// in JavaScript.
func TestHostileReads(t *testing.T) {
	d, state := newDriver(t)
	secret := filepath.Join(state, "airlock.db")
	if err := os.WriteFile(secret, []byte("daemon secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AIRLOCK_TEST_SECRET", "daemon environment secret")
	sb := newSandbox(t, d, sandbox.Spec{})
	targets := []string{"/etc/shadow", secret, "/proc/self/environ", "/proc/1/environ", fmt.Sprintf("/proc/%d/environ", os.Getpid())}
	var paths []string
	for i, p := range targets {
		paths = append(paths, p, "/workspace/../../.."+p, "../../../../../.."+p, "/usr/local/lib/../../.."+p, "/usr/local/lib/python3/dist-packages/../../../../.."+p)
		plant(t, sb, p, fmt.Sprintf("/workspace/abs%d", i))
		plant(t, sb, "../../../../../.."+p, fmt.Sprintf("/tmp/rel%d", i))
		paths = append(paths, fmt.Sprintf("/workspace/abs%d", i), fmt.Sprintf("/tmp/rel%d", i))
	}
	plant(t, sb, "/", "/workspace/hostroot")
	plant(t, sb, "/proc/1/root", "/workspace/initroot")
	for _, p := range []string{"etc/shadow", "proc/1/environ", strings.TrimPrefix(secret, "/")} {
		paths = append(paths, "/workspace/hostroot/"+p, "/workspace/initroot/"+p)
	}
	list := "['" + strings.Join(paths, "', '") + "']"
	py := `
import sys
for p in ` + list + `:
    try:
        b = open(p, 'rb').read()
        print("READ", p, b[:40])
    except Exception as e:
        print("refused", p, type(e).__name__)
`
	js := `
const fs = require('fs');
for (const p of ` + strings.ReplaceAll(list, "'", "\"") + `) {
  try { const b = fs.readFileSync(p); console.log("READ", p, b.toString().slice(0, 40)); }
  catch (e) { console.log("refused", p, e.code); }
}
`
	for _, argv := range [][]string{{"python3", "-c", py}, {"node", "-e", js}} {
		res := run(t, sb, 60*time.Second, argv...)
		if res.ExitCode != 0 || strings.Count(res.Stdout, "refused") != len(paths) {
			t.Errorf("%s: exit %d, %d of %d refused:\n%s%s", argv[0], res.ExitCode, strings.Count(res.Stdout, "refused"), len(paths), res.Stdout, tail(res.Stderr))
		}
		for _, s := range []string{"daemon secret", "daemon environment secret", "root:"} {
			if strings.Contains(res.Stdout, s) {
				t.Errorf("%s: the guest read %q", argv[0], s)
			}
		}
	}
}

// shmemKB is the host's shared memory (tmpfs pages) from /proc/meminfo.
func shmemKB(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "Shmem:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	t.Fatal("no Shmem in /proc/meminfo")
	return 0
}

// TestStoreCharged: the store is the sandbox's, not the daemon's. With memoryMb 128 and diskMb
// 2048, writing 1.5 GB from the guest fails at the memory limit — a write refused (EIO), not the
// worker killed — the sandbox's own memory having filled up to that limit; in Python and in
// JavaScript, and the guest can delete its file and go on.
func TestStoreCharged(t *testing.T) {
	d, _ := newDriver(t)
	sb := newSandbox(t, d, sandbox.Spec{Resources: sandbox.Resources{MemoryMB: 128, DiskMB: 2048}}).(*wasm.Sandbox)
	for _, c := range []struct {
		name string
		fill []string
		rm   []string
	}{
		{"python", []string{"python3", "-c", `
chunk = b"x" * (1 << 20)
with open("/tmp/big", "wb") as f:
    for i in range(1536):
        f.write(chunk)
print("wrote 1.5 GB")
`}, []string{"python3", "-c", "import os; os.remove('/tmp/big'); print(1)"}},
		{"node", []string{"node", "-e", `
const fs = require('fs'); const fd = fs.openSync('/tmp/big', 'w'); const chunk = Buffer.alloc(1 << 20, 120);
for (let i = 0; i < 1536; i++) fs.writeSync(fd, chunk);
console.log('wrote 1.5 GB');
`}, []string{"node", "-e", "require('fs').unlinkSync('/tmp/big'); console.log(1)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := shmemKB(t)
			res := run(t, sb, 120*time.Second, c.fill...)
			grown := shmemKB(t) - before
			t.Logf("exit %d oomKilled %v events %+v; host Shmem grew %d MiB; stderr %q", res.ExitCode, res.OOMKilled, res.LimitEvents, grown>>10, tail(res.Stderr))
			if res.ExitCode == 0 || strings.Contains(res.Stdout, "wrote") {
				t.Errorf("writing 1.5 GB into a 128 MiB sandbox worked: %+v", res)
			}
			if res.OOMKilled || !hasEvent(res, sandbox.EventLimitMemory) {
				t.Errorf("want a refused write and limit.memory, not a kill: oomKilled %v, events %+v", res.OOMKilled, res.LimitEvents)
			}
			u, err := sb.Usage(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("usage %+v", u)
			if u.MemoryBytes > 128<<20 || u.MemoryPeakBytes > 128<<20 || u.DiskUsedBytes > 128<<20 {
				t.Errorf("usage past the limit: %+v", u)
			}
			// The store's pages are the sandbox's: its own cgroup filled up to its limit. The
			// host's shared memory is the whole host's (a VM's guest RAM is shared memory too, and
			// other tests' VMs boot beside this one), so it is told, not held against the limit.
			if u.MemoryPeakBytes < 96<<20 {
				t.Errorf("the sandbox's memory peaked at %d MiB: the store's pages are not charged to it", u.MemoryPeakBytes>>20)
			}
			if res := run(t, sb, 30*time.Second, c.rm...); res.Stdout != "1\n" {
				t.Errorf("after the fill: %+v", res)
			}
		})
	}
}

// openFds counts this process's open descriptors.
func openFds(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestWorkerIdle: a worker goes once idle, and the next exec starts another on the same store;
// the daemon keeps no descriptor of the workers that went.
func TestWorkerIdle(t *testing.T) {
	d, _ := newDriverWith(t, func(c *wasm.Config) { c.WorkerIdle = 200 * time.Millisecond })
	sb := newSandbox(t, d, sandbox.Spec{}).(*wasm.Sandbox)
	run(t, sb, 30*time.Second, "node", "-e", "require('fs').writeFileSync('kept', 'yes')")
	first := sb.WorkerPid()
	if first == 0 {
		t.Fatal("no worker after an exec")
	}
	gone := func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", first))
		return sb.WorkerPid() == 0 && err != nil
	}
	deadline := time.Now().Add(5 * time.Second)
	for !gone() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !gone() {
		t.Fatalf("worker %d still runs after its idle time (WorkerPid %d)", first, sb.WorkerPid())
	}
	time.Sleep(100 * time.Millisecond)
	fds := openFds(t) // with no worker
	if res := run(t, sb, 30*time.Second, "python3", "-c", "print(open('kept').read())"); res.Stdout != "yes\n" {
		t.Fatalf("after idle: %+v", res)
	}
	// The second worker goes too, and with it every descriptor the daemon had for it.
	for deadline := time.Now().Add(5 * time.Second); sb.WorkerPid() != 0 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if now := openFds(t); now > fds {
		t.Errorf("%d descriptors open after a worker came and went, %d before", now, fds)
	}
	var _ driver.Watcher = sb
}
