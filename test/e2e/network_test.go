package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
)

// The network tests (docs/network.md#network-policy) run sandboxes in a daemon inside a test world (networld_test.go)
// and check what got through three ways: the command's output, the sandbox's recorded events,
// and what the world's servers saw.

// probePy is written into sandboxes as /workspace/probe.py: `python3 probe.py CMD ARGS...`
// prints one line, "ok ..." or "fail TYPE: message", and the time it took.
const probePy = `import socket, ssl, struct, sys, time

def udp(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(1)
    s.sendto(b"probe", (host, int(port)))
    data, _ = s.recvfrom(100)
    return "reply " + data.decode(errors="replace")

def icmp(host):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
    s.settimeout(1)
    s.sendto(struct.pack(">BBHHH", 8, 0, 0, 1, 1) + b"probe", (host, 0))
    s.recvfrom(100)
    return "reply"

def raw():
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    return "opened"

def packet():
    socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    return "opened"

def v6(host, port):
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect((host, int(port)))
    return "connected"

def resolve(name):
    return "resolved " + " ".join(sorted({a[4][0] for a in socket.getaddrinfo(name, 80, socket.AF_INET)}))

def dns(server, name):
    q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    s.sendto(q, (server, 53))
    r, _ = s.recvfrom(4096)
    return "rcode=%d answers=%d" % (r[3] & 15, struct.unpack(">H", r[6:8])[0])

def connect_sni(proxy, target, sni):
    h, p = proxy.rsplit(":", 1)
    s = socket.create_connection((h, int(p)), timeout=5)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
    head = s.recv(4096).decode(errors="replace").split("\r\n")[0]
    if not head.startswith("HTTP/1.1 200"):
        return "refused " + head
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    t = ctx.wrap_socket(s, server_hostname=sni)
    t.sendall(b"GET / HTTP/1.1\r\nHost: " + sni.encode() + b"\r\nConnection: close\r\n\r\n")
    return "tls " + t.recv(4096).decode(errors="replace").replace("\r\n", " | ")

start = time.monotonic()
try:
    out = "ok " + globals()[sys.argv[1].replace("-", "_")](*sys.argv[2:])
except Exception as e:
    out = "fail %s: %s" % (type(e).__name__, e)
print("%s (%.2fs)" % (out, time.monotonic() - start))
`

// curl is a curl command line that prints the HTTP status last ("code=403"; 000 when there
// was no answer). curl uses the sandbox's HTTP_PROXY unless told --noproxy '*'.
func curl(args string) string {
	return `curl -sS -m 5 -w '\ncode=%{http_code}\n' ` + args
}

var codeRE = regexp.MustCompile(`code=(\d{3})\s*$`)

// httpCode returns the status curl printed.
func httpCode(r api.ExecResult) string {
	if m := codeRE.FindStringSubmatch(r.Stdout); m != nil {
		return m[1]
	}
	return ""
}

func show(r api.ExecResult) string {
	return fmt.Sprintf("exit %d after %d ms\nstdout:\n%s\nstderr:\n%s", r.ExitCode, r.DurationMs, r.Stdout, r.Stderr)
}

// restricted is a restricted network allowing domains.
func restricted(domains ...string) api.Network {
	return api.Network{EgressPolicy: api.EgressRestricted, AllowedDomains: domains}
}

// sandbox creates a small sandbox with network n, terminated at the end of the test, with the
// test CA in /workspace/ca.pem and the probe in /workspace/probe.py.
func (w *world) sandbox(t *testing.T, n api.Network, edit ...func(*api.Spec)) string {
	t.Helper()
	spec := smallSpec()
	spec.Network = n
	for _, e := range edit {
		e(&spec)
	}
	sb, err := w.c.Create(bg(), spec)
	if err != nil {
		t.Fatalf("create a sandbox with network %+v: %v", n, err)
	}
	w.track(t, sb.ID)
	for path, b := range map[string][]byte{"/workspace/ca.pem": w.caPEM, "/workspace/probe.py": []byte(probePy)} {
		if _, err := w.c.WriteFile(bg(), sb.ID, path, bytes.NewReader(b), 0o644); err != nil {
			t.Fatalf("write %s: %v", path, err)
		}
	}
	return sb.ID
}

func asRoot(s *api.Spec) { s.User = api.UserRoot }

// sh runs script in sandbox id. It notes where the sandbox's events stood before, so that
// waitEvent looks only at the events since.
func (w *world) sh(t *testing.T, id, script string) api.ExecResult {
	t.Helper()
	cur := w.cursor(t, id)
	r, err := w.c.Exec(bg(), id, api.ExecRequest{Command: api.Shell(script), Timeout: 60})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	w.mu.Lock()
	w.cursors[r.ExecutionID] = cur
	w.mu.Unlock()
	return r
}

// cursor returns the position of sandbox id's last recorded event.
func (w *world) cursor(t *testing.T, id string) int64 {
	t.Helper()
	var after int64
	for {
		p, err := w.c.Events(bg(), id, client.EventOptions{After: after, Limit: 1000})
		if err != nil {
			t.Fatalf("events of %s: %v", id, err)
		}
		if len(p.Events) == 0 {
			return after
		}
		after = p.Next
	}
}

// evMatch selects events; empty fields match anything.
type evMatch struct {
	Type, Proto, Name, Decision, Rule, Addr string
}

func (m evMatch) match(e api.Event) bool {
	field := func(k string) string {
		if v, ok := e.Data[k]; ok {
			return fmt.Sprint(v)
		}
		return ""
	}
	for _, c := range [][2]string{{m.Proto, field("proto")}, {m.Name, field("name")}, {m.Decision, field("decision")}, {m.Rule, field("rule")}, {m.Addr, field("address")}} {
		if c[0] != "" && c[0] != c[1] {
			return false
		}
	}
	return m.Type == "" || m.Type == e.Type
}

