package container_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/driver/container"
	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// An escape is one container escape attempt. Its script exits 0 only if the attempt worked.
type escape struct {
	name   string
	script string
	// users it is tried as; none means both the sandbox's root and agent.
	users []string
}

const secretValue = "host-secret-value-escape"

// escapes are the attempts. mark is a file name no host path has; an escape that worked would
// leave it at /mark or /tmp/mark on the host. secret is a host file the sandbox must not read.
func escapes(secret, mark, rcu string) []escape {
	py := func(body string) string { return "python3 -c '\n" + body + "\n'" }
	return []escape{
		// Kernel knobs: core_pattern runs a helper as host root at a crash; sysrq reboots.
		{name: "core_pattern", script: "echo '|/tmp/" + mark + "' > /proc/sys/kernel/core_pattern"},
		{name: "core_pattern via a new proc", script: "mkdir -p /tmp/p && mount -t proc proc /tmp/p && echo '|/tmp/" + mark + "' > /tmp/p/sys/kernel/core_pattern"},
		{name: "sysrq-trigger", script: "echo h > /proc/sysrq-trigger"},
		{name: "sys knob", script: "echo " + rcu + " > /sys/kernel/rcu_expedited"},
		{name: "mount sysfs", script: "mkdir -p /tmp/s && mount -t sysfs sysfs /tmp/s && ls /tmp/s/kernel"},
		// cgroup v1's release_agent runs as host root when a cgroup empties.
		{name: "cgroup release_agent", script: "mkdir -p /tmp/cg && mount -t cgroup -o memory cgroup /tmp/cg && " +
			"echo /tmp/" + mark + " > /tmp/cg/release_agent && echo 1 > /tmp/cg/notify_on_release"},
		{name: "cgroup2 mount", script: "mkdir -p /tmp/cg2 && mount -t cgroup2 none /tmp/cg2"},
		{name: "host cgroup release_agent", script: "for f in /sys/fs/cgroup/*/release_agent /sys/fs/cgroup/release_agent; do echo /tmp/" + mark + " > $f && exit 0; done; exit 1"},
		// Devices.
		{name: "mknod block", script: "mknod /tmp/sda b 8 0"},
		{name: "mknod mem", script: "mknod /tmp/mem c 1 1"},
		{name: "mknod in /dev/shm", script: "mknod /dev/shm/sda b 8 0"},
		{name: "read /dev/mem", script: "test $(head -c 16 /dev/mem | wc -c) -gt 0"},
		{name: "read /dev/kmsg", script: "test $(timeout 2 head -c 16 /dev/kmsg | wc -c) -gt 0"},
		{name: "read a disk", script: "for d in /dev/sda /dev/vda /dev/nvme0n1 /dev/xvda; do test $(head -c 16 $d 2>/dev/null | wc -c) -gt 0 && exit 0; done; exit 1"},
		// Mounts and namespaces.
		{name: "mount tmpfs", script: "mkdir -p /tmp/m && mount -t tmpfs none /tmp/m"},
		{name: "mount tmpfs on /mnt", script: "mount -t tmpfs none /mnt"},
		{name: "bind /", script: "mkdir -p /tmp/b && mount --bind / /tmp/b && touch /tmp/b/" + mark},
		{name: "remount / rw", script: "mount -o remount,rw / && touch /" + mark},
		{name: "unshare -m", script: "unshare -m true"},
		{name: "unshare -U", script: "unshare -U true"},
		{name: "unshare -Urm", script: "unshare -Urm sh -c 'mount -t tmpfs none /tmp'"},
		{name: "unshare -p", script: "unshare -pf true"},
		{name: "nsenter init", script: "nsenter -t 1 -m -u -i -n -p true"},
		// gVisor's own tun and fuse devices (absent under runc).
		{name: "tun", script: py("import fcntl, os, struct, sys\nfd = os.open(\"/dev/net/tun\", os.O_RDWR)\n" +
			"fcntl.ioctl(fd, 0x400454ca, struct.pack(\"16sH\", b\"evil0\", 0x0002))\nsys.exit(0)")},
		{name: "fuse mount", script: "mkdir -p /tmp/f && " + py("import ctypes, os, sys\nlibc = ctypes.CDLL(None, use_errno=True)\n"+
			"fd = os.open(\"/dev/fuse\", os.O_RDWR)\nopts = (\"fd=%d,rootmode=40000,user_id=0,group_id=0\" % fd).encode()\n"+
			"r = libc.mount(b\"fuse\", b\"/tmp/f\", b\"fuse\", 0, opts)\nprint(r, ctypes.get_errno())\nsys.exit(0 if r == 0 else 1)")},
		// Raw sockets.
		{name: "AF_PACKET", script: py("import socket\nsocket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))")},
		{name: "raw ICMP", script: py("import socket\nsocket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)")},
		// Host files through procfs.
		{name: "/proc/1/root", script: "cat /proc/1/root" + secret},
		{name: "/proc/self/root", script: "cat /proc/self/root" + secret},
		{name: "/proc/*/root", script: "rc=1; for p in /proc/[0-9]* /proc/self /proc/thread-self; do cat $p/root" + secret + " 2>/dev/null && rc=0; cat $p/cwd" + secret + " 2>/dev/null && rc=0; done; exit $rc"},
		{name: "/proc/*/root/..", script: "rc=1; for p in /proc/[0-9]*; do cat $p/root/../../../.." + secret + " 2>/dev/null && rc=0; done; exit $rc"},
		// init.
		{name: "ptrace init", script: py("import ctypes, sys\nlibc = ctypes.CDLL(None, use_errno=True)\n" +
			"r = libc.ptrace(16, 1, 0, 0)\nprint(r, ctypes.get_errno())\nsys.exit(0 if r == 0 else 1)")},
		{name: "ptrace seize init", script: py("import ctypes, sys\nlibc = ctypes.CDLL(None, use_errno=True)\n" +
			"r = libc.ptrace(0x4206, 1, 0, 0)\nprint(r, ctypes.get_errno())\nsys.exit(0 if r == 0 else 1)")},
		{name: "init memory", script: py("import sys\nm = open(\"/proc/1/maps\").readline()\nlo = int(m.split(\"-\")[0], 16)\n" +
			"f = open(\"/proc/1/mem\", \"rb\")\nf.seek(lo)\nsys.exit(0 if f.read(16) else 1)")},
		{name: "write init", script: "echo x > /.airlock/airlock-init"},
		{name: "truncate init", script: ": > /.airlock/airlock-init"},
		{name: "remove init", script: "rm -f /.airlock/airlock-init && ! test -e /.airlock/airlock-init"},
		{name: "move init", script: "mv /.airlock/airlock-init /tmp/init"},
		{name: "remount init rw", script: "mount -o remount,rw,bind /.airlock/airlock-init && echo x > /.airlock/airlock-init"},
		// init's control socket (runsc: a host socket init dials, its directory init's alone).
		{name: "list init's control directory", script: "ls -a /.airlock/ctl | grep -q s"},
		{name: "connect to init's control socket", script: py("import socket\ns = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\ns.connect(\"/.airlock/ctl/s\")")},
		{name: "replace init's control socket", script: "rm -rf /.airlock/ctl/s && mkdir /.airlock/ctl/s"},
		{name: "write /proc/1/exe", script: py("open(\"/proc/1/exe\", \"r+b\").write(b\"x\")")},
		{name: "write a host binary via /proc/self/exe", script: "sh -c 'echo x >> /proc/$$/exe'"},
	}
}

