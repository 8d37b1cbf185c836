package drivertest

import (
	"bytes"
	"context"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// The cases below are what the daemon needs of a long-lived sandbox: many execs into one sandbox,
// streams, terminals, pause, metrics and files. Optional abilities are found by type assertion; a
// level without one skips, naming the interface.

func testStatePersists(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{})
	// A background process whose output goes elsewhere does not hold the exec.
	start := time.Now()
	res := Exec(t, sb, 10*time.Second, `echo kept > /workspace/state; cd /tmp
sleep 30 >/dev/null 2>&1 & echo $! > /tmp/bg.pid
sh -c 'sleep 31 >/dev/null 2>&1 &'
pwd`)
	expect(t, res, 0, "/tmp")
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("exec took %v: it waited for background processes", took)
	}
	// Files and processes persist; the working directory does not (each exec starts in the
	// sandbox's workdir).
	res = Exec(t, sb, 10*time.Second, `cat /workspace/state
kill -0 "$(cat /tmp/bg.pid)" && echo alive
for p in /proc/[0-9]*; do [ "$(tr '\0' ' ' < $p/cmdline 2>/dev/null)" = "sleep 31 " ] && echo orphan-alive; done
pwd`)
	expect(t, res, 0, "kept\nalive\norphan-alive\n/workspace")
	// A background process that keeps stdout open: the exec returns after a short grace with
	// what was written, instead of waiting 30 s.
	start = time.Now()
	res = Exec(t, sb, 60*time.Second, "sleep 30 & echo started")
	expect(t, res, 0, "started")
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("exec with a background process holding stdout took %v", took)
	}
}

func testTTY(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{})
	// A new terminal of the sandbox's own, of the size asked for, owned by the sandbox's user,
	// controlling the command's session; stderr goes to it too.
	res := ExecReq(t, sb, 10*time.Second, sandbox.ExecRequest{TTY: true, Rows: 30, Cols: 100, Command: []string{"/bin/sh", "-c",
		`tty; stty size; stat -c %U "$(tty)"; test -t 0 && test -t 1 && test -t 2 && echo all-tty; echo to-stderr >&2; exec 3</dev/tty && echo ctty`}})
	out := strings.ReplaceAll(res.Stdout, "\r\n", "\n")
	if res.ExitCode != 0 || !strings.HasPrefix(out, "/dev/pts/") || res.Stderr != "" {
		t.Fatalf("tty exec: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	for _, want := range []string{"\n30 100\n", "\nagent\n", "\nall-tty\n", "\nto-stderr\n", "\nctty\n"} {
		mustContain(t, "tty exec output", out, want)
	}

	// A resize reaches the command as SIGWINCH and a new size.
	stream := newStream()
	resize := make(chan sandbox.Winsize, 1)
	ch := execAsync(sb, 10*time.Second, sandbox.ExecRequest{TTY: true, Rows: 30, Cols: 100, Resize: resize, Stdout: stream,
		Command: []string{"/bin/sh", "-c", `trap 'stty size; exit 0' WINCH; echo ready; i=0; while [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done; exit 1`}})
	stream.waitFor(t, "ready", 5*time.Second)
	resize <- sandbox.Winsize{Rows: 40, Cols: 120}
	r := <-ch
	if r.err != nil || r.res.ExitCode != 0 || !strings.Contains(r.res.Stdout, "40 120") {
		t.Fatalf("resize: %v exit %d stdout %q", r.err, r.res.ExitCode, r.res.Stdout)
	}
	if stream.String() != r.res.Stdout {
		t.Errorf("streamed %q, captured %q", stream.String(), r.res.Stdout)
	}

	// Stdin is typed into the terminal; its end is the terminal's EOF, which ends a shell.
	res = ExecReq(t, sb, 10*time.Second, sandbox.ExecRequest{TTY: true, Command: []string{"/bin/sh"},
		Stdin: strings.NewReader("echo from-$((40+2))\n")})
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "from-42") {
		t.Fatalf("interactive shell on a tty: exit %d stdout %q", res.ExitCode, res.Stdout)
	}
	// Output written just before the command exits is all there (the master reads EIO at the
	// end, which is EOF).
	res = ExecReq(t, sb, 10*time.Second, sandbox.ExecRequest{TTY: true, Command: []string{"seq", "20000"}})
	if out := strings.ReplaceAll(res.Stdout, "\r\n", "\n"); res.ExitCode != 0 || !strings.HasSuffix(out, "\n19999\n20000\n") || strings.Count(out, "\n") != 20000 {
		t.Fatalf("seq on a tty: exit %d, %d lines, ends %q", res.ExitCode, strings.Count(out, "\n"), out[max(0, len(out)-20):])
	}
}