func (m evMatch) String() string {
	return fmt.Sprintf("%s proto=%s name=%s decision=%s rule=%s address=%s", m.Type, m.Proto, m.Name, m.Decision, m.Rule, m.Addr)
}

// waitEvent polls the network events of sandbox id recorded since exec execID began ("": all)
// for up to 2 s until one matches m, and returns it. Events are not selected by their
// executionId: allowed connections are reported when they end, and the test checks the id
// itself where it matters.
func (w *world) waitEvent(t *testing.T, id, execID string, m evMatch) api.Event {
	t.Helper()
	w.mu.Lock()
	after := w.cursors[execID]
	w.mu.Unlock()
	deadline := time.Now().Add(2 * time.Second)
	for {
		p, err := w.c.Events(bg(), id, client.EventOptions{Type: "network.", After: after})
		if err != nil {
			t.Fatalf("events of %s: %v", id, err)
		}
		for _, e := range p.Events {
			if m.match(e) {
				return e
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("no event %v since exec %q began, within 2 s; the sandbox's network events since:\n%s", m, execID, eventsText(p.Events))
			return api.Event{}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func eventsText(evs []api.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "  %s %s %s %v\n", e.Type, e.ExecutionID, e.Message, e.Data)
	}
	return b.String()
}

// evNum reads a number of an event's data.
func evNum(e api.Event, k string) float64 {
	f, _ := e.Data[k].(float64)
	return f
}

// TestNetworkAllowed reaches an allowed name four ways: through the explicit proxy over HTTP
// and over HTTPS (CONNECT), and ignoring the proxy variables (transparent HTTP and TLS).
func TestNetworkAllowed(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.sandbox(t, restricted("allowed.test"))
	for _, c := range []struct {
		name, args, proto, body string
	}{
		{"proxy http", "http://allowed.test/", "http", "server=allowed host=allowed.test tls=no"},
		{"proxy https", "--cacert /workspace/ca.pem https://allowed.test/", "connect", "server=allowed-tls host=allowed.test tls=yes"},
		{"transparent http", "--noproxy '*' http://allowed.test/", "http", "server=allowed host=allowed.test tls=no"},
		{"transparent https", "--noproxy '*' --cacert /workspace/ca.pem https://allowed.test/", "tls", "server=allowed-tls host=allowed.test tls=yes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := w.sh(t, id, curl(c.args))
			if r.ExitCode != 0 || httpCode(r) != "200" || !strings.Contains(r.Stdout, c.body) {
				t.Fatalf("curl %s: want 200 and %q:\n%s", c.args, c.body, show(r))
			}
			e := w.waitEvent(t, id, r.ExecutionID, evMatch{Type: api.EventNetworkConnect, Proto: c.proto, Name: "allowed.test", Decision: "allow"})
			if e.Data["address"] != ipAllowed || e.Data["rule"] != "allowedDomains" || evNum(e, "bytesIn") <= 0 {
				t.Errorf("event %+v: want address %s, rule allowedDomains, bytesIn > 0", e, ipAllowed)
			}
			if e.ExecutionID != r.ExecutionID {
				t.Errorf("event %s %q has executionId %q, want %s, the exec that made the connection", e.Type, e.Message, e.ExecutionID, r.ExecutionID)
			}
			if c.proto != "http" && evNum(e, "bytesOut") <= 0 {
				t.Errorf("event %+v: a TLS tunnel sends bytes, want bytesOut > 0", e)
			}
		})
	}
	if n := len(w.hitsOf(srvAllowed)) + len(w.hitsOf(srvAllowedTLS)); n != 4 {
		t.Errorf("the allowed servers got %d requests, want 4: %+v %+v", n, w.hitsOf(srvAllowed), w.hitsOf(srvAllowedTLS))
	}
	// A connection is reported when it ends, which is often after the exec that opened it has
	// ended too (the sink races the exec's end): it still belongs to that exec, the one
	// running when the connection began.
	t.Run("reported after its exec", func(t *testing.T) {
		r := w.sh(t, id, "curl -sS -m 10 -o /workspace/slow.out 'http://allowed.test/?delay=300' >/dev/null 2>&1")
		if r.ExitCode != 0 {
			t.Fatalf("start a slow download:\n%s", show(r))
		}
		e := w.waitEvent(t, id, r.ExecutionID, evMatch{Type: api.EventNetworkConnect, Proto: "http", Name: "allowed.test", Decision: "allow"})
		if e.ExecutionID != r.ExecutionID {
			t.Errorf("event %s %q has executionId %q, want %s, the exec that made the connection", e.Type, e.Message, e.ExecutionID, r.ExecutionID)
		}
	})
}

// TestNetworkDenied asks for a name off the list every way; nothing reaches it, and the
// refusals are quick and say why.
func TestNetworkDenied(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.sandbox(t, restricted("allowed.test"))

	r := w.sh(t, id, curl("http://evil.test/"))
	if httpCode(r) != "403" || !strings.Contains(r.Stdout, "not_in_allowlist") {
		t.Errorf("proxy http to a denied name: want 403 naming not_in_allowlist:\n%s", show(r))
	}
	w.waitEvent(t, id, r.ExecutionID, evMatch{Type: api.EventNetworkConnect, Proto: "http", Name: "evil.test", Decision: "deny", Rule: "not_in_allowlist"})

	r = w.sh(t, id, curl("-k https://evil.test/"))
	if r.ExitCode == 0 || strings.Contains(r.Stdout, "server=") {
		t.Errorf("proxy https (CONNECT) to a denied name succeeded:\n%s", show(r))
	}
	w.waitEvent(t, id, r.ExecutionID, evMatch{Type: api.EventNetworkConnect, Proto: "connect", Name: "evil.test", Decision: "deny", Rule: "not_in_allowlist"})

	// The sandbox's DNS says NXDOMAIN; with the address given by hand, the firewall refuses the
	// connection (airlock's DNS never answered that address).
	r = w.sh(t, id, curl("--noproxy '*' -k https://evil.test/"))
	if r.ExitCode != 6 || r.DurationMs > 3000 {
		t.Errorf("transparent https to a denied name: want a quick resolve failure (exit 6):\n%s", show(r))
	}
	w.waitEvent(t, id, r.ExecutionID, evMatch{Type: api.EventNetworkDNS, Name: "evil.test", Decision: "deny", Rule: "not_in_allowlist"})
	r = w.sh(t, id, curl("--noproxy '*' -k --resolve evil.test:443:"+ipEvil+" https://evil.test/"))
	if r.ExitCode != 7 || r.DurationMs > 3000 || strings.Contains(r.Stdout, "server=") {
		t.Errorf("transparent https to a denied name's address: want a refused connection (exit 7) within 3 s:\n%s", show(r))
	}
	w.waitEvent(t, id, r.ExecutionID, evMatch{Type: api.EventNetworkConnect, Proto: "tcp", Decision: "deny", Rule: "ip_literal"})

	w.noHits(t, srvEvil, srvEvilTLS)
	for _, q := range w.dnsQueries() {
		if q == "evil.test" {
			t.Errorf("airlock asked the world's DNS for a denied name")
		}
	}
}

// TestNetworkIPLiteral connects to an address instead of a name: restricted sandboxes name
// hosts, so every way is refused: by the proxy when asked through it, at connect otherwise.
func TestNetworkIPLiteral(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.sandbox(t, restricted("allowed.test"))
	r := w.sh(t, id, curl("http://"+ipAllowed+"/"))
	if httpCode(r) != "403" || !strings.Contains(r.Stdout, "ip_literal") {
		t.Errorf("proxy http to an address: want 403 naming ip_literal:\n%s", show(r))
	}
	w.waitEvent(t, id, r.ExecutionID, evMatch{Type: api.EventNetworkConnect, Proto: "http", Decision: "deny", Rule: "ip_literal"})
	r = w.sh(t, id, curl("-k https://"+ipAllowed+"/"))
	if r.ExitCode == 0 || strings.Contains(r.Stdout, "server=") {
		t.Errorf("proxy https to an address succeeded:\n%s", show(r))
	}
	w.waitEvent(t, id, r.ExecutionID, evMatch{Type: api.EventNetworkConnect, Proto: "connect", Decision: "deny"})
	// Without the proxy, the address is one airlock's DNS never answered: refused at connect.
	for _, args := range []string{"--noproxy '*' http://" + ipAllowed + "/", "--noproxy '*' -k https://" + ipAllowed + "/"} {
		r := w.sh(t, id, curl(args))
		if r.ExitCode != 7 || strings.Contains(r.Stdout, "server=") {
			t.Errorf("curl %s: want a refused connection (exit 7):\n%s", args, show(r))
		}
		w.waitEvent(t, id, r.ExecutionID, evMatch{Type: api.EventNetworkConnect, Proto: "tcp", Decision: "deny", Rule: "ip_literal"})
	}
	w.noHits(t, srvAllowed, srvAllowedTLS)
}

// TestNetworkDNS checks airlock's DNS: allowed names resolve, others do not, and names shaped
// for tunnelling never leave the hut, even below an allowed wildcard.
func TestNetworkDNS(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.sandbox(t, restricted("allowed.test", "*.allowed.test"))

	if r := w.sh(t, id, "getent hosts allowed.test"); r.ExitCode != 0 || !strings.Contains(r.Stdout, ipAllowed) {
		t.Errorf("getent hosts allowed.test: want %s:\n%s", ipAllowed, show(r))
	}
	if r := w.sh(t, id, "getent hosts evil.test"); r.ExitCode != 2 {
		t.Errorf("getent hosts evil.test: want exit 2 (not found):\n%s", show(r))
	}
	if r := w.sh(t, id, "getent hosts internal.test"); r.ExitCode != 2 {
		t.Errorf("getent hosts internal.test (trusted, but not allowed here): want exit 2:\n%s", show(r))
	}
	// A wildcard name the world does not know is asked upstream: the control for the
	// tunnelling names below, which must not be.
	if r := w.sh(t, id, "python3 /workspace/probe.py resolve nothere.allowed.test"); !strings.HasPrefix(r.Stdout, "fail") {
		t.Errorf("nothere.allowed.test resolved:\n%s", show(r))
	}
	long := strings.Repeat("x", 50) + ".allowed.test"
	deep := "a.b.c.d.e.f.g.h.allowed.test" // 10 labels
	for _, name := range []string{long, deep} {
		r := w.sh(t, id, "python3 /workspace/probe.py resolve "+name)
		if !strings.HasPrefix(r.Stdout, "fail gaierror") {
			t.Errorf("resolve %s: want a failure:\n%s", name, show(r))
		}
		w.waitEvent(t, id, r.ExecutionID, evMatch{Type: api.EventNetworkDNS, Name: name, Decision: "deny", Rule: "invalid_name"})
	}
	// Queries to another server are answered by airlock all the same.
	if r := w.sh(t, id, "python3 /workspace/probe.py dns "+ipDNS+" evil.test"); !strings.HasPrefix(r.Stdout, "ok rcode=3 answers=0") {
		t.Errorf("a query for evil.test sent to %s: want airlock's NXDOMAIN:\n%s", ipDNS, show(r))
	}
	if r := w.sh(t, id, "python3 /workspace/probe.py dns "+ipDNS+" www.allowed.test"); !strings.HasPrefix(r.Stdout, "ok rcode=0 answers=1") {
		t.Errorf("a query for www.allowed.test sent to %s: want an answer:\n%s", ipDNS, show(r))
	}

	qs := w.dnsQueries()
	if !slices.Contains(qs, "nothere.allowed.test") {
		t.Errorf("the world's DNS never saw nothere.allowed.test; it saw %v", qs)
	}
	for _, q := range qs {
		if strings.Contains(q, "xxxxxxxxxx") || strings.HasPrefix(q, "a.b.c.") || q == "evil.test" || q == "internal.test" {
			t.Errorf("the world's DNS was asked %q", q)
		}
	}
}

// TestNetworkRebinding allows names that resolve to private, metadata and loopback addresses:
// neither DNS nor the proxy lets the sandbox reach them. A trusted host is the exception.
func TestNetworkRebinding(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.sandbox(t, restricted("rebind.test", "meta.test", "loop.test", "internal.test"))
	for _, name := range []string{"rebind.test", "meta.test", "loop.test"} {
		t.Run(name, func(t *testing.T) {
			r := w.sh(t, id, curl("http://"+name+"/"))
			if httpCode(r) != "403" || strings.Contains(r.Stdout, "server=") {
				t.Errorf("proxy http to %s: want 403:\n%s", name, show(r))
			}
			w.waitEvent(t, id, r.ExecutionID, evMatch{Type: api.EventNetworkConnect, Name: name, Decision: "deny"})
			if r := w.sh(t, id, "getent hosts "+name); r.ExitCode == 0 {
				t.Errorf("getent hosts %s resolved:\n%s", name, show(r))
			}
			r = w.sh(t, id, curl("--noproxy '*' http://"+name+"/"))
			if r.ExitCode != 6 {
				t.Errorf("transparent http to %s: want a resolve failure (exit 6):\n%s", name, show(r))
			}
			w.waitEvent(t, id, r.ExecutionID, evMatch{Type: api.EventNetworkDNS, Name: name, Decision: "deny"})
			// With a public address forced, one airlock's DNS did not answer: refused at connect.
			r = w.sh(t, id, curl("--noproxy '*' --resolve "+name+":80:"+ipAllowed+" http://"+name+"/"))
			if r.ExitCode != 7 || strings.Contains(r.Stdout, "server=") {
				t.Errorf("transparent http to %s at a forced public address: want a refused connection (exit 7):\n%s", name, show(r))
			}
		})
	}
	r := w.sh(t, id, curl("http://internal.test/"))
	if r.ExitCode != 0 || !strings.Contains(r.Stdout, "server=internal") {
		t.Errorf("the operator's trusted internal.test, allowed: want server=internal:\n%s", show(r))
	}
	w.noHits(t, srvPrivate, srvMetadata, srvLoopback, srvAllowed)
}

// TestNetworkMetadata aims at the metadata address directly, in every mode, blockLocalNetwork
// off included: it is never reachable.
func TestNetworkMetadata(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	no := false
	for _, c := range []struct {
		name string
		n    api.Network
	}{
		{"restricted", restricted("allowed.test")},
		{"open", api.Network{EgressPolicy: api.EgressOpen}},
		{"open, blockLocalNetwork false", api.Network{EgressPolicy: api.EgressOpen, BlockLocalNetwork: &no}},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := w.sandbox(t, c.n)
			for _, args := range []string{
				"http://" + ipMetadata + "/latest/meta-data/",
				"--noproxy '*' http://" + ipMetadata + "/latest/meta-data/",
				"--noproxy '*' http://" + ipMetadata + ":8080/",
			} {
				r := w.sh(t, id, curl(args))
				if httpCode(r) == "200" || strings.Contains(r.Stdout, "server=") {
					t.Errorf("curl %s reached the metadata address:\n%s", args, show(r))
				}
			}
			if c.n.BlockLocalNetwork != nil {
				// The control: private addresses are open in this mode, the metadata one is not.
				r := w.sh(t, id, curl("--noproxy '*' http://"+ipInternal+"/"))
				if !strings.Contains(r.Stdout, "server=internal") {
					t.Errorf("open egress without blockLocalNetwork: a private address should answer:\n%s", show(r))
				}
				w.waitEvent(t, id, "", evMatch{Type: api.EventNetworkConnect, Decision: "deny", Rule: "metadata"})
			}
		})
	}
	w.noHits(t, srvMetadata)
}