// hostState is host-side state an escape would change.
func hostState(t *testing.T, initPath string) map[string]string {
	t.Helper()
	s := map[string]string{}
	files := []string{"/proc/sys/kernel/core_pattern", "/sys/kernel/rcu_expedited"}
	for _, glob := range []string{"/sys/fs/cgroup/*/release_agent", "/sys/fs/cgroup/*/notify_on_release", "/sys/fs/cgroup/release_agent"} {
		m, _ := filepath.Glob(glob)
		files = append(files, m...)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			s[f] = "error: " + err.Error()
			continue
		}
		s[f] = string(b)
	}
	for _, p := range []string{initPath, "/bin/sh", "/usr/bin/python3"} {
		s["binary "+p] = fileHash(t, p)
	}
	return s
}

func fileHash(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// checkLeftovers fails t if d still holds host resources.
func checkLeftovers(t *testing.T, d *container.Driver) {
	t.Helper()
	if left := settled(d.Leftovers); len(left) > 0 {
		t.Errorf("leaked after teardown: %s", strings.Join(left, "; "))
	}
}

// settled is what leftovers lists once teardown, which may lag Destroy briefly, had a second.
func settled(leftovers func() []string) []string {
	left := leftovers()
	for i := 0; i < 50 && len(left) > 0; i++ {
		time.Sleep(20 * time.Millisecond)
		left = leftovers()
	}
	return left
}

func TestEscape(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range []string{sandbox.RuntimeRunc, sandbox.RuntimeRunsc} {
		t.Run(rt, func(t *testing.T) {
			d := newDriverWith(t, rt, nil)
			// Registered first, so it runs after every sandbox of the test is destroyed.
			t.Cleanup(func() { checkLeftovers(t, d) })

			dir := t.TempDir()
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			secret := filepath.Join(dir, "secret")
			if err := os.WriteFile(secret, []byte(secretValue), 0o644); err != nil {
				t.Fatal(err)
			}
			mark := "airlock-escape-" + sandbox.NewID("")
			rcu := "1"
			if b, _ := os.ReadFile("/sys/kernel/rcu_expedited"); strings.TrimSpace(string(b)) == "1" {
				rcu = "0"
			}
			before := hostState(t, self)

			h := &drivertest.Harness{D: &pinned{d, rt}}
			sbs := map[string]driver.Sandbox{}
			for _, user := range []string{sandbox.UserRoot, sandbox.UserAgent} {
				sbs[user] = h.New(t, sandbox.Spec{User: user})
			}
			for _, e := range escapes(secret, mark, rcu) {
				users := e.users
				if len(users) == 0 {
					users = []string{sandbox.UserRoot, sandbox.UserAgent}
				}
				for _, user := range users {
					t.Run(e.name+"/"+user, func(t *testing.T) {
						res := drivertest.Exec(t, sbs[user], 20*time.Second, e.script)
						if res.ExitCode == 0 {
							t.Errorf("ESCAPE SUCCEEDED on %s as %s: %q\nstdout %q\nstderr %q", rt, user, e.script, res.Stdout, res.Stderr)
						} else {
							t.Logf("refused: exit %d stderr %q stdout %q", res.ExitCode, lastLine(res.Stderr), lastLine(res.Stdout))
						}
						if strings.Contains(res.Stdout+res.Stderr, secretValue) {
							t.Errorf("host secret leaked: %q %q", res.Stdout, res.Stderr)
						}
					})
				}
			}

			for _, user := range []string{sandbox.UserRoot, sandbox.UserAgent} {
				sb := sbs[user]
				t.Run("proc root is the sandbox's/"+user, func(t *testing.T) { sandboxRootOnly(t, sb) })
				t.Run("dev/"+user, func(t *testing.T) { devNodes(t, sb, rt) })
			}
			if after := hostState(t, self); !mapsEqual(before, after) {
				for k, v := range before {
					if after[k] != v {
						t.Errorf("host state %s changed: %q → %q", k, v, after[k])
					}
				}
			}
			for _, p := range []string{"/" + mark, "/tmp/" + mark, filepath.Join(dir, mark)} {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("an escape left %s on the host", p)
				}
			}
			if b, err := os.ReadFile(secret); err != nil || string(b) != secretValue {
				t.Errorf("host secret changed: %q, %v", b, err)
			}
		})
	}
}