func testStreams(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{})
	// Stdin from a reader that blocks is fed as data arrives; output streams as it is written.
	pr, pw := io.Pipe()
	stream := newStream()
	ch := execAsync(sb, 10*time.Second, sandbox.ExecRequest{Stdin: pr, Stdout: stream,
		Command: []string{"/bin/sh", "-c", `while read l; do echo "got $l"; done; echo end`}})
	pw.Write([]byte("a\n"))
	stream.waitFor(t, "got a\n", 5*time.Second)
	pw.Write([]byte("b\n"))
	stream.waitFor(t, "got b\n", 5*time.Second)
	pw.Close()
	r := <-ch
	if r.err != nil || r.res.ExitCode != 0 || r.res.Stdout != "got a\ngot b\nend\n" || stream.String() != r.res.Stdout {
		t.Fatalf("streamed stdin: %v exit %d captured %q streamed %q", r.err, r.res.ExitCode, r.res.Stdout, stream.String())
	}

	// A stdin reader that never returns does not hold the exec once the command is done.
	idle, idleW := io.Pipe()
	defer idleW.Close()
	start := time.Now()
	expect(t, ExecReq(t, sb, 10*time.Second, sandbox.ExecRequest{Stdin: idle, Command: []string{"true"}}), 0, "")
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("exec with an idle stdin took %v", took)
	}

	// The capture limit applies to the result only: the stream gets every byte.
	outS, errS := newStream(), newStream()
	res := ExecReq(t, sb, 10*time.Second, sandbox.ExecRequest{Stdout: outS, Stderr: errS, OutputLimit: 1000,
		Command: []string{"/bin/sh", "-c", `head -c 100000 /dev/zero | tr '\0' a; echo e >&2`}})
	if len(res.Stdout) != 1000 || !res.Truncated || outS.Len() != 100000 || res.Stderr != "e\n" || errS.String() != "e\n" {
		t.Fatalf("capture %d bytes (truncated %v), streamed %d; stderr %q streamed %q", len(res.Stdout), res.Truncated, outS.Len(), res.Stderr, errS.String())
	}

	// Signals reach the command's process group.
	stream = newStream()
	sig := make(chan syscall.Signal, 1)
	ch = execAsync(sb, 10*time.Second, sandbox.ExecRequest{Stdout: stream, Signal: sig,
		Command: []string{"/bin/sh", "-c", `trap 'echo got-term; exit 3' TERM; echo ready; while :; do sleep 0.05; done`}})
	stream.waitFor(t, "ready", 5*time.Second)
	sig <- syscall.SIGTERM
	if r := <-ch; r.err != nil || r.res.ExitCode != 3 || !strings.Contains(r.res.Stdout, "got-term") {
		t.Fatalf("signal: %v exit %d stdout %q", r.err, r.res.ExitCode, r.res.Stdout)
	}
}