// TestNetworkNonTCP tries what the proxy does not carry: UDP, ICMP, raw sockets, IPv6 — as the
// sandbox's root.
func TestNetworkNonTCP(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.sandbox(t, restricted("allowed.test", "evil.test"), asRoot)
	for _, c := range []struct {
		name, args string
		want       string // prefix of the probe's output
		fast       bool   // must fail within 3 s
	}{
		{"udp to a public server", "udp " + ipEvil + " 123", "fail", false},
		{"udp to the DNS server's other port", "udp " + ipDNS + " 9999", "fail", false},
		{"icmp echo", "icmp " + ipAllowed, "fail", false},
		{"raw socket", "raw", "fail PermissionError", true},
		{"packet socket", "packet", "fail PermissionError", true},
		{"ipv6", "v6 2001:db8::1 443", "fail", true},
	} {
		r := w.sh(t, id, "python3 /workspace/probe.py "+c.args)
		if !strings.HasPrefix(r.Stdout, c.want) || (c.fast && r.DurationMs > 3000) {
			t.Errorf("%s: want %q%s:\n%s", c.name, c.want, map[bool]string{true: " within 3 s"}[c.fast], show(r))
		}
	}
	if r := w.sh(t, id, "command -v ping && ping -c1 -W1 "+ipAllowed); r.ExitCode == 0 {
		t.Errorf("ping reached %s:\n%s", ipAllowed, show(r))
	}
	w.noHits(t, srvUDP)
}

