package drivertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// Cases lists the suite. Names are stable: levels skip by name.
func Cases() []Case {
	return []Case{
		{"Output", testOutput},
		{"ExitCodes", testExitCodes},
		{"EnvWorkdirStdin", testEnvWorkdirStdin},
		{"Claim", testClaim},
		{"Users", testUsers},
		{"HostUnprivileged", testHostUnprivileged},
		{"ReadOnlyRoot", testReadOnlyRoot},
		{"Mounts", testMounts},
		{"HostProcessesInvisible", testHostProcesses},
		{"HostFilesInvisible", testHostFiles},
		{"LoopbackOnly", testLoopbackOnly},
		{"NetworkRestricted", testNetworkRestricted},
		{"BlockedSyscalls", testBlockedSyscalls},
		{"SetuidGrantsNothing", testSetuid},
		{"InitSurvivesSignals", testInitSignals},
		{"MemoryBomb", testMemoryBomb},
		{"ForkBomb", testForkBomb},
		{"CPUQuota", testCPUQuota},
		{"DiskFill", testDiskFill},
		{"OpenFiles", testOpenFiles},
		{"TimeoutKillsTree", testTimeout},
		{"OutputBounded", testOutputBounded},
		{"ManySandboxes", testManySandboxes},
		// A long-lived sandbox (longlived.go).
		{"StatePersists", testStatePersists},
		{"TTY", testTTY},
		{"Streams", testStreams},
		{"PauseResume", testPauseResume},
		{"Usage", testUsage},
		{"FileRoot", testFileRoot},
		{"PerExecUsage", testPerExecUsage},
		{"LayerChanges", testLayerChanges},
		// Snapshots (snapshot.go).
		{"Snapshot", testSnapshot},
		{"SnapshotMemory", testSnapshotMemory},
	}
}

func testOutput(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{})
	res := Exec(t, sb, 10*time.Second, "echo out; echo err >&2; exit 3")
	if res.ExitCode != 3 || res.Stdout != "out\n" || res.Stderr != "err\n" || res.TimedOut || res.OOMKilled || res.Truncated {
		t.Fatalf("result %+v", res)
	}
	if res.ExecutionID == "" || res.LimitEvents == nil {
		t.Fatalf("result lacks executionId or limitEvents: %+v", res)
	}
}

func testExitCodes(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{})
	for _, c := range []struct {
		name string
		argv []string
		exit int
	}{
		{"true", []string{"true"}, 0},
		{"false", []string{"false"}, 1},
		{"killed by signal", []string{"/bin/sh", "-c", "kill -TERM $$"}, 128 + 15},
		{"not found", []string{"no-such-command"}, 127},
		{"not executable", []string{"/etc/passwd"}, 126},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := ExecReq(t, sb, 10*time.Second, sandbox.ExecRequest{Command: c.argv})
			if res.ExitCode != c.exit {
				t.Fatalf("exit %d, want %d (stderr %q)", res.ExitCode, c.exit, res.Stderr)
			}
		})
	}
}

func testEnvWorkdirStdin(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{Environment: map[string]string{"FROM_SPEC": "a"}})
	res := ExecReq(t, sb, 10*time.Second, sandbox.ExecRequest{
		Command: []string{"/bin/sh", "-c", `echo "$FROM_SPEC $FROM_EXEC $(pwd) $HOME"; cat`},
		Env:     map[string]string{"FROM_EXEC": "b"},
		Stdin:   strings.NewReader("from stdin"),
	})
	expect(t, res, 0, "a b /workspace /home/agent\nfrom stdin")
	res = ExecReq(t, sb, 10*time.Second, sandbox.ExecRequest{Command: []string{"pwd"}, Workdir: "/tmp"})
	expect(t, res, 0, "/tmp")
}

