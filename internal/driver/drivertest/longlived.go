package drivertest

import (
	"context"
	"io"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// The cases below are what the daemon needs of a long-lived sandbox: many execs into one sandbox,
// pause, metrics and files (streams and terminals are in streams.go). Optional abilities are found
// by type assertion; a level without one skips, naming the interface.

func testStatePersists(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{})
	// A background process whose output goes elsewhere does not hold the exec.
	start := time.Now()
	res := h.Exec(t, sb, 10*time.Second, Script{
		Sh: `echo kept > /workspace/state; cd /tmp
sleep 30 >/dev/null 2>&1 & echo $! > /tmp/bg.pid
sh -c 'sleep 31 >/dev/null 2>&1 &'
pwd`,
		// Where the interpreter can fork: a child, and an orphan whose parent exits at once.
		Py: `
import os, time
def background(secs):
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.devnull, os.O_RDWR)
        for i in (0, 1, 2): os.dup2(fd, i)
        time.sleep(secs)
        os._exit(0)
    return pid
with open("/workspace/state", "w") as f: f.write("kept\n")
os.chdir("/tmp")
if hasattr(os, "fork"):
    with open("/tmp/bg.pid", "w") as f: f.write(str(background(30)))
    parent = os.fork()
    if parent == 0:
        with open("/tmp/orphan.pid", "w") as f: f.write(str(background(31)))
        os._exit(0)
    os.waitpid(parent, 0)
else:
    print("no-processes")
print(os.getcwd())`,
	})
	processes := !strings.HasPrefix(res.Stdout, "no-processes\n")
	if !processes {
		t.Logf("the sandbox cannot fork: no background processes to keep")
		res.Stdout = strings.TrimPrefix(res.Stdout, "no-processes\n")
	}
	expect(t, res, 0, "/tmp")
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("exec took %v: it waited for background processes", took)
	}
	// Files and processes persist; the working directory does not (each exec starts in the
	// sandbox's workdir).
	res = h.Exec(t, sb, 10*time.Second, Script{
		Sh: `cat /workspace/state
kill -0 "$(cat /tmp/bg.pid)" && echo alive
for p in /proc/[0-9]*; do [ "$(tr '\0' ' ' < $p/cmdline 2>/dev/null)" = "sleep 31 " ] && echo orphan-alive; done
pwd`,
		Py: `
import os
print(open("/workspace/state").read(), end="")
for what, pidfile in (("alive", "/tmp/bg.pid"), ("orphan-alive", "/tmp/orphan.pid")):
    if os.path.exists(pidfile):
        os.kill(int(open(pidfile).read()), 0)
        print(what)
print(os.getcwd())`,
	})
	if processes {
		expect(t, res, 0, "kept\nalive\norphan-alive\n/workspace")
	} else {
		expect(t, res, 0, "kept\n/workspace")
	}
	// A background process that keeps stdout open: the exec returns after a short grace with
	// what was written, instead of waiting 30 s.
	start = time.Now()
	res = h.Exec(t, sb, 60*time.Second, Script{
		Sh: "sleep 30 & echo started",
		Py: `
import os, time
if hasattr(os, "fork") and os.fork() == 0:
    time.sleep(30)
    os._exit(0)
print("started")`,
	})
	expect(t, res, 0, "started")
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("exec with a background process holding stdout took %v", took)
	}
}