// sandboxRootOnly checks that /proc/1/root and /proc/self/root show the sandbox's root, not the
// host's.
func sandboxRootOnly(t *testing.T, sb driver.Sandbox) {
	own := drivertest.Exec(t, sb, 10*time.Second, "ls -A /")
	if own.ExitCode != 0 {
		t.Fatalf("ls /: %+v", own)
	}
	hostEnts, err := os.ReadDir("/")
	if err != nil {
		t.Fatal(err)
	}
	var hostOnly []string
	for _, e := range hostEnts {
		if !slices.Contains(strings.Fields(own.Stdout), e.Name()) {
			hostOnly = append(hostOnly, e.Name())
		}
	}
	if len(hostOnly) == 0 {
		t.Fatalf("the sandbox's / lists everything the host's does (%q): cannot tell them apart", own.Stdout)
	}
	for _, p := range []string{"/proc/1/root/", "/proc/self/root/", "/proc/1/cwd/"} {
		res := drivertest.Exec(t, sb, 10*time.Second, "ls -A "+p)
		if res.ExitCode != 0 {
			t.Logf("ls %s refused: %q", p, firstLine(res.Stderr))
			continue
		}
		for _, n := range strings.Fields(res.Stdout) {
			if slices.Contains(hostOnly, n) {
				t.Errorf("ls %s shows the host's /%s: %q", p, n, res.Stdout)
			}
		}
		if p != "/proc/1/cwd/" && res.Stdout != own.Stdout {
			t.Errorf("ls %s = %q, the sandbox's / is %q", p, res.Stdout, own.Stdout)
		}
	}
}