// TestNetworkBypass forges where a request goes: a Host header, a TLS server name or an address
// that disagree with the name the sandbox may reach. The firewall lets through only addresses
// airlock's DNS answered; the proxy behind it goes by the name it checks and connects only to
// its own resolution of it.
func TestNetworkBypass(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.sandbox(t, restricted("allowed.test", "bulk.test"))

	r := w.sh(t, id, curl("-H 'Host: evil.test' http://allowed.test/"))
	if httpCode(r) != "403" || !strings.Contains(r.Stdout, "host_mismatch") {
		t.Errorf("explicit proxy, URL allowed.test, Host evil.test: want 403 host_mismatch:\n%s", show(r))
	}
	w.waitEvent(t, id, r.ExecutionID, evMatch{Type: api.EventNetworkConnect, Decision: "deny", Rule: "host_mismatch"})

	r = w.sh(t, id, curl("--noproxy '*' -H 'Host: evil.test' http://allowed.test/"))
	if httpCode(r) != "403" || !strings.Contains(r.Stdout, "not_in_allowlist") {
		t.Errorf("transparent, to allowed.test's address with Host evil.test: want 403 not_in_allowlist:\n%s", show(r))
	}

	r = w.sh(t, id, curl("-k --proxy \"$HTTP_PROXY\" --connect-to evil.test:443:allowed.test:443 https://evil.test/"))
	if r.ExitCode == 0 || strings.Contains(r.Stdout, "server=") {
		t.Errorf("CONNECT allowed.test:443, then TLS for evil.test: want a failure:\n%s", show(r))
	}
	w.waitEvent(t, id, r.ExecutionID, evMatch{Type: api.EventNetworkConnect, Proto: "connect", Decision: "deny", Rule: "sni_mismatch"})
	r = w.sh(t, id, `python3 /workspace/probe.py connect-sni "${HTTP_PROXY#http://}" allowed.test:443 evil.test`)
	if !strings.HasPrefix(r.Stdout, "fail") {
		t.Errorf("CONNECT allowed.test:443, then TLS for evil.test (python): want a failure:\n%s", show(r))
	}

	r = w.sh(t, id, curl("-k --noproxy '*' --resolve evil.test:443:"+ipAllowed+" https://evil.test/"))
	if r.ExitCode == 0 || strings.Contains(r.Stdout, "server=") {
		t.Errorf("transparent TLS to allowed.test's address with SNI evil.test: want a failure:\n%s", show(r))
	}
	w.waitEvent(t, id, r.ExecutionID, evMatch{Type: api.EventNetworkConnect, Proto: "tls", Name: "evil.test", Decision: "deny"})

	// An allowed name aimed at evil's address: refused at connect, airlock's DNS never gave
	// that address out.
	r = w.sh(t, id, curl("--noproxy '*' --resolve allowed.test:80:"+ipEvil+" http://allowed.test/"))
	if r.ExitCode != 7 || strings.Contains(r.Stdout, "server=") {
		t.Errorf("transparent http to allowed.test at evil's address: want a refused connection (exit 7):\n%s", show(r))
	}
	w.waitEvent(t, id, r.ExecutionID, evMatch{Type: api.EventNetworkConnect, Proto: "tcp", Decision: "deny", Rule: "ip_literal"})
	// Aimed at another allowed name's address (one the DNS answered), it reaches allowed's
	// server: the proxy connects to what it resolves, never to where the sandbox was connecting.
	if r := w.sh(t, id, "getent hosts bulk.test"); !strings.Contains(r.Stdout, ipBulk) {
		t.Fatalf("getent hosts bulk.test: want %s:\n%s", ipBulk, show(r))
	}
	for _, args := range []string{
		"--noproxy '*' --resolve allowed.test:80:" + ipBulk + " http://allowed.test/",
		"--noproxy '*' --cacert /workspace/ca.pem --resolve allowed.test:443:" + ipBulk + " https://allowed.test/",
	} {
		r = w.sh(t, id, curl(args))
		if httpCode(r) != "200" || !strings.Contains(r.Stdout, "server=allowed") {
			t.Errorf("curl %s: want allowed's server:\n%s", args, show(r))
		}
	}
	w.noHits(t, srvEvil, srvEvilTLS, srvBulk)
	if h := w.hitsOf(srvAllowedTLS); len(h) != 1 {
		t.Errorf("allowed's HTTPS server got %d requests, want 1 (SNI evil.test must not reach it): %+v", len(h), h)
	}
}