func testPauseResume(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{})
	p, ok := sb.(driver.Pauser)
	if !ok {
		t.Skipf("SKIPPED: level %s does not implement driver.Pauser", h.D.Name())
	}
	pid := strings.TrimSpace(h.Exec(t, sb, 10*time.Second, Script{
		Sh: "sh -c 'while :; do :; done' >/dev/null 2>&1 & echo $!",
		Py: pyBackground("while True: pass") + "print(background())",
	}).Stdout)
	// CPU ticks (1/100 s) the busy loop has used, read inside the sandbox.
	ticks := func() int {
		t.Helper()
		res := h.Exec(t, sb, 10*time.Second, Script{
			Sh: "cut -d' ' -f14,15 /proc/" + pid + "/stat",
			// The fields after the command's name, which is in parentheses: utime is the 14th.
			Py: `f = open("/proc/` + pid + `/stat").read().rsplit(")", 1)[1].split(); print(f[11], f[12])`,
		})
		f := strings.Fields(res.Stdout)
		if len(f) != 2 {
			t.Fatalf("stat of the busy loop: %q %q", res.Stdout, res.Stderr)
		}
		u, _ := strconv.Atoi(f[0])
		s, _ := strconv.Atoi(f[1])
		return u + s
	}
	time.Sleep(200 * time.Millisecond)
	a := ticks()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := p.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if st, ok := sb.(driver.Statser); ok {
		u1, err := st.Usage(ctx)
		time.Sleep(500 * time.Millisecond)
		u2, err2 := st.Usage(ctx)
		if err != nil || err2 != nil || u2.CPUTime-u1.CPUTime > 10*time.Millisecond {
			t.Errorf("paused sandbox used %v of CPU in 500 ms (%v, %v)", u2.CPUTime-u1.CPUTime, err, err2)
		}
		time.Sleep(500 * time.Millisecond)
	} else {
		time.Sleep(time.Second)
	}
	if err := p.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	// About 1 s passed between a and b, nearly all of it paused.
	b := ticks()
	if b-a > 50 {
		t.Fatalf("the busy loop ran %d ticks across a 1 s pause", b-a)
	}
	time.Sleep(500 * time.Millisecond)
	if c := ticks(); c-b < 10 {
		t.Fatalf("the busy loop ran %d ticks in 500 ms after Resume", c-b)
	}

	// A paused sandbox does not hold an exec past its deadline, whether it was running when the
	// sandbox was paused or started after.
	sb2 := h.New(t, sandbox.Spec{})
	p2 := sb2.(driver.Pauser)
	stream := newStream()
	ch := execAsync(sb2, time.Second, sandbox.ExecRequest{Stdout: stream, Command: h.Command(t, Script{
		Sh: "echo ready; sleep 10",
		Py: `import time; print("ready", flush=True); time.sleep(10)`,
	})})
	stream.waitFor(t, "ready", 5*time.Second)
	if err := p2.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	actx, acancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer acancel()
	nothing := []string{"true"}
	if h.Python() {
		nothing = []string{"python3", "-c", "pass"}
	}
	res, err := sb2.Exec(actx, sandbox.ExecRequest{ID: sandbox.NewID("exec_"), Command: nothing, Capture: true})
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("exec into a paused sandbox took %v", took)
	}
	t.Logf("exec into a paused sandbox: %v, exit %d, timedOut %v", err, res.ExitCode, res.TimedOut)
	select {
	case r := <-ch:
		if r.err == nil && !r.res.TimedOut {
			t.Errorf("exec running across the pause: %+v", r.res)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("an exec running when the sandbox was paused outlived its deadline by 7 s")
	}

	// A paused sandbox can be destroyed (the leak check after this case sees the rest).
	sb3 := h.New(t, sandbox.Spec{})
	h.Exec(t, sb3, 10*time.Second, Script{
		Sh: "sleep 30 >/dev/null 2>&1 &",
		Py: pyBackground("import time; time.sleep(30)") + "background()",
	})
	if err := sb3.(driver.Pauser).Pause(ctx); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := sb3.Destroy(ctx); err != nil {
		t.Fatalf("destroy a paused sandbox: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("destroying a paused sandbox took %v", took)
	}
}

// useMemoryAndCPU holds 20 MiB of anonymous memory and spins for 0.2 s of its own CPU time (a
// spin timed by the wall clock gets less on a busy host).
const useMemoryAndCPU = `
import time
x = bytearray(20 << 20)
end = time.process_time() + 0.2
while time.process_time() < end: pass
print("ok")`

func testUsage(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{Resources: sandbox.Resources{MemoryMB: 256, MaxProcesses: 32, DiskMB: 64}})
	st, ok := sb.(driver.Statser)
	if !ok {
		t.Skipf("SKIPPED: level %s does not implement driver.Statser", h.D.Name())
	}
	u0, err := st.Usage(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// 10 MiB on the writable layer, 20 MiB of anonymous memory, 0.2 s of CPU.
	expect(t, h.Exec(t, sb, 30*time.Second, Script{
		Sh: `head -c 10485760 /dev/zero > /workspace/blob && python3 -c '` + useMemoryAndCPU + `'`,
		// It spins for 0.2 s of its own CPU time where the interpreter can tell it (a busy host
		// takes the CPU away from a spin timed by the clock).
		Py: `
import time
with open("/workspace/blob", "wb") as f: f.write(bytes(10485760))
x = bytearray(20 << 20)
# Only a real CPU clock: WASI's process_time (times()) runs at no sensible rate.
clock = time.time
try:
    if time.get_clock_info("process_time").implementation.startswith("clock_gettime"):
        clock = time.process_time
except OSError:
    pass
end = clock() + 0.2
while clock() < end: pass
print("ok")`,
	}), 0, "ok")
	u, err := st.Usage(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("usage before %+v\nafter %+v", u0, u)
	const mib = 1 << 20
	switch {
	case u.MemoryLimitBytes != 256*mib:
		t.Errorf("memory limit %d, want 256 MiB", u.MemoryLimitBytes)
	case u.MemoryBytes < 10*mib || u.MemoryBytes > u.MemoryLimitBytes:
		t.Errorf("memory %d, want the 10 MiB file on the layer at least, and at most the limit", u.MemoryBytes)
	case u.MemoryPeakBytes < u.MemoryBytes || u.MemoryPeakBytes < 30*mib:
		t.Errorf("memory peak %d, want at least current %d and the 30 MiB used", u.MemoryPeakBytes, u.MemoryBytes)
	case u.Pids < minPids(h) || u.PidsLimit < 32 || u.Pids > u.PidsLimit:
		t.Errorf("pids %d of %d, want %d.. of at least 32", u.Pids, u.PidsLimit, minPids(h))
	case u.CPUTime < 150*time.Millisecond || u.CPUTime < u0.CPUTime:
		t.Errorf("cpu time %v (before %v), want the 0.2 s spin in it", u.CPUTime, u0.CPUTime)
	case u.DiskLimitBytes < 60*mib || u.DiskLimitBytes > 64*mib:
		t.Errorf("disk limit %d, want 64 MiB", u.DiskLimitBytes)
	case u.DiskUsedBytes-u0.DiskUsedBytes < 10*mib || u.DiskUsedBytes > u.DiskLimitBytes:
		t.Errorf("disk used %d (before %d), want 10 MiB more", u.DiskUsedBytes, u0.DiskUsedBytes)
	case u.NetTxBytes < 0 || u.NetRxBytes < 0:
		t.Errorf("network counters %d/%d", u.NetTxBytes, u.NetRxBytes)
	}
}

func testFileRoot(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{})
	fr, ok := sb.(driver.FileRooter)
	if !ok {
		t.Skipf("SKIPPED: level %s does not implement driver.FileRooter", h.D.Name())
	}
	expect(t, h.Exec(t, sb, 10*time.Second, Script{
		Sh: "echo from-sandbox > /workspace/in && ln -s / /workspace/up",
		Py: `
import os
with open("/workspace/in", "w") as f: f.write("from-sandbox\n")
os.symlink("/", "/workspace/up")`,
	}), 0, "")
	root, uid, gid, err := fr.FileRoot()
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	open := func(p string, flags int) *readWriter {
		t.Helper()
		how := &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: unix.RESOLVE_IN_ROOT}
		if flags&unix.O_CREAT != 0 {
			how.Mode = 0o644
		}
		fd, err := unix.Openat2(int(root.Fd()), p, how)
		if err != nil {
			t.Fatalf("open %s in the sandbox's root: %v", p, err)
		}
		return &readWriter{fd}
	}
	// The host sees the sandbox's files, and "/" means the sandbox's root.
	for _, p := range []string{"workspace/in", "/workspace/up/workspace/in"} {
		f := open(p, unix.O_RDONLY)
		b, _ := io.ReadAll(f)
		f.Close()
		if string(b) != "from-sandbox\n" {
			t.Fatalf("%s read from the host: %q", p, b)
		}
	}
	// The host can rewrite a file the sandbox made.
	f := open("workspace/in", unix.O_WRONLY|unix.O_APPEND)
	_, err = f.Write([]byte("from-host\n"))
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	// A file the host creates with the ids FileRoot named belongs to the sandbox's user. It
	// must be created with them as its filesystem ids: the writable layer may belong to the
	// sandbox's user namespace, where the kernel refuses to create an inode owned by an id it
	// cannot map (host root's), with EOVERFLOW.
	err = asIDs(uid, gid, func() error {
		f := open("workspace/f", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL)
		defer f.Close()
		if _, err := f.Write([]byte("from-host\n")); err != nil {
			return err
		}
		return unix.Fchown(f.fd, uid, gid)
	})
	if err != nil {
		t.Fatal(err)
	}
	if h.Python() {
		// The file belongs to whoever owns what the sandbox's user made (by ids: a level without
		// a shell may have no user names, nor even uids).
		expect(t, h.Exec(t, sb, 10*time.Second, Script{Py: `
import os
st, mine = os.stat("/workspace/f"), os.stat("/workspace/in")
print("owner", "mine" if (st.st_uid, st.st_gid) == (mine.st_uid, mine.st_gid) else "%d:%d" % (st.st_uid, st.st_gid))
with open("/workspace/f", "a") as f: f.write("more\n")
print(open("/workspace/in").read() + open("/workspace/f").read(), end="")`}), 0,
			"owner mine\nfrom-sandbox\nfrom-host\nfrom-host\nmore")
		return
	}
	expect(t, Exec(t, sb, 10*time.Second, "stat -c %U:%G /workspace/f && echo more >> /workspace/f && cat /workspace/in /workspace/f"), 0,
		"agent:agent\nfrom-sandbox\nfrom-host\nfrom-host\nmore")
}

