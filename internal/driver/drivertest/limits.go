package drivertest

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/guest/host"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// The cases below do what a sandbox's limits are for: each exhausts one resource and checks that
// the sandbox, and not the host, pays.

// memoryBomb asks for 1 GiB. The Python form asks a MiB at a time, so that an interpreter whose
// memory cannot grow past the limit (a MemoryError) has reached it, as a kernel's OOM kill has.
var memoryBomb = Script{
	Sh: `python3 -c 'b = bytearray(1024 * 1024 * 1024); print("allocated")'`,
	Py: `b = [bytearray(1 << 20) for _ in range(1024)]; print("allocated")`,
}

func testMemoryBomb(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{Resources: sandbox.Resources{MemoryMB: 128}})
	alive := Script{Sh: "echo alive", Py: "print('alive')"}
	res := h.Exec(t, sb, 30*time.Second, memoryBomb)
	if res.ExitCode != sandbox.ExitOOM || !res.OOMKilled || !hasEvent(res, sandbox.EventLimitMemory) {
		t.Fatalf("memory bomb: exit %d oomKilled %v events %+v stdout %q", res.ExitCode, res.OOMKilled, res.LimitEvents, res.Stdout)
	}
	// Peak memory is the command's peak resident set (rusage), which also counts resident pages of
	// files it mapped (python's libraries) that the memory cgroup charged to someone else: it can
	// pass the limit by those few MiB. Under gVisor the kill is airlock's own and asynchronous
	// (a cgroup threshold event, then init kills the largest process), so the bomb can get a few
	// tens of MiB further first (163 MiB seen once in many runs); the runtime's cgroup, with its
	// headroom, still caps the sandbox: a busy host, slow to run init, lets it get that far.
	within(t, "peak memory MiB", res.ResourceUsage.PeakMemoryMB, 100, float64(128+host.GuestHeadroom(128<<20)>>20))
	// The sandbox survives its bomb, uses its memory again, and a second bomb ends the same way.
	if h.opts.OwnKernel && ended(sb) {
		t.Logf("the bomb outran init's kill and met the host's limit, which ended the sandbox (Options.OwnKernel)")
		return
	}
	expect(t, h.Exec(t, sb, 10*time.Second, alive), 0, "alive")
	expect(t, h.Exec(t, sb, 30*time.Second, Script{
		Sh: `python3 -c 'b = bytearray(64 << 20); print("allocated")'`,
		Py: `b = bytearray(64 << 20); print("allocated")`,
	}), 0, "allocated")
	res = h.Exec(t, sb, 30*time.Second, memoryBomb)
	if res.ExitCode != sandbox.ExitOOM || !res.OOMKilled {
		t.Fatalf("second memory bomb: exit %d oomKilled %v events %+v", res.ExitCode, res.OOMKilled, res.LimitEvents)
	}
	if h.opts.OwnKernel && ended(sb) {
		t.Logf("the second bomb met the host's limit, which ended the sandbox (Options.OwnKernel)")
		return
	}
	expect(t, h.Exec(t, sb, 10*time.Second, alive), 0, "alive")
}

// ended reports whether sb has ended by itself (driver.Watcher), waiting a moment for the level
// to notice.
func ended(sb driver.Sandbox) bool {
	w, ok := sb.(driver.Watcher)
	if !ok {
		return false
	}
	select {
	case <-w.Done():
		return true
	case <-time.After(500 * time.Millisecond):
		return false
	}
}