// testClaim hands a made sandbox a claimant's spec, as a warm pool does: its environment counts
// from the next exec, and a claim that would add a network is refused, changing nothing.
func testClaim(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{})
	c, ok := sb.(driver.Claimer)
	if !ok {
		t.Skipf("level %s cannot hand out pooled sandboxes (no driver.Claimer)", h.D.Name())
	}
	claim := sandbox.Spec{Isolation: h.D.Name(), Name: "claimant", Environment: map[string]string{"CLAIMED": "yes"}}
	sandbox.SetDefaults(&claim)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Claim(ctx, claim); err != nil {
		t.Fatalf("claim: %v", err)
	}
	expect(t, Exec(t, sb, 10*time.Second, `echo "$CLAIMED"`), 0, "yes")
	networked := claim
	networked.Environment = map[string]string{"CLAIMED": "twice"}
	networked.Network.EgressPolicy = sandbox.EgressRestricted
	if err := c.Claim(ctx, networked); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("a claim adding a network: %v, want ErrConflict", err)
	}
	expect(t, Exec(t, sb, 10*time.Second, `echo "$CLAIMED"`), 0, "yes")
}

func testUsers(t *testing.T, h *Harness) {
	caps := `grep -E '^Cap(Eff|Prm|Bnd|Amb)' /proc/self/status | awk '{print $2}' | sort -u`
	for _, c := range []struct{ user, id string }{{sandbox.UserAgent, "1000"}, {sandbox.UserRoot, "0"}} {
		t.Run(c.user, func(t *testing.T) {
			sb := h.New(t, sandbox.Spec{User: c.user})
			expect(t, Exec(t, sb, 10*time.Second, "id -u"), 0, c.id)
			// No capabilities at all, also for root; and no way to gain any.
			expect(t, Exec(t, sb, 10*time.Second, caps), 0, "0000000000000000")
			expect(t, Exec(t, sb, 10*time.Second, "grep NoNewPrivs /proc/self/status | awk '{print $2}'"), 0, "1")
		})
	}
}

// testHostUnprivileged: the sandbox's ids are not the host's; its root is an unprivileged host uid.
func testHostUnprivileged(t *testing.T, h *Harness) {
	for _, user := range []string{sandbox.UserAgent, sandbox.UserRoot} {
		t.Run(user, func(t *testing.T) {
			sb := h.New(t, sandbox.Spec{User: user})
			res := Exec(t, sb, 10*time.Second, "cat /proc/self/uid_map")
			if f := strings.Fields(res.Stdout); len(f) < 3 || f[1] == "0" {
				t.Fatalf("uid_map %q maps sandbox ids onto host root", res.Stdout)
			}
		})
	}
}

func testReadOnlyRoot(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{})
	for _, p := range []string{"/usr/evil", "/etc/evil", "/evil", "/bin/evil", "/dev/evil"} {
		if res := Exec(t, sb, 10*time.Second, "echo x > "+p); res.ExitCode == 0 {
			t.Errorf("wrote %s", p)
		}
	}
	// Root of the sandbox's user namespace cannot remount it writable either.
	rootSb := h.New(t, sandbox.Spec{User: sandbox.UserRoot})
	if res := Exec(t, rootSb, 10*time.Second, "mount -o remount,rw / || touch /evil"); res.ExitCode == 0 {
		t.Errorf("root remounted the root filesystem: %+v", res)
	}
	for _, p := range []string{"/tmp", "/workspace", "/home/agent", "/dev/shm"} {
		expect(t, Exec(t, sb, 10*time.Second, "echo ok > "+p+"/f && cat "+p+"/f"), 0, "ok")
	}
}