// asIDs runs f on an OS thread of its own whose filesystem uid and gid are uid and gid (which also
// drops its filesystem capabilities: f acts as that user). The thread goes away afterwards unless
// it could be given back its ids.
func asIDs(uid, gid int, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setfsgid(gid); err != nil {
			errc <- err
			return
		}
		if err := unix.Setfsuid(uid); err != nil {
			errc <- err
			return
		}
		err := f()
		// setfs[ug]id report no failure: the ids are read back below.
		_ = unix.Setfsuid(0)
		_ = unix.Setfsgid(0)
		if u, _ := unix.SetfsuidRetUid(-1); u == 0 {
			if g, _ := unix.SetfsgidRetGid(-1); g == 0 {
				runtime.UnlockOSThread()
			}
		}
		errc <- err
	}()
	return <-errc
}

func testPerExecUsage(t *testing.T, h *Harness) {
	// Two vCPUs, so that the busy loop does not throttle the execs measured beside it.
	sb := h.New(t, sandbox.Spec{Resources: sandbox.Resources{CPU: 2}})
	if h.Python() {
		testPerExecUsagePython(t, h, sb)
		return
	}
	Exec(t, sb, 10*time.Second, "sh -c 'while :; do :; done' >/dev/null 2>&1 &")
	time.Sleep(200 * time.Millisecond)
	// The loop would add about what the command's wall time gives it (up to 500 ms beside sleep
	// 0.5); 150 ms leaves room for what a level counts of its own on a loaded host (gVisor's
	// accounting includes the time the host throttled it: 60 ms was seen for sleep 0.5).
	for _, cmd := range []string{"true", "sleep 0.5"} {
		res := Exec(t, sb, 10*time.Second, cmd)
		if res.ExitCode != 0 || res.ResourceUsage.CPUTimeMs > 150 {
			t.Fatalf("%s beside a background busy loop: exit %d, cpuTimeMs %d (the loop's CPU counted)", cmd, res.ExitCode, res.ResourceUsage.CPUTimeMs)
		}
	}
	// The command's own use is counted, with what it waited for.
	res := Exec(t, sb, 10*time.Second, `sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done'`)
	if res.ResourceUsage.CPUTimeMs < 50 {
		t.Fatalf("a child's busy loop counted %d ms", res.ResourceUsage.CPUTimeMs)
	}
}