// allowedDev are the entries a sandbox's /dev may have: the pseudo devices, the terminal and
// shared-memory mounts, and the standard links. No disk, memory or kernel-log device.
var allowedDev = []string{"null", "zero", "full", "random", "urandom", "tty", "pts", "shm", "ptmx",
	"fd", "stdin", "stdout", "stderr", "core", "mqueue", "console"}

// sentryDevs are what gVisor's /dev adds: devices of its own kernel (tun and fuse, with /dev/char's
// links to the devices), no host device behind them. Using them is among the escapes (tun,
// fuse), and fails.
var sentryDevs = map[string]string{"/dev/net/tun": "a:c8", "/dev/fuse": "a:e5"}

func devNodes(t *testing.T, sb driver.Sandbox, rt string) {
	allowed := allowedDev
	if rt == sandbox.RuntimeRunsc {
		allowed = append(slices.Clone(allowed), "char", "net", "fuse")
	}
	res := drivertest.Exec(t, sb, 10*time.Second, "ls -A /dev")
	if res.ExitCode != 0 {
		t.Fatalf("ls /dev: %+v", res)
	}
	t.Logf("/dev: %s", strings.Join(strings.Fields(res.Stdout), " "))
	for _, n := range strings.Fields(res.Stdout) {
		if !slices.Contains(allowed, n) {
			t.Errorf("/dev has %s: %q", n, res.Stdout)
		}
	}
	// Every device node is one of the harmless character devices (mem 1:3 null, 1:5 zero, 1:7
	// full, 1:8 random, 1:9 urandom, 5:0 tty, 5:2 ptmx, 136:* pts), or gVisor's own.
	res = drivertest.Exec(t, sb, 10*time.Second, `find /dev -xdev \( -type b -o -type c \) -exec stat -c '%n %F %t:%T' {} + 2>/dev/null; find /dev/pts -type c -exec stat -c '%n %F %t:%T' {} + 2>/dev/null`)
	for _, l := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		if strings.Contains(l, "block") {
			t.Errorf("block device in /dev: %s", l)
		}
		mm := f[len(f)-1]
		switch {
		case slices.Contains([]string{"1:3", "1:5", "1:7", "1:8", "1:9", "5:0", "5:1", "5:2"}, mm):
		case rt == sandbox.RuntimeRunsc && sentryDevs[f[0]] == mm:
		default:
			if !strings.HasPrefix(f[0], "/dev/pts/") {
				t.Errorf("unexpected device %s", l)
			}
		}
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndexByte(s, '\n')+1:]
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