// TestNetworkWildcard checks what "*.allowed.test" covers: names below it, not the name itself
// nor names that merely contain it.
func TestNetworkWildcard(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.sandbox(t, restricted("*.allowed.test"))
	for _, c := range []struct {
		name  string
		allow bool
	}{
		{"www.allowed.test", true},
		{"deep.www.allowed.test", true},
		{"allowed.test", false},
		{"evil-allowed.test", false},
		{"allowed.test.evil.test", false},
	} {
		want := "403"
		if c.allow {
			want = "200"
		}
		r := w.sh(t, id, curl("http://"+c.name+"/"))
		if httpCode(r) != want || c.allow && !strings.Contains(r.Stdout, "server=allowed host="+c.name) {
			t.Errorf("curl http://%s/: want %s:\n%s", c.name, want, show(r))
		}
		if r := w.sh(t, id, "getent hosts "+c.name); (r.ExitCode == 0) != c.allow {
			t.Errorf("getent hosts %s: want resolved=%v:\n%s", c.name, c.allow, show(r))
		}
	}
	w.noHits(t, srvEvil)
}

// TestNetworkLiveUpdate changes the policy of a running sandbox: each change is in force when
// the call returns, and recorded.
func TestNetworkLiveUpdate(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.sandbox(t, restricted("allowed.test"))
	reach := func(name string) api.ExecResult { return w.sh(t, id, curl("http://"+name+"/")) }
	expect := func(stage string, allowed, evil string) {
		t.Helper()
		for name, want := range map[string]string{"allowed.test": allowed, "evil.test": evil} {
			r := reach(name)
			if got := httpCode(r); got != want {
				t.Errorf("%s: %s answered %s, want %s:\n%s", stage, name, got, want, show(r))
			}
			r = w.sh(t, id, curl("--noproxy '*' http://"+name+"/"))
			if got := httpCode(r); (want == "200") != (got == "200") {
				t.Errorf("%s: transparent %s answered %s, want %s:\n%s", stage, name, got, want, show(r))
			}
		}
	}
	expect("at create", "200", "403")
	update := func(n api.Network) {
		t.Helper()
		sb, err := w.c.UpdateNetwork(bg(), id, n)
		if err != nil {
			t.Fatalf("update the network to %+v: %v", n, err)
		}
		if sb.Network.EgressPolicy != n.EgressPolicy || fmt.Sprint(sb.Network.AllowedDomains) != fmt.Sprint(n.AllowedDomains) {
			t.Errorf("update answered network %+v, want %+v", sb.Network, n)
		}
	}
	update(restricted("evil.test"))
	expect("after allowing evil.test only", "403", "200")
	update(api.Network{EgressPolicy: api.EgressNone})
	expect("after egress none", "000", "000")
	update(restricted("allowed.test"))
	expect("back to allowed.test", "200", "403")

	if h := w.hitsOf(srvEvil); len(h) != 2 {
		t.Errorf("evil got %d requests, want 2 (proxy and transparent while allowed): %+v", len(h), h)
	}
	p, err := w.c.Events(bg(), id, client.EventOptions{Type: api.EventNetworkPolicy})
	if err != nil {
		t.Fatal(err)
	}
	var policies []string
	for _, e := range p.Events {
		policies = append(policies, fmt.Sprint(e.Data["egressPolicy"]))
	}
	if strings.Join(policies, ",") != "restricted,none,restricted" {
		t.Errorf("network.policy events: %v, want restricted,none,restricted:\n%s", policies, eventsText(p.Events))
	}

	// A sandbox made without a network has none to change.
	none := w.sandbox(t, api.Network{EgressPolicy: api.EgressNone})
	_, err = w.c.UpdateNetwork(bg(), none, restricted("allowed.test"))
	if err == nil || clientErr(t, err).StatusCode != http.StatusConflict {
		t.Errorf("update the network of an egress-none sandbox: %v, want 409", err)
	}
}

