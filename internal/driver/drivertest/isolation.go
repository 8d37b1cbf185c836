package drivertest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/internal/sandbox"
)

// The cases below check what a sandbox's code cannot reach: the host's ids, files and processes,
// the kernel's dangerous calls, and the sandbox's own init.

func testUsers(t *testing.T, h *Harness) {
	// The capability sets, and whether the process can gain privileges, from the kernel's view of it.
	const status = `
st = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines())
`
	caps := Script{
		Sh: `grep -E '^Cap(Eff|Prm|Bnd|Amb)' /proc/self/status | awk '{print $2}' | sort -u`,
		Py: status + `print("\n".join(sorted({st[k].strip() for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb")})))`,
	}
	noNewPrivs := Script{Sh: "grep NoNewPrivs /proc/self/status | awk '{print $2}'", Py: status + `print(st["NoNewPrivs"].strip())`}
	for _, c := range []struct{ user, id string }{{sandbox.UserAgent, "1000"}, {sandbox.UserRoot, "0"}} {
		t.Run(c.user, func(t *testing.T) {
			sb := h.New(t, sandbox.Spec{User: c.user})
			expect(t, h.Exec(t, sb, 10*time.Second, Script{Sh: "id -u", Py: "import os; print(os.getuid())"}), 0, c.id)
			// No capabilities at all, also for root; and no way to gain any.
			expect(t, h.Exec(t, sb, 10*time.Second, caps), 0, "0000000000000000")
			expect(t, h.Exec(t, sb, 10*time.Second, noNewPrivs), 0, "1")
		})
	}
}

// testHostUnprivileged: the sandbox's ids are not the host's; its root is an unprivileged host uid.
func testHostUnprivileged(t *testing.T, h *Harness) {
	for _, user := range []string{sandbox.UserAgent, sandbox.UserRoot} {
		t.Run(user, func(t *testing.T) {
			sb := h.New(t, sandbox.Spec{User: user})
			res := h.Exec(t, sb, 10*time.Second, Script{Sh: "cat /proc/self/uid_map", Py: `print(open("/proc/self/uid_map").read(), end="")`})
			if f := strings.Fields(res.Stdout); len(f) < 3 || f[1] == "0" {
				t.Fatalf("uid_map %q maps sandbox ids onto host root", res.Stdout)
			}
		})
	}
}