func testForkBomb(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{Resources: sandbox.Resources{MaxProcesses: 32}})
	done := make(chan sandbox.ExecResult)
	bomb := h.Command(t, Script{
		// The classic, in sh: every function call forks two more, forever.
		Sh: `b() { b | b & }; b; sleep 10`,
		// Every process forks, forever; where the interpreter cannot fork at all, it says so.
		Py: `
import os, sys, time
try:
    pid = os.fork()
except (AttributeError, OSError) as e:
    print("cannot-fork", type(e).__name__)
    sys.exit(0)
if pid: print("forked", flush=True)
while True:
    try: os.fork()
    except OSError: time.sleep(0.01)`,
	})
	go func() {
		done <- ExecReq(t, sb, 4*time.Second, sandbox.ExecRequest{Command: bomb})
	}()
	time.Sleep(time.Second)
	hostForks(t) // the host is unaffected while the bomb goes off
	res := <-done
	switch {
	case h.Python() && strings.HasPrefix(res.Stdout, "cannot-fork"):
		t.Logf("the sandbox cannot fork (%s): nothing to contain", strings.TrimSpace(res.Stdout))
	case h.Python() && !strings.HasPrefix(res.Stdout, "forked"):
		t.Fatalf("fork bomb did not go off: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	case !hasEvent(res, sandbox.EventLimitPids):
		t.Fatalf("fork bomb: no %s event: %+v", sandbox.EventLimitPids, res.LimitEvents)
	}
	// A fork fails with EAGAIN at the limit.
	sb2 := h.New(t, sandbox.Spec{Resources: sandbox.Resources{MaxProcesses: 8}})
	res = h.Exec(t, sb2, 10*time.Second, Script{
		Sh: `python3 -c '` + forkToLimit + `'`,
		// Or, where the interpreter has no fork, the first one fails: ENOSYS.
		Py: forkToLimit + `
except AttributeError: print(n, "ENOSYS")`,
	})
	f := strings.Fields(res.Stdout)
	switch {
	case h.Python() && len(f) == 2 && f[0] == "0" && f[1] == "ENOSYS":
		t.Logf("the sandbox cannot fork: %q", res.Stdout)
	case len(f) != 2 || f[1] != "EAGAIN":
		t.Fatalf("fork at the limit: %q %q", res.Stdout, res.Stderr)
	}
	hostForks(t)
}

// forkToLimit forks until a fork fails, and prints how many succeeded and why.
const forkToLimit = `
import os, time, errno
n = 0
try:
    while n < 100:
        if os.fork() == 0: time.sleep(5); os._exit(0)
        n += 1
except OSError as e: print(n, errno.errorcode[e.errno])`

// spinTwoSeconds keeps a CPU busy for 2 s of wall time and prints the CPU time it got by its own
// clock, and the wall time, in seconds ("-1" for the CPU time where its clock is not a real one:
// WASI's process_time runs at no sensible rate).
const spinTwoSeconds = `
import time
cpu = time.process_time
try:
    if not time.get_clock_info("process_time").implementation.startswith("clock_gettime"):
        cpu = None
except OSError:
    cpu = None
c0, w0 = cpu() if cpu else 0, time.time()
end = w0 + 2
while time.time() < end: pass
print(cpu() - c0 if cpu else -1, time.time() - w0)`

// cpuQuota is the limit CPUQuota sets: far below what even a busy 2-core host gives one spinning
// process, so that the spinner always runs into it (a spinner that never gets its quota is never
// throttled, and there is nothing to see).
const cpuQuota = 0.1

func testCPUQuota(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{Resources: sandbox.Resources{CPU: cpuQuota}})
	res := h.Exec(t, sb, 30*time.Second, Script{Sh: `python3 -c '` + spinTwoSeconds + `'`, Py: spinTwoSeconds})
	var own, wall float64
	if res.ExitCode != 0 {
		t.Fatalf("spin: %+v", res)
	}
	if _, err := fmt.Sscan(res.Stdout, &own, &wall); err != nil {
		t.Fatalf("spin printed %q: %v", res.Stdout, err)
	}
	if !hasEvent(res, sandbox.EventLimitCPU) {
		t.Errorf("no %s event: %+v", sandbox.EventLimitCPU, res.LimitEvents)
	}
	// The quota: the spinner never got more than its tenth of a CPU, by airlock's figures and by
	// its own clocks.
	reported := float64(res.ResourceUsage.CPUTimeMs) / 1000
	within(t, "cpu time / wall time (airlock's figures)", reported/(float64(res.DurationMs)/1000), 0.01, 1.5*cpuQuota)
	if own < 0 {
		return
	}
	h.part(t, "own clock", func(t *testing.T) {
		within(t, "cpu time / wall time (the spinner's own clocks)", own/wall, 0.01, 1.5*cpuQuota)
		// The accounting: airlock reports what the spinner measured it got, with the
		// interpreter's start.
		within(t, "cpu time reported / cpu time the spinner measured", reported/own, 0.9, 2)
	})
}