func testMounts(t *testing.T, h *Harness) {
	ro, rw := t.TempDir(), t.TempDir()
	os.Chmod(ro, 0o755)
	os.Chmod(rw, 0o777)
	os.WriteFile(ro+"/in", []byte("from host"), 0o644)
	sb := h.New(t, sandbox.Spec{Filesystem: sandbox.Filesystem{
		ReadOnly:  []string{ro + ":/data"},
		ReadWrite: []string{rw + ":/out"},
		Blocked:   []string{"/usr/share/doc"},
	}})
	expect(t, Exec(t, sb, 10*time.Second, "cat /data/in"), 0, "from host")
	if res := Exec(t, sb, 10*time.Second, "echo x > /data/new"); res.ExitCode == 0 {
		t.Fatal("wrote into a read-only mount")
	}
	expect(t, Exec(t, sb, 10*time.Second, "echo result > /out/file"), 0, "")
	if b, err := os.ReadFile(rw + "/file"); err != nil || string(b) != "result\n" {
		t.Fatalf("read-write mount: host sees %q, %v", b, err)
	}
	if res := Exec(t, sb, 10*time.Second, "ls /usr/share/doc"); res.ExitCode == 0 {
		t.Fatalf("blocked path is listable: %q", res.Stdout)
	}
}

func testHostProcesses(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{})
	res := Exec(t, sb, 10*time.Second, "ls /proc | grep -c '^[0-9]'")
	var n int
	fmt.Sscan(res.Stdout, &n)
	if n == 0 || n > 6 {
		t.Fatalf("sandbox sees %d processes: %q", n, res.Stdout)
	}
	if res := Exec(t, sb, 10*time.Second, fmt.Sprintf("test -e /proc/%d/status", os.Getpid())); res.ExitCode == 0 && os.Getpid() > 6 {
		t.Fatalf("host pid %d visible", os.Getpid())
	}
}

func testHostFiles(t *testing.T, h *Harness) {
	secret := hostSecret(t)
	sb := h.New(t, sandbox.Spec{User: sandbox.UserRoot})
	for _, p := range []string{secret, "/root", "/home", "/var/lib/airlock", "/etc/shadow", "/proc/1/root" + secret, "/sys/fs/cgroup"} {
		res := Exec(t, sb, 10*time.Second, "cat "+p+" 2>/dev/null || ls -A "+p+" 2>/dev/null")
		if res.ExitCode == 0 && strings.TrimSpace(res.Stdout) != "" {
			t.Errorf("%s readable in the sandbox: %q", p, res.Stdout)
		}
		if strings.Contains(res.Stdout, "host-secret-value") {
			t.Errorf("host secret leaked via %s", p)
		}
	}
}