// testPerExecUsagePython is PerExecUsage in Python. An interpreter's start costs CPU of its own
// (tens of ms, more for one compiled to WebAssembly), so an exec beside the busy loop may use 50
// ms more than the same exec alone, where the shell form allows 50 ms in all; the 0.5 s sleep
// beside the loop would count some 500 ms of it.
func testPerExecUsagePython(t *testing.T, h *Harness, sb driver.Sandbox) {
	cmds := []string{"pass", "import time; time.sleep(0.5)"}
	alone := make([]int64, len(cmds))
	for i, cmd := range cmds {
		res := h.Exec(t, sb, 10*time.Second, Script{Py: cmd})
		if res.ExitCode != 0 {
			t.Fatalf("%s: exit %d %q", cmd, res.ExitCode, res.Stderr)
		}
		alone[i] = res.ResourceUsage.CPUTimeMs
	}
	res := h.Exec(t, sb, 10*time.Second, Script{Py: pyBackground("while True: pass") + `
if hasattr(os, "fork"): background()
else: print("no-processes")`})
	if res.ExitCode != 0 {
		t.Fatalf("start a background busy loop: exit %d %q", res.ExitCode, res.Stderr)
	}
	if strings.Contains(res.Stdout, "no-processes") {
		t.Logf("the sandbox cannot fork: no background process to leave out")
	} else {
		time.Sleep(200 * time.Millisecond)
		for i, cmd := range cmds {
			res := h.Exec(t, sb, 10*time.Second, Script{Py: cmd})
			if res.ExitCode != 0 || res.ResourceUsage.CPUTimeMs > alone[i]+50 {
				t.Fatalf("%s beside a background busy loop: exit %d, cpuTimeMs %d, %d alone (the loop's CPU counted)",
					cmd, res.ExitCode, res.ResourceUsage.CPUTimeMs, alone[i])
			}
		}
	}
	// The command's own use is counted, with what it waited for: a child's, where it can fork.
	res = h.Exec(t, sb, 10*time.Second, Script{Py: `
import os, time
def spin():
    end = time.time() + 0.3
    while time.time() < end: pass
if hasattr(os, "fork"):
    pid = os.fork()
    if pid == 0:
        spin()
        os._exit(0)
    os.waitpid(pid, 0)
else:
    spin()`})
	if res.ExitCode != 0 || res.ResourceUsage.CPUTimeMs < 50 {
		t.Fatalf("a child's busy loop counted %d ms (exit %d)", res.ResourceUsage.CPUTimeMs, res.ExitCode)
	}
}

// pyBackground defines background(), which starts a process running the Python statement
// body in a session of its own, its standard streams on /dev/null (as sh's "cmd >/dev/null
// 2>&1 &" does), and returns its pid.
func pyBackground(body string) string {
	return `
import os
def background():
    pid = os.fork()
    if pid == 0:
        os.setsid()
        fd = os.open(os.devnull, os.O_RDWR)
        for i in (0, 1, 2): os.dup2(fd, i)
        ` + body + `
        os._exit(0)
    return pid
`
}

// readWriter is a raw descriptor as an io.Reader and io.Writer.
type readWriter struct{ fd int }

func (f *readWriter) Read(p []byte) (int, error) {
	n, err := unix.Read(f.fd, p)
	if n == 0 && err == nil {
		return 0, io.EOF
	}
	return max(n, 0), err
}

func (f *readWriter) Write(p []byte) (int, error) { return unix.Write(f.fd, p) }
func (f *readWriter) Close() error                { return unix.Close(f.fd) }

// minPids is how many processes an idle sandbox has: its init, on a level with processes; none on
// one whose commands are its only processes (the Python dialect's levels: wasm).
func minPids(h *Harness) int64 {
	if h.Python() {
		return 0
	}
	return 1
}