func testReadOnlyRoot(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{})
	if h.Python() {
		// Everywhere but the writable directories, and the interpreter's own files above all:
		// no new file, no new directory, no change to a file that is there.
		res := h.Exec(t, sb, 10*time.Second, Script{Py: `
import os
lib = os.path.dirname(os.__file__)
def attempt(p, fn):
    try:
        fn(p)
        print("wrote", p)
    except OSError as e:
        print("refused", p, e.errno)
def create(p):
    with open(p, "w") as f: f.write("x")
def append(p):
    with open(p, "a") as f: f.write("x")
for p in ("/usr/evil", "/etc/evil", "/evil", "/bin/evil", "/dev/evil", lib + "/evil"):
    attempt(p, create)
attempt(os.__file__, append)
for p in ("/evil-dir", lib + "/evil-dir"):
    attempt(p, os.mkdir)
print("done")`})
		if res.ExitCode != 0 || strings.Contains(res.Stdout, "wrote") || !strings.Contains(res.Stdout, "\ndone\n") {
			t.Errorf("writes outside the writable directories: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
		}
	} else {
		for _, p := range []string{"/usr/evil", "/etc/evil", "/evil", "/bin/evil", "/dev/evil"} {
			if res := Exec(t, sb, 10*time.Second, "echo x > "+p); res.ExitCode == 0 {
				t.Errorf("wrote %s", p)
			}
		}
	}
	// Root of the sandbox's user namespace cannot remount it writable either.
	h.part(t, "remount as root", func(t *testing.T) {
		rootSb := h.New(t, sandbox.Spec{User: sandbox.UserRoot})
		res := h.Exec(t, rootSb, 10*time.Second, Script{
			Sh: "mount -o remount,rw / || touch /evil",
			// mount(2) through ctypes where there is a libc to call it with, then the write.
			Py: `
try:
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    MS_REMOUNT = 32
    r = libc.mount(b"none", b"/", None, MS_REMOUNT, None)
    print("remount", "ok" if r == 0 else ctypes.get_errno())
except (ImportError, OSError, AttributeError) as e:
    print("remount", type(e).__name__)
try:
    with open("/evil", "w") as f: f.write("x")
    print("wrote /evil")
except OSError as e:
    print("refused /evil", e.errno)`,
		})
		if h.Python() {
			if res.ExitCode != 0 || strings.Contains(res.Stdout, "remount ok") || !strings.Contains(res.Stdout, "refused /evil") {
				t.Errorf("root remounted the root filesystem or wrote to it: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
			}
		} else if res.ExitCode == 0 {
			t.Errorf("root remounted the root filesystem: %+v", res)
		}
	})
	if h.Python() {
		// /dev/shm is the kernel's; a level without processes need not have it.
		for _, p := range []string{"/tmp", "/workspace", "/home/agent"} {
			expect(t, h.Exec(t, sb, 10*time.Second, Script{Py: fmt.Sprintf(`
p = %s + "/f"
with open(p, "w") as f: f.write("ok\n")
print(open(p).read(), end="")`, pyLit(p))}), 0, "ok")
		}
		return
	}
	for _, p := range []string{"/tmp", "/workspace", "/home/agent", "/dev/shm"} {
		expect(t, Exec(t, sb, 10*time.Second, "echo ok > "+p+"/f && cat "+p+"/f"), 0, "ok")
	}
}

func testMounts(t *testing.T, h *Harness) {
	ro, rw := t.TempDir(), t.TempDir()
	for _, err := range []error{os.Chmod(ro, 0o755), os.Chmod(rw, 0o777), os.WriteFile(ro+"/in", []byte("from host"), 0o644)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Binds are the operator's host directories (airlock run --ro/--rw, the daemon's volumes);
	// filesystem paths are the sandbox's own (docs/levels.md#filesystem).
	sb := h.New(t, sandbox.Spec{
		Binds: []sandbox.Bind{{Host: ro, Path: "/data", ReadOnly: true}, {Host: rw, Path: "/out"}},
		Filesystem: sandbox.Filesystem{
			ReadOnly:  []string{"/workspace/ref", "/out/sealed"},
			ReadWrite: []string{"/opt/scratch"},
			Blocked:   []string{"/usr/share/doc"},
		}})
	expect(t, h.Exec(t, sb, 10*time.Second, Script{Sh: "cat /data/in", Py: `print(open("/data/in").read())`}), 0, "from host")
	for _, p := range []string{"/data/new", "/workspace/ref/new", "/out/sealed/new"} {
		res := h.Exec(t, sb, 10*time.Second, Script{Sh: "echo x > " + p, Py: fmt.Sprintf(`
try:
    with open(%s, "w") as f: f.write("x")
except OSError as e:
    print("refused", e.errno)`, pyLit(p))})
		if !h.refused(res) {
			t.Fatalf("wrote %s, beneath a read-only path: %q %q", p, res.Stdout, res.Stderr)
		}
	}
	for _, p := range []string{"/out/file", "/opt/scratch/file", "/workspace/file"} {
		expect(t, h.Exec(t, sb, 10*time.Second, Script{Sh: "echo result > " + p + " && cat " + p, Py: fmt.Sprintf(`
with open(%[1]s, "w") as f: f.write("result\n")
print(open(%[1]s).read(), end="")`, pyLit(p))}), 0, "result")
	}
	if b, err := os.ReadFile(rw + "/file"); err != nil || string(b) != "result\n" {
		t.Fatalf("read-write mount: host sees %q, %v", b, err)
	}
	res := h.Exec(t, sb, 10*time.Second, Script{Sh: "ls /usr/share/doc", Py: `
import os
try:
    print("listed", os.listdir("/usr/share/doc"))
except OSError as e:
    print("refused", e.errno)`})
	if !h.refused(res) {
		t.Fatalf("blocked path is listable: %q", res.Stdout)
	}
}

// refused reports whether a command that tried a forbidden thing was refused: the shell form
// fails, the Python form prints "refused" and why (failing otherwise would prove nothing).
func (h *Harness) refused(res sandbox.ExecResult) bool {
	if h.Python() {
		return res.ExitCode == 0 && strings.HasPrefix(res.Stdout, "refused")
	}
	return res.ExitCode != 0
}

func testHostProcesses(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{})
	if h.Python() {
		// Where there is a /proc, it is the sandbox's own: it shows the command itself and a few
		// more at most. No host process is there, nor can be signalled (pids are the sandbox's,
		// so a host pid of 6 or less may name a process of the sandbox).
		pid := os.Getpid()
		res := h.Exec(t, sb, 10*time.Second, Script{Py: fmt.Sprintf(`
import os
try:
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    print("procs", len(pids), str(os.getpid()) in pids)
except OSError:
    print("procs none")
print("host-pid", os.path.exists("/proc/%d"))
try:
    os.kill(%d, 0)
    print("signal reaches")
except (OSError, AttributeError) as e:
    print("signal", type(e).__name__)`, pid, pid)})
		f := strings.Fields(res.Stdout)
		if res.ExitCode != 0 || len(f) < 2 || f[0] != "procs" {
			t.Fatalf("processes: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
		}
		var n int
		_, _ = fmt.Sscan(f[1], &n) // "none", or not a number: n stays 0, which fails below
		if f[1] != "none" && (n == 0 || n > 6 || f[2] != "True") {
			t.Fatalf("sandbox sees %d processes, itself among them: %q", n, res.Stdout)
		}
		if pid > 6 && (strings.Contains(res.Stdout, "host-pid True") || strings.Contains(res.Stdout, "signal reaches")) {
			t.Fatalf("host pid %d visible: %q", pid, res.Stdout)
		}
		return
	}
	res := Exec(t, sb, 10*time.Second, "ls /proc | grep -c '^[0-9]'")
	var n int
	_, _ = fmt.Sscan(res.Stdout, &n) // not a number: n stays 0, which fails below
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
	paths := []string{secret, "/root", "/home", "/var/lib/airlock", "/etc/shadow", "/proc/1/root" + secret, "/sys/fs/cgroup"}
	if h.Python() {
		// Each path read as a file or else listed as a directory, as cat || ls -A does.
		res := h.Exec(t, sb, 10*time.Second, Script{Py: `
import json, os
def look(p):
    try:
        with open(p, "rb") as f: return f.read().decode(errors="replace")
    except OSError:
        pass
    try:
        return " ".join(os.listdir(p))
    except OSError:
        return ""
for p in ` + pyLit(paths) + `:
    print(json.dumps([p, look(p)]))
print("done")`})
		if res.ExitCode != 0 || !strings.HasSuffix(res.Stdout, "done\n") {
			t.Fatalf("looking for host files: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
		}
		for _, l := range strings.Split(strings.TrimSuffix(res.Stdout, "done\n"), "\n") {
			var seen []string
			if l == "" || json.Unmarshal([]byte(l), &seen) != nil || len(seen) != 2 {
				continue
			}
			if strings.TrimSpace(seen[1]) != "" {
				t.Errorf("%s readable in the sandbox: %q", seen[0], seen[1])
			}
		}
		if strings.Contains(res.Stdout, "host-secret-value") {
			t.Errorf("host secret leaked: %s", res.Stdout)
		}
		return
	}
	for _, p := range paths {
		res := Exec(t, sb, 10*time.Second, "cat "+p+" 2>/dev/null || ls -A "+p+" 2>/dev/null")
		if res.ExitCode == 0 && strings.TrimSpace(res.Stdout) != "" {
			t.Errorf("%s readable in the sandbox: %q", p, res.Stdout)
		}
		if strings.Contains(res.Stdout, "host-secret-value") {
			t.Errorf("host secret leaked via %s", p)
		}
	}
}

// hostProcFiles are /proc files whose content is the host's, not the sandbox's, unless the level
// masks them (or its kernel is its own): the host's boot parameters, its boot's id, its physical
// memory map.
var hostProcFiles = []string{"/proc/cmdline", "/proc/sys/kernel/random/boot_id", "/proc/iomem"}

// testProcMasked reads hostProcFiles in a sandbox: each is empty, unreadable or not the host's.
func testProcMasked(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{User: sandbox.UserRoot})
	res := h.Exec(t, sb, 10*time.Second, Script{
		Sh: `for f in ` + strings.Join(hostProcFiles, " ") + `; do printf '%s\t' "$f"; (cat "$f" 2>/dev/null || true) | base64 -w0; echo; done`,
		Py: `
import base64
for f in ` + pyLit(hostProcFiles) + `:
    try:
        with open(f, "rb") as fh: b = fh.read()
    except OSError:
        b = b""
    print(f + "\t" + base64.b64encode(b).decode())`,
	})
	if res.ExitCode != 0 {
		t.Fatalf("reading /proc: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	seen := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		f, enc, _ := strings.Cut(l, "\t")
		got, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			t.Fatalf("%s: %q: %v", f, enc, err)
		}
		seen[f] = true
		host, _ := os.ReadFile(f)
		if len(got) > 0 && len(host) > 0 && bytes.Equal(got, host) {
			t.Errorf("%s in the sandbox is the host's: %.80q", f, got)
		}
	}
	for _, f := range hostProcFiles {
		if !seen[f] {
			t.Errorf("%s not read: %q", f, res.Stdout)
		}
	}
}

// testUsrLocalHidden: the host template binds the host's /usr but not its /usr/local, where
// operators keep their own software, configuration and secrets: the sandbox sees an empty
// directory there, and a file the host has in it cannot be read.
func testUsrLocalHidden(t *testing.T, h *Harness) {
	secret := usrLocalFile(t, "airlock-conformance-*", "host-secret-value")
	sb := h.New(t, sandbox.Spec{User: sandbox.UserRoot})
	res := h.Exec(t, sb, 10*time.Second, Script{
		Sh: "ls -A /usr/local | wc -l; cat " + secret + " 2>/dev/null || echo unreadable",
		Py: `
import os
print(len(os.listdir("/usr/local")))
try:
    print(open(` + pyLit(secret) + `).read())
except OSError:
    print("unreadable")`,
	})
	expect(t, res, 0, "0\nunreadable")
}

// blockedSyscalls makes raw syscalls through ctypes, so no libc wrapper can hide the kernel's
// answer.
const blockedSyscalls = `
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
`

func testBlockedSyscalls(t *testing.T, h *Harness) {
	if runtime.GOARCH != "amd64" {
		t.Skip("syscall numbers below are x86_64")
	}
	sb := h.New(t, sandbox.Spec{User: sandbox.UserRoot})
	res := h.Exec(t, sb, 10*time.Second, Script{Sh: `python3 -c '` + blockedSyscalls + `'`, Py: blockedSyscalls})
	want := "unshare 1\nmount 1\nptrace 1\nkeyctl 1\nbpf 1\nio_uring_setup 1\nsetns 1\nclone3 38\nunknown 38\nsocket 1\nsocket 1\nsocket 1"
	if strings.TrimSpace(res.Stdout) != want {
		t.Fatalf("syscalls:\n%s\nwant (1 = EPERM, 38 = ENOSYS):\n%s\nstderr: %s", res.Stdout, want, res.Stderr)
	}
	// unshare(1) makes the unshare call above (CLONE_NEWUSER), which the Python form has checked.
	if h.Python() {
		return
	}
	if res := Exec(t, sb, 10*time.Second, "unshare -U true"); res.ExitCode == 0 {
		t.Fatal("unshare(1) succeeded")
	}
}

func testSetuid(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{})
	// su and mount are setuid root on the host; inside they must not make anyone root.
	res := h.Exec(t, sb, 10*time.Second, Script{
		Sh: `for b in /usr/bin/su /usr/bin/mount /usr/bin/passwd; do [ -u $b ] && echo setuid; done | head -1
su -c id root </dev/null; echo "su=$?"; mount -t tmpfs none /tmp 2>/dev/null; echo "mount=$?"; id -u`,
		// The same programs run from Python; where there are none (127), nothing is granted either.
		Py: `
import os, stat, subprocess, sys
if any(os.path.exists(b) and os.stat(b).st_mode & stat.S_ISUID for b in ("/usr/bin/su", "/usr/bin/mount", "/usr/bin/passwd")):
    print("setuid", flush=True)
def run(what, argv, **kw):
    try:
        code = subprocess.run(argv, stdin=subprocess.DEVNULL, **kw).returncode
    except FileNotFoundError:
        code = 127
    print(what + "=" + str(code), flush=True)
run("su", ["su", "-c", "id", "root"])
run("mount", ["mount", "-t", "tmpfs", "none", "/tmp"], stderr=subprocess.DEVNULL)
print(os.getuid())`,
	})
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
			res := h.Exec(t, sb, 20*time.Second, Script{
				Sh: `tids=$(ls /proc/1/task); [ -n "$tids" ] || echo "no threads seen"
for s in ` + initSignals + `; do for p in 1 $tids; do kill -$s $p 2>/dev/null && echo "sent $s to $p"; done; done
kill -KILL -1; sleep 0.2; echo done`,
				Py: `
import os, signal, time
try:
    tids = [int(t) for t in os.listdir("/proc/1/task")]
except OSError:
    tids = []
if not tids: print("no threads seen")
for s in "` + initSignals + `".split():
    for p in [1] + tids:
        try:
            os.kill(p, getattr(signal, "SIG" + s))
            print("sent", s, "to", p)
        except OSError:
            pass
try:
    os.kill(-1, signal.SIGKILL)
except OSError:
    pass
time.sleep(0.2)
print("done")`,
			})
			if strings.Contains(res.Stdout, "sent") || !strings.Contains(res.Stdout, "done") {
				t.Errorf("signals reached init: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
			}
			expect(t, h.Exec(t, sb, 10*time.Second, Script{Sh: "echo alive", Py: "print('alive')"}), 0, "alive")
		})
	}
}