func testLoopbackOnly(t *testing.T, h *Harness) {
	// A server on the host's loopback: the sandbox's 127.0.0.1 is its own, so this must not answer.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	sb := h.New(t, sandbox.Spec{})
	expect(t, Exec(t, sb, 10*time.Second, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"), 0, "lo")
	res := Exec(t, sb, 10*time.Second, fmt.Sprintf(`python3 -c '
import socket
try:
    socket.create_connection(("127.0.0.1", %d), timeout=2); print("connected")
except OSError as e: print("refused")'`, port))
	expect(t, res, 0, "refused")
	// No route anywhere: the kernel has nowhere to send a packet (checked without sending one).
	expect(t, Exec(t, sb, 10*time.Second, "tail -n +2 /proc/net/route | wc -l"), 0, "0")
	expect(t, Exec(t, sb, 10*time.Second, "grep -vc ' lo$' /proc/net/ipv6_route"), 1, "0")
}

// testNetworkRestricted: a restricted sandbox with an allowlist reaches nothing else, and not
// even its root can change that. Every packet here ends at airlock's own listeners on the
// sandbox's gateway (the firewall redirects or rejects it inside the sandbox's namespace), so
// nothing is sent to the TEST-NET address dialled.
func testNetworkRestricted(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{User: sandbox.UserRoot, Network: sandbox.Network{
		EgressPolicy: sandbox.EgressRestricted, AllowedDomains: []string{"allowed.test"}}})
	expect(t, Exec(t, sb, 10*time.Second, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort | tr '\n' ' '"), 0, "eth0 lo")
	res := Exec(t, sb, 20*time.Second, `python3 -c '
import socket, time
def attempt(what, fn):
    t0 = time.monotonic()
    try:
        print(what, fn())
    except OSError as e:
        print(what, type(e).__name__)
    if time.monotonic() - t0 > 3: print(what, "SLOW")
def http(host):
    s = socket.create_connection(("203.0.113.9", 80), timeout=5)
    s.sendall(b"GET / HTTP/1.1\r\nHost: " + host + b"\r\nConnection: close\r\n\r\n")
    return s.recv(200).split(b"\r\n")[0].decode()
attempt("http-literal", lambda: http(b"203.0.113.9"))
attempt("http-denied", lambda: http(b"evil.test"))
attempt("ssh", lambda: socket.create_connection(("203.0.113.9", 22), timeout=5))
attempt("dns-denied", lambda: socket.getaddrinfo("evil.test", 80))
attempt("raw", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
attempt("netlink", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0))
'`)
	for _, want := range []string{"http-literal HTTP/1.1 403", "http-denied HTTP/1.1 403", "ssh ConnectionRefusedError",
		"dns-denied gaierror", "raw PermissionError", "netlink PermissionError"} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("want %q in:\n%s%s", want, res.Stdout, res.Stderr)
		}
	}
	if strings.Contains(res.Stdout, "SLOW") {
		t.Errorf("a refusal took more than 3 s (a hang instead of a clear answer):\n%s", res.Stdout)
	}
}

func testBlockedSyscalls(t *testing.T, h *Harness) {
	if runtime.GOARCH != "amd64" {
		t.Skip("syscall numbers below are x86_64")
	}
	sb := h.New(t, sandbox.Spec{User: sandbox.UserRoot})
	// Raw syscalls through ctypes, so no libc wrapper can hide the kernel's answer.
	script := `python3 -c '
import ctypes, socket
libc = ctypes.CDLL(None, use_errno=True)
def call(name, nr, *args):
    r = libc.syscall(nr, *args)
    print(name, "ok" if r >= 0 else ctypes.get_errno())
call("unshare", 272, 0x10000000)
call("mount", 165, b"none", b"/tmp", b"tmpfs", 0, 0)
call("ptrace", 101, 0, 0, 0, 0)
call("keyctl", 250, 0, 0, 0, 0)
call("bpf", 321, 0, 0, 0)
call("io_uring_setup", 425, 1, 0)
call("setns", 308, 0, 0)
call("clone3", 435, 0, 0)
call("unknown", 1000)
for fam, typ in ((socket.AF_PACKET, socket.SOCK_RAW), (socket.AF_INET, socket.SOCK_RAW), (socket.AF_NETLINK, socket.SOCK_RAW)):
    try: socket.socket(fam, typ); print("socket", fam, typ, "ok")
    except OSError as e: print("socket", e.errno)
'`
	res := Exec(t, sb, 10*time.Second, script)
	want := "unshare 1\nmount 1\nptrace 1\nkeyctl 1\nbpf 1\nio_uring_setup 1\nsetns 1\nclone3 38\nunknown 38\nsocket 1\nsocket 1\nsocket 1"
	if strings.TrimSpace(res.Stdout) != want {
		t.Fatalf("syscalls:\n%s\nwant (1 = EPERM, 38 = ENOSYS):\n%s\nstderr: %s", res.Stdout, want, res.Stderr)
	}
	if res := Exec(t, sb, 10*time.Second, "unshare -U true"); res.ExitCode == 0 {
		t.Fatal("unshare(1) succeeded")
	}
}

func testSetuid(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{})
	// su and mount are setuid root on the host; inside they must not make anyone root.
	res := Exec(t, sb, 10*time.Second, `for b in /usr/bin/su /usr/bin/mount /usr/bin/passwd; do [ -u $b ] && echo setuid; done | head -1
su -c id root </dev/null; echo "su=$?"; mount -t tmpfs none /tmp 2>/dev/null; echo "mount=$?"; id -u`)
	lines := strings.Fields(res.Stdout)
	if len(lines) == 0 || lines[len(lines)-1] != "1000" || strings.Contains(res.Stdout, "su=0") || strings.Contains(res.Stdout, "mount=0") {
		t.Fatalf("setuid binaries granted something: %q %q", res.Stdout, res.Stderr)
	}
}