// pyFill defines fill(path, mib), which writes mib MiB of zeros to path as dd does, and prints
// the name of the error that stopped it.
const pyFill = `
import errno, os
def fill(path, mib):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    chunk = bytes(1 << 20)
    try:
        for _ in range(mib):
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view):]
        print("wrote", mib, "MiB")
    except OSError as e:
        print(errno.errorcode[e.errno])
    finally:
        os.close(fd)
`

func testDiskFill(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{Resources: sandbox.Resources{DiskMB: 16}})
	full := "No space left on device"
	if h.Python() {
		full = "ENOSPC"
	}
	res := h.Exec(t, sb, 20*time.Second, Script{
		Sh: "dd if=/dev/zero of=/workspace/fill bs=1M count=64 2>&1; echo dd=$?",
		Py: pyFill + `fill("/workspace/fill", 64)`,
	})
	mustContain(t, "dd", res.Stdout, full)
	if !hasEvent(res, sandbox.EventLimitDisk) {
		t.Fatalf("no %s event: %+v", sandbox.EventLimitDisk, res.LimitEvents)
	}
	// One cap for the whole writable layer: /tmp is full too.
	res = h.Exec(t, sb, 10*time.Second, Script{
		Sh: "dd if=/dev/zero of=/tmp/more bs=1M count=4 2>&1",
		Py: pyFill + `fill("/tmp/more", 4)`,
	})
	mustContain(t, "dd into /tmp", res.Stdout, full)
	expect(t, h.Exec(t, sb, 10*time.Second, Script{
		Sh: "rm /workspace/fill && echo x > /tmp/ok && cat /tmp/ok",
		Py: `
import os
os.remove("/workspace/fill")
with open("/tmp/ok", "w") as f: f.write("x\n")
print(open("/tmp/ok").read(), end="")`,
	}), 0, "x")
}

func testOpenFiles(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{Resources: sandbox.Resources{MaxOpenFiles: 64}})
	res := h.Exec(t, sb, 10*time.Second, Script{
		Sh: `python3 -c '
import errno
fs = []
try:
    while True: fs.append(open("/dev/null"))
except OSError as e: print(len(fs) < 64, errno.errorcode[e.errno])'`,
		// A file of its own rather than /dev/null, which a level without devices lacks; and a
		// bound, should there be no limit at all.
		Py: `
import errno
open("/tmp/open-me", "w").close()
fs = []
try:
    while len(fs) < 100000: fs.append(open("/tmp/open-me"))
    print(False, "no-limit")
except OSError as e: print(len(fs) < 64, errno.errorcode[e.errno])`,
	})
	expect(t, res, 0, "True EMFILE")
	// Limits in range but above what a shell (and so a daemon started from it) often has as its
	// hard limit: the level raises what its sandbox inherits, or its kernel keeps its own. Only
	// where no child of this process can have n — its hard limit is lower and it may not raise
	// it, or n is over fs.nr_open — may the level refuse, and then clearly: unavailable, naming
	// the field. Never a failed setup.
	for _, n := range []int64{30000, int64(sandbox.Limits.MaxOpenFiles.Max)} {
		h.part(t, fmt.Sprint(n), func(t *testing.T) {
			sb, err := h.TryNew(t, sandbox.Spec{Resources: sandbox.Resources{MaxOpenFiles: n}})
			if err != nil {
				fe, ok := errors.AsType[*errdefs.FieldError](err)
				if !ok || fe.Field != "resources.maxOpenFiles" || !errors.Is(err, errdefs.ErrUnavailable) {
					t.Fatalf("create: %v; want it made, or unavailable naming resources.maxOpenFiles", err)
				}
				if ceiling := noFileCeiling(); uint64(n) <= ceiling {
					t.Fatalf("create: %v; but this host can give a child %d open files", err, ceiling)
				}
				t.Skipf("this host cannot give %d open files to a child of this process, and the level says so: %v", n, err)
			}
			// Descriptors, not file objects: 65536 of them stay small and quick.
			py := fmt.Sprintf(`
import errno, os
open("/tmp/open-me", "w").close()
n = 0
try:
    while n < %d: os.open("/tmp/open-me", os.O_RDONLY); n += 1
    print("no-limit", n)
except OSError as e: print(errno.errorcode[e.errno], %d - n < 16)`, n+100, n)
			res := h.Exec(t, sb, 60*time.Second, Script{Sh: "python3 -c '" + py + "'", Py: py})
			expect(t, res, 0, "EMFILE True")
		})
	}
}