// TestNetworkBandwidth downloads through a 20 Mbit/s cap and measures. It is not parallel: on
// a small machine the other tests' CPU use would slow the download below the cap.
func TestNetworkBandwidth(t *testing.T) {
	w := newWorld(t)
	const mbps, size = 20, 8 << 20
	id := w.sandbox(t, restricted("bulk.test"), func(s *api.Spec) { s.Resources.NetworkMbps = mbps })
	r := w.sh(t, id, fmt.Sprintf("curl -sS -m 30 -o /dev/null -w '%%{speed_download} %%{size_download}' 'http://bulk.test/bytes?n=%d'", size))
	var speed float64
	var got int64
	if _, err := fmt.Sscan(r.Stdout, &speed, &got); err != nil || r.ExitCode != 0 || got != size {
		t.Fatalf("download %d bytes: %v\n%s", size, err, show(r))
	}
	rate := speed * 8 / 1e6
	t.Logf("downloaded %d bytes at %.1f Mbit/s (cap %d)", got, rate, mbps)
	if rate > 1.3*mbps || rate < 0.4*mbps {
		t.Errorf("measured %.1f Mbit/s, want between %.0f and %.0f (cap %d Mbit/s)", rate, 0.4*mbps, 1.3*mbps, mbps)
	}
}

// TestNetworkCredentials has the proxy add a secret header: the request arrives with it, and
// the value is nowhere the sandbox can look, nor in what the API shows.
func TestNetworkCredentials(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	value := "Bearer " + randHex(t, 24)
	w.acceptAuth(value)
	for _, c := range []struct {
		name   string
		cred   api.Credential
		secret string
	}{
		{"daemon secret", api.Credential{Host: "api.creds.test", Header: "Authorization", Secret: "apikey"}, w.secret},
		{"value at create", api.Credential{Host: "api.creds.test", Header: "Authorization", Value: value}, value},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := restricted("api.creds.test", "allowed.test")
			n.Credentials = []api.Credential{c.cred}
			id := w.sandbox(t, n, asRoot)
			// Another host, on the same server, gets no credential.
			if r := w.sh(t, id, curl("http://allowed.test/")); !strings.Contains(r.Stdout, "server=allowed host=allowed.test tls=no auth=no") {
				t.Errorf("a host without credentials: want auth=no:\n%s", show(r))
			}
			before := len(w.hitsOf(srvAllowedTLS))
			for _, args := range []string{
				"http://api.creds.test/",
				"--noproxy '*' http://api.creds.test/",
				"-H 'Authorization: forged' http://api.creds.test/",
			} {
				r := w.sh(t, id, curl(args))
				if r.ExitCode != 0 || !strings.Contains(r.Stdout, "server=allowed-tls host=api.creds.test tls=yes auth=yes") {
					t.Errorf("curl %s: want the HTTPS server with auth=yes:\n%s", args, show(r))
				}
			}
			h := w.hitsOf(srvAllowedTLS)[before:]
			for _, x := range h {
				if !x.AuthOK {
					t.Errorf("a request arrived without the credential's value: %+v", x)
				}
			}
			if len(h) != 3 {
				t.Errorf("the HTTPS server got %d requests, want 3", len(h))
			}
			e := w.waitEvent(t, id, "", evMatch{Type: api.EventNetworkConnect, Name: "api.creds.test", Decision: "allow", Rule: "credentials"})
			if e.Data["credentialHeader"] != "Authorization" {
				t.Errorf("credential event %+v: want credentialHeader Authorization", e)
			}
			w.checkSecretAbsent(t, id, c.secret)
		})
	}
}

