package drivertest

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/internal/sandbox"
)

func testLoopbackOnly(t *testing.T, h *Harness) {
	// A server on the host's loopback: the sandbox's 127.0.0.1 is its own, so this must not answer.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	sb := h.New(t, sandbox.Spec{})
	if h.Python() {
		// The same three facts, where there may be no /proc: no interface but loopback (where
		// they can be listed), the host's loopback server unreachable, and no route anywhere. A
		// UDP connect only looks the route up: no packet is sent.
		res := h.Exec(t, sb, 10*time.Second, Script{Py: pyInterfaces + fmt.Sprintf(`
print("interfaces", interfaces())
def attempt(what, fn):
    try:
        fn()
        print(what, "reached")
    except (ImportError, AttributeError, OSError) as e:
        print(what, "refused", type(e).__name__)
def tcp():
    import socket
    socket.create_connection(("127.0.0.1", %d), timeout=2)
def udp(family, addr):
    import socket
    s = socket.socket(getattr(socket, family), socket.SOCK_DGRAM)
    try: s.connect(addr)
    finally: s.close()
attempt("host-loopback", tcp)
attempt("route4", lambda: udp("AF_INET", ("203.0.113.9", 9)))
attempt("route6", lambda: udp("AF_INET6", ("2001:db8::9", 9)))
print("done")`, port)})
		out := res.Stdout
		if res.ExitCode != 0 || !strings.HasSuffix(out, "done\n") || strings.Contains(out, "reached") {
			t.Fatalf("loopback only: exit %d\n%s%s", res.ExitCode, out, res.Stderr)
		}
		if ifs, _, _ := strings.Cut(out, "\n"); ifs != "interfaces lo" && ifs != "interfaces none" && ifs != "interfaces unlisted" {
			t.Fatalf("interfaces other than loopback:\n%s", out)
		}
		return
	}
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

// pyInterfaces defines interfaces(), the sandbox's network interfaces, sorted: from the kernel
// (netlink, which a sandbox may be denied; else /proc), "none" if there are none, "unlisted" if
// they cannot be listed at all.
const pyInterfaces = `
def interfaces():
    try:
        import socket
        names = [n for _, n in socket.if_nameindex()]
    except (ImportError, AttributeError, OSError):
        try:
            names = [l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:]]
        except OSError:
            return "unlisted"
    return " ".join(sorted(names)) or "none"
`

// networkRestricted tries, from a restricted sandbox, everything its policy forbids.
const networkRestricted = `
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
`

// testNetworkRestricted: a restricted sandbox with an allowlist reaches nothing else, and not
// even its root can change that. Every packet here ends at airlock's own listeners on the
// sandbox's gateway (the firewall redirects or rejects it inside the sandbox's namespace), so
// nothing is sent to the TEST-NET address dialled: it is not one airlock's DNS answered, so
// even its ports 80 and 443 are refused at connect rather than handed to the proxy.
func testNetworkRestricted(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{User: sandbox.UserRoot, Network: sandbox.Network{
		EgressPolicy: sandbox.EgressRestricted, AllowedDomains: []string{"allowed.test"}}})
	expect(t, h.Exec(t, sb, 10*time.Second, Script{
		Sh: "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort | tr '\n' ' '",
		Py: pyInterfaces + `print(interfaces())`,
	}), 0, "eth0 lo")
	res := h.Exec(t, sb, 20*time.Second, Script{Sh: `python3 -c '` + networkRestricted + `'`, Py: networkRestricted})
	// 203.0.113.9 is no address airlock's DNS answered: refused at connect, whatever the port.
	for _, want := range []string{"http-literal ConnectionRefusedError", "http-denied ConnectionRefusedError", "ssh ConnectionRefusedError",
		"dns-denied gaierror", "raw PermissionError", "netlink PermissionError"} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("want %q in:\n%s%s", want, res.Stdout, res.Stderr)
		}
	}
	if strings.Contains(res.Stdout, "SLOW") {
		t.Errorf("a refusal took more than 3 s (a hang instead of a clear answer):\n%s", res.Stdout)
	}
}