func testTimeout(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{})
	start := time.Now()
	res := h.Exec(t, sb, time.Second, Script{
		// A grandchild in its own session (double fork) must die with the command.
		Sh: "setsid sh -c 'sleep 1000 & sleep 1000' & sleep 1000",
		// The same tree where the interpreter can fork; and the command itself spins, so that
		// nothing but the timeout stops it (no sleep to wake from).
		Py: `
import os, time
try:
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(1000)
        time.sleep(1000)
        os._exit(0)
except (AttributeError, OSError):
    pass
while True:
    pass`,
	})
	if !res.TimedOut || res.ExitCode != sandbox.ExitTimeout || !hasEvent(res, sandbox.EventLimitTimeout) {
		t.Fatalf("timeout: %+v", res)
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Fatalf("timeout took %v", took)
	}
	// Teardown kills by cgroup: the grandchild in its own session is gone with the sandbox
	// (the leak check after this case fails on any process left).
	if err := sb.Destroy(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.CheckLeaks(t)
}

func testOutputBounded(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	// 200 MB on stdout, 12 MB on stderr.
	res := h.Exec(t, sb, 60*time.Second, Script{
		Sh: "head -c 200000000 /dev/zero; head -c 12000000 /dev/zero >&2; echo done >&2",
		Py: `
import sys
out, err = sys.stdout.buffer, sys.stderr.buffer
mb = bytes(1000000)
for _ in range(200): out.write(mb)
out.flush()
for _ in range(12): err.write(mb)
err.write(b"done\n")`,
	})
	runtime.ReadMemStats(&after)
	if !res.Truncated || len(res.Stdout) != sandbox.DefaultOutputLimit || len(res.Stderr) != sandbox.DefaultOutputLimit || res.ExitCode != 0 {
		t.Fatalf("truncated %v, stdout %d, stderr %d, exit %d", res.Truncated, len(res.Stdout), len(res.Stderr), res.ExitCode)
	}
	if !hasEvent(res, sandbox.EventLimitOutput) {
		t.Fatalf("no %s event", sandbox.EventLimitOutput)
	}
	if grew := int64(after.TotalAlloc-before.TotalAlloc) >> 20; grew > 100 {
		t.Fatalf("capturing 212 MB allocated %d MiB", grew)
	}
}

// noFileCeiling is the most open files this process can give a child: its hard RLIMIT_NOFILE, or
// the host's fs.nr_open when it may raise that (CAP_SYS_RESOURCE).
func noFileCeiling() uint64 {
	var lim unix.Rlimit
	_ = unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) // it cannot fail for RLIMIT_NOFILE
	status, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(status), "\n") {
		if hex, ok := strings.CutPrefix(l, "CapEff:"); ok {
			caps, _ := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			if caps&(1<<unix.CAP_SYS_RESOURCE) == 0 {
				return lim.Max
			}
		}
	}
	nrOpen, _ := os.ReadFile("/proc/sys/fs/nr_open")
	n, err := strconv.ParseUint(strings.TrimSpace(string(nrOpen)), 10, 64)
	if err != nil {
		return lim.Max
	}
	return max(lim.Max, n)
}