// checkSecretAbsent looks for secret everywhere in sandbox id: its processes' environments,
// command lines and memory (from the host), its files, and what the API says about it. A
// process that made a credentialed request stays alive meanwhile.
func (w *world) checkSecretAbsent(t *testing.T, id, secret string) {
	t.Helper()
	const body = "host=api.creds.test tls=yes auth=yes"
	r := w.sh(t, id, `nohup python3 -c '
import time, urllib.request
print(urllib.request.urlopen("http://api.creds.test/", timeout=5).read().decode(), flush=True)
time.sleep(300)' >/workspace/py.out 2>&1 &
for i in $(seq 50); do grep -q auth=yes /workspace/py.out && break; sleep 0.1; done; cat /workspace/py.out`)
	if !strings.Contains(r.Stdout, body) {
		t.Fatalf("a python request through the proxy: want %q:\n%s", body, show(r))
	}

	// Outside, first: every process of the sandbox, read by the host (before the search inside,
	// whose grep rebuilds the secret from the pattern: a VM's guest RAM keeps the pages of
	// processes that exited).
	pids := sandboxPids(id)
	found, control, scanned := scanProcs(pids, []byte(secret), []byte(body))
	t.Logf("scanned %d processes, %d MiB of memory", len(pids), scanned>>20)
	if len(found) > 0 {
		t.Errorf("the secret is in sandbox processes: %v", found)
	}
	if len(control) == 0 {
		t.Errorf("the memory scan did not find the response body %q in any of %v: the scan is blind", body, pids)
	}

	// Inside: a pattern that matches the secret without containing it, so that the search
	// does not put it in the sandbox. /usr is the host's, read-only, and not searched.
	var pat strings.Builder
	for _, ch := range secret {
		pat.WriteString("[" + string(ch) + "]")
	}
	r = w.sh(t, id, fmt.Sprintf(`grep -lsE '%[1]s' /proc/[0-9]*/environ /proc/[0-9]*/cmdline
grep -rlsE --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev --exclude-dir=usr '%[1]s' /
env | grep -E '%[1]s'
echo searched`, pat.String()))
	if strings.TrimSpace(r.Stdout) != "searched" {
		t.Errorf("the secret is visible inside the sandbox:\n%s", show(r))
	}

	// The API: the sandbox and its events.
	sb, err := w.c.Get(bg(), id)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := w.c.Events(bg(), id, client.EventOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for what, v := range map[string]any{"GET sandbox": sb, "events": evs} {
		b, _ := json.Marshal(v)
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("%s shows the secret: %s", what, b)
		}
	}
	if len(sb.Network.Credentials) != 1 || sb.Network.Credentials[0].Value != "" {
		t.Errorf("GET sandbox credentials: %+v, want one without a value", sb.Network.Credentials)
	}
	if strings.Contains(w.d.log(), secret) {
		t.Errorf("the daemon's log shows the secret")
	}
}

// scanProcs searches the environment, command line and readable memory of pids for secret and
// for control; it returns where each was found and how many bytes it read.
func scanProcs(pids []int, secret, control []byte) (found, seen []string, scanned int64) {
	for _, pid := range pids {
		dir := fmt.Sprintf("/proc/%d", pid)
		for _, f := range []string{"environ", "cmdline"} {
			if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil && bytes.Contains(b, secret) {
				found = append(found, dir+"/"+f)
			}
		}
		maps, err := os.ReadFile(filepath.Join(dir, "maps"))
		if err != nil {
			continue
		}
		mem, err := os.Open(filepath.Join(dir, "mem"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(maps), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || f[1][0] != 'r' {
				continue
			}
			lo, hi, _ := strings.Cut(f[0], "-")
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 != nil || err2 != nil || end-start > 1<<30 {
				continue
			}
			b := make([]byte, end-start)
			n, _ := mem.ReadAt(b, int64(start))
			scanned += int64(n)
			if bytes.Contains(b[:n], secret) {
				found = append(found, fmt.Sprintf("%s/mem %s %s", dir, f[0], strings.Join(f[5:], " ")))
			}
			if bytes.Contains(b[:n], control) {
				seen = append(seen, dir)
			}
		}
		mem.Close()
	}
	return found, seen, scanned
}

// TestNetworkRunOneShot runs `airlock run` in the hut: the same policy without a daemon, and
// denials on stderr.
func TestNetworkRunOneShot(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx, cancel := context.WithTimeout(bg(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nsenter", "--net="+w.hutPath, "--", airlockBin, "run", "--config", w.config,
		"--memory", "256M", "--disk", "256M", "--network", "restricted", "--allow-domain", "allowed.test", "--",
		"sh", "-c", curl("http://allowed.test/")+"; "+curl("http://evil.test/"))
	cmd.Env = runEnv
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		t.Errorf("airlock run: %v", err)
	}
	mustContain(t, "airlock run's stdout", stdout.String(), "server=allowed host=allowed.test", "code=200", "code=403", "not_in_allowlist")
	mustContain(t, "airlock run's stderr", stderr.String(), "airlock: network: http evil.test:80 denied (not_in_allowlist)")
	if strings.Contains(stderr.String(), "allowed.test:80 allowed") {
		t.Errorf("allowed traffic is reported without --network-log:\n%s", stderr.String())
	}
	w.waitNoVeths(t, 5*time.Second)
}

// netnsCount counts the distinct network namespaces of the sandbox processes of the tests' own
// airlocks (those in their uid ranges), so that another airlock on the host does not count.
func netnsCount() int {
	set := map[string]bool{}
	for pid := range sandboxProcs() {
		if s, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); err == nil {
			set[s] = true
		}
	}
	return len(set)
}