// initSignals are the signals tried on init. Linux drops KILL and STOP sent to a pid namespace's
// init from inside it, and any signal init has no handler for; gVisor does not, and init (Go)
// has a handler for nearly every signal.
const initSignals = "KILL STOP TERM HUP INT QUIT ABRT SEGV BUS TRAP SYS USR1 USR2 PIPE ALRM XCPU PWR TSTP TTIN TTOU"

// testInitSignals: a sandbox's own code, as either user, cannot signal its init — not by its
// pid, nor by the ids of its threads, nor by kill(-1) — so cannot end or stop its own sandbox.
func testInitSignals(t *testing.T, h *Harness) {
	for _, user := range []string{sandbox.UserAgent, sandbox.UserRoot} {
		t.Run(user, func(t *testing.T) {
			sb := h.New(t, sandbox.Spec{User: user})
			res := Exec(t, sb, 20*time.Second, `tids=$(ls /proc/1/task); [ -n "$tids" ] || echo "no threads seen"
for s in `+initSignals+`; do for p in 1 $tids; do kill -$s $p 2>/dev/null && echo "sent $s to $p"; done; done
kill -KILL -1; sleep 0.2; echo done`)
			if strings.Contains(res.Stdout, "sent") || !strings.Contains(res.Stdout, "done") {
				t.Errorf("signals reached init: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
			}
			expect(t, Exec(t, sb, 10*time.Second, "echo alive"), 0, "alive")
		})
	}
}

func testMemoryBomb(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{Resources: sandbox.Resources{MemoryMB: 128}})
	res := Exec(t, sb, 30*time.Second, `python3 -c 'b = bytearray(1024 * 1024 * 1024); print("allocated")'`)
	if res.ExitCode != sandbox.ExitOOM || !res.OOMKilled || !hasEvent(res, sandbox.EventLimitMemory) {
		t.Fatalf("memory bomb: exit %d oomKilled %v events %+v stdout %q", res.ExitCode, res.OOMKilled, res.LimitEvents, res.Stdout)
	}
	// Peak memory is the command's peak resident set (rusage), which also counts resident pages of
	// files it mapped (python's libraries) that the memory cgroup charged to someone else: it can
	// pass the limit by those few MiB. Under gVisor the kill is airlock's own and asynchronous
	// (a cgroup threshold event, then init kills the largest process), so the bomb can get a few
	// tens of MiB further first (163 MiB seen once in many runs); the runtime's cgroup, with its
	// headroom, still caps the sandbox.
	within(t, "peak memory MiB", res.ResourceUsage.PeakMemoryMB, 100, 192)
	// The sandbox survives its bomb, uses its memory again, and a second bomb ends the same way.
	expect(t, Exec(t, sb, 10*time.Second, "echo alive"), 0, "alive")
	expect(t, Exec(t, sb, 30*time.Second, `python3 -c 'b = bytearray(64 << 20); print("allocated")'`), 0, "allocated")
	res = Exec(t, sb, 30*time.Second, `python3 -c 'b = bytearray(1024 * 1024 * 1024); print("allocated")'`)
	if res.ExitCode != sandbox.ExitOOM || !res.OOMKilled {
		t.Fatalf("second memory bomb: exit %d oomKilled %v events %+v", res.ExitCode, res.OOMKilled, res.LimitEvents)
	}
	expect(t, Exec(t, sb, 10*time.Second, "echo alive"), 0, "alive")
}