func testPauseResume(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{})
	p, ok := sb.(driver.Pauser)
	if !ok {
		t.Skipf("SKIPPED: level %s does not implement driver.Pauser", h.D.Name())
	}
	pid := strings.TrimSpace(Exec(t, sb, 10*time.Second, "sh -c 'while :; do :; done' >/dev/null 2>&1 & echo $!").Stdout)
	// CPU ticks (1/100 s) the busy loop has used, read inside the sandbox.
	ticks := func() int {
		t.Helper()
		res := Exec(t, sb, 10*time.Second, "cut -d' ' -f14,15 /proc/"+pid+"/stat")
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
	ch := execAsync(sb2, time.Second, sandbox.ExecRequest{Stdout: stream, Command: []string{"/bin/sh", "-c", "echo ready; sleep 10"}})
	stream.waitFor(t, "ready", 5*time.Second)
	if err := p2.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	actx, acancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer acancel()
	res, err := sb2.Exec(actx, sandbox.ExecRequest{ID: sandbox.NewID("exec_"), Command: []string{"true"}, Capture: true})
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
	Exec(t, sb3, 10*time.Second, "sleep 30 >/dev/null 2>&1 &")
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
	expect(t, Exec(t, sb, 30*time.Second, `head -c 10485760 /dev/zero > /workspace/blob && python3 -c '
import time
x = bytearray(20 << 20)
end = time.time() + 0.2
while time.time() < end: pass
print("ok")'`), 0, "ok")
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
	case u.Pids < 1 || u.PidsLimit < 32 || u.Pids > u.PidsLimit:
		t.Errorf("pids %d of %d, want 1.. of at least 32", u.Pids, u.PidsLimit)
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
	expect(t, Exec(t, sb, 10*time.Second, "echo from-sandbox > /workspace/in && ln -s / /workspace/up"), 0, "")
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
	f.Write([]byte("from-host\n"))
	f.Close()
	// A file the host creates with the ids FileRoot named belongs to the sandbox's user. It
	// must be created with them as its filesystem ids: the writable layer may belong to the
	// sandbox's user namespace, where the kernel refuses to create an inode owned by an id it
	// cannot map (host root's), with EOVERFLOW.
	err = asIDs(uid, gid, func() error {
		f := open("workspace/f", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL)
		defer f.Close()
		f.Write([]byte("from-host\n"))
		return unix.Fchown(f.fd, uid, gid)
	})
	if err != nil {
		t.Fatal(err)
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
		unix.Setfsuid(0)
		unix.Setfsgid(0)
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
	Exec(t, sb, 10*time.Second, "sh -c 'while :; do :; done' >/dev/null 2>&1 &")
	time.Sleep(200 * time.Millisecond)
	for _, cmd := range []string{"true", "sleep 0.5"} {
		res := Exec(t, sb, 10*time.Second, cmd)
		if res.ExitCode != 0 || res.ResourceUsage.CPUTimeMs > 50 {
			t.Fatalf("%s beside a background busy loop: exit %d, cpuTimeMs %d (the loop's CPU counted)", cmd, res.ExitCode, res.ResourceUsage.CPUTimeMs)
		}
	}
	// The command's own use is counted, with what it waited for.
	res := Exec(t, sb, 10*time.Second, `sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done'`)
	if res.ResourceUsage.CPUTimeMs < 50 {
		t.Fatalf("a child's busy loop counted %d ms", res.ResourceUsage.CPUTimeMs)
	}
}

// execOut is the outcome of an exec started with execAsync.
type execOut struct {
	res sandbox.ExecResult
	err error
}

// execAsync runs req (ID and capture filled in) in the background.
func execAsync(sb driver.Sandbox, timeout time.Duration, req sandbox.ExecRequest) <-chan execOut {
	ch := make(chan execOut, 1)
	req.ID = sandbox.NewID("exec_")
	req.Capture = true
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		res, err := sb.Exec(ctx, req)
		ch <- execOut{res, err}
	}()
	return ch
}

// stream is an output writer that is not a file, as a streaming client's is, that tests can wait on.
type stream struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func newStream() *stream { return &stream{} }

func (s *stream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *stream) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func (s *stream) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Len()
}

// waitFor waits until the stream has sub in it.
func (s *stream) waitFor(t *testing.T, sub string, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); !strings.Contains(s.String(), sub); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no %q in the stream after %v: %q", sub, d, s.String())
		}
	}
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