// TestNetworkLeaks makes networked sandboxes of every kind and terminates them: no veth, no
// namespace, no process or cgroup remains. It is not parallel, so that it can count the
// namespaces of its own sandboxes' processes.
func TestNetworkLeaks(t *testing.T) {
	w := newWorld(t)
	check := leakCheck(t)
	before := netnsCount()
	no := false
	for _, n := range []api.Network{
		restricted("allowed.test"),
		{EgressPolicy: api.EgressOpen},
		{EgressPolicy: api.EgressOpen, BlockLocalNetwork: &no},
		{EgressPolicy: api.EgressRestricted, AllowedDomains: []string{"api.creds.test"}, Credentials: []api.Credential{{Host: "api.creds.test", Header: "Authorization", Secret: "apikey"}}},
		{EgressPolicy: api.EgressNone},
	} {
		id := w.sandbox(t, n)
		if n.EgressPolicy != api.EgressNone {
			if r := w.sh(t, id, curl("http://allowed.test/")); !strings.Contains(r.Stdout, "code=") {
				t.Errorf("curl in a %s sandbox:\n%s", n.EgressPolicy, show(r))
			}
		}
	}
	if l := w.hutLinks(t); len(l) != 4 {
		t.Errorf("the hut has veths %v, want 4 (one per networked sandbox)", l)
	}
	if during := netnsCount(); during <= before {
		t.Errorf("network namespaces of processes: %d before the sandboxes, %d with them: the count is blind", before, during)
	}
	w.terminateAll()
	deadline := time.Now().Add(5 * time.Second)
	for netnsCount() > before && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if after := netnsCount(); after > before {
		t.Errorf("network namespaces of processes: %d before, %d after terminating", before, after)
	}
	check()
}

// TestNetworkAdopt kills the daemon with a networked sandbox alive and starts it again: the
// sandbox's network works again, under the same policy, and is removed at its end.
func TestNetworkAdopt(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.sandbox(t, restricted("allowed.test"))
	if r := w.sh(t, id, curl("http://allowed.test/")); httpCode(r) != "200" {
		t.Fatalf("before the crash:\n%s", show(r))
	}
	w.d.kill9()
	w.startDaemon()
	sb, err := w.c.Get(bg(), id)
	if err != nil || (sb.Status != api.StatusReady && sb.Status != api.StatusRunning) {
		t.Fatalf("sandbox after the restart: %s %q %v", sb.Status, sb.Reason, err)
	}
	for _, c := range []struct{ args, code, body string }{
		{"http://allowed.test/", "200", "server=allowed"},
		{"--noproxy '*' http://allowed.test/", "200", "server=allowed"},
		{"--noproxy '*' --cacert /workspace/ca.pem https://allowed.test/", "200", "server=allowed-tls"},
		{"http://evil.test/", "403", "not_in_allowlist"},
	} {
		r := w.sh(t, id, curl(c.args))
		if httpCode(r) != c.code || !strings.Contains(r.Stdout, c.body) {
			t.Errorf("adopted sandbox, curl %s: want %s and %q:\n%s", c.args, c.code, c.body, show(r))
		}
		w.waitEvent(t, id, r.ExecutionID, evMatch{Type: api.EventNetworkConnect})
	}
	if r := w.sh(t, id, "getent hosts allowed.test"); !strings.Contains(r.Stdout, ipAllowed) {
		t.Errorf("adopted sandbox, DNS:\n%s", show(r))
	}
	if _, err := w.c.UpdateNetwork(bg(), id, restricted("evil.test")); err != nil {
		t.Errorf("update the adopted sandbox's network: %v", err)
	} else if r := w.sh(t, id, curl("http://evil.test/")); httpCode(r) != "200" {
		t.Errorf("adopted sandbox after an update to evil.test:\n%s", show(r))
	}
	w.terminateAll()
}

// TestNetworkOrphan kills the daemon and does not restart it within the orphan grace: the
// sandbox ends by itself and its network with it.
func TestNetworkOrphan(t *testing.T) {
	t.Parallel()
	w := newWorldWith(t, worldOptions{orphanGraceSeconds: 2})
	id := w.sandbox(t, restricted("allowed.test"))
	if r := w.sh(t, id, curl("http://allowed.test/")); httpCode(r) != "200" {
		t.Fatalf("before the crash:\n%s", show(r))
	}
	w.mu.Lock()
	ino := w.sandboxes[id]
	w.mu.Unlock()
	w.d.kill9()
	w.waitNoVeths(t, 15*time.Second)
	waitNetnsGone(t, id, ino, 5*time.Second)
	// A new daemon records what happened and removes what is left.
	w.startDaemon()
	if sb, err := w.c.Get(bg(), id); err != nil || sb.Status != api.StatusFailed {
		t.Errorf("orphaned sandbox after the restart: %s %q %v, want failed", sb.Status, sb.Reason, err)
	}
}