func testForkBomb(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{Resources: sandbox.Resources{MaxProcesses: 32}})
	done := make(chan sandbox.ExecResult)
	go func() {
		// The classic, in sh: every function call forks two more, forever.
		done <- Exec(t, sb, 4*time.Second, `b() { b | b & }; b; sleep 10`)
	}()
	time.Sleep(time.Second)
	hostForks(t) // the host is unaffected while the bomb goes off
	res := <-done
	if !hasEvent(res, sandbox.EventLimitPids) {
		t.Fatalf("fork bomb: no %s event: %+v", sandbox.EventLimitPids, res.LimitEvents)
	}
	// A fork fails with EAGAIN at the limit.
	sb2 := h.New(t, sandbox.Spec{Resources: sandbox.Resources{MaxProcesses: 8}})
	res = Exec(t, sb2, 10*time.Second, `python3 -c '
import os, time, errno
n = 0
try:
    while n < 100:
        if os.fork() == 0: time.sleep(5); os._exit(0)
        n += 1
except OSError as e: print(n, errno.errorcode[e.errno])'`)
	f := strings.Fields(res.Stdout)
	if len(f) != 2 || f[1] != "EAGAIN" {
		t.Fatalf("fork at the limit: %q %q", res.Stdout, res.Stderr)
	}
	hostForks(t)
}

func testCPUQuota(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{Resources: sandbox.Resources{CPU: 0.5}})
	res := Exec(t, sb, 20*time.Second, `python3 -c '
import time
end = time.time() + 2
while time.time() < end: pass'`)
	if res.ExitCode != 0 {
		t.Fatalf("spin: %+v", res)
	}
	within(t, "cpu time / wall time", float64(res.ResourceUsage.CPUTimeMs)/float64(res.DurationMs), 0.35, 0.65)
	if !hasEvent(res, sandbox.EventLimitCPU) {
		t.Fatalf("no %s event: %+v", sandbox.EventLimitCPU, res.LimitEvents)
	}
}

func testDiskFill(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{Resources: sandbox.Resources{DiskMB: 16}})
	res := Exec(t, sb, 20*time.Second, "dd if=/dev/zero of=/workspace/fill bs=1M count=64 2>&1; echo dd=$?")
	mustContain(t, "dd", res.Stdout, "No space left on device")
	if !hasEvent(res, sandbox.EventLimitDisk) {
		t.Fatalf("no %s event: %+v", sandbox.EventLimitDisk, res.LimitEvents)
	}
	// One cap for the whole writable layer: /tmp is full too.
	res = Exec(t, sb, 10*time.Second, "dd if=/dev/zero of=/tmp/more bs=1M count=4 2>&1")
	mustContain(t, "dd into /tmp", res.Stdout, "No space left on device")
	expect(t, Exec(t, sb, 10*time.Second, "rm /workspace/fill && echo x > /tmp/ok && cat /tmp/ok"), 0, "x")
}

func testOpenFiles(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{Resources: sandbox.Resources{MaxOpenFiles: 64}})
	res := Exec(t, sb, 10*time.Second, `python3 -c '
import errno
fs = []
try:
    while True: fs.append(open("/dev/null"))
except OSError as e: print(len(fs) < 64, errno.errorcode[e.errno])'`)
	expect(t, res, 0, "True EMFILE")
}

func testTimeout(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{})
	start := time.Now()
	// A grandchild in its own session (double fork) must die with the command.
	res := Exec(t, sb, time.Second, "setsid sh -c 'sleep 1000 & sleep 1000' & sleep 1000")
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
	res := Exec(t, sb, 60*time.Second, "head -c 200000000 /dev/zero; head -c 12000000 /dev/zero >&2; echo done >&2")
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

func testManySandboxes(t *testing.T, h *Harness) {
	n := 200
	if testing.Short() {
		n = 20
	}
	for i := 0; i < n; i++ {
		sb := h.New(t, sandbox.Spec{})
		res := Exec(t, sb, 10*time.Second, "echo "+fmt.Sprint(i))
		expect(t, res, 0, fmt.Sprint(i))
		if err := sb.Destroy(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}
