package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/internal/testutil"
)

// The test world: two network namespaces the test makes, "hut" (the host under test, where the
// daemon runs) and "world" (the Internet, as far as the daemon can tell), joined by a veth pair
// on the benchmark range 198.18.0.0/30. Nothing is ever sent outside them: the test's own
// namespace gets no address, route or interface.
const (
	hutLinkAddr   = "198.18.0.1"
	worldLinkAddr = "198.18.0.2"

	ipAllowed  = "203.0.113.10"    // web server "allowed" (HTTP and HTTPS)
	ipEvil     = "203.0.113.11"    // web server "evil" (HTTP and HTTPS)
	ipBulk     = "203.0.113.12"    // bulk download server
	ipDNS      = "203.0.113.53"    // the world's DNS server
	ipMetadata = "169.254.169.254" // a cloud metadata service
	ipPrivate  = "10.66.0.5"       // a private host no sandbox may reach
	ipInternal = "10.66.0.7"       // a private host the operator trusts (internal.test)
)

// Servers of the world, by the name hits are recorded under.
const (
	srvAllowed    = "allowed"     // http://203.0.113.10/
	srvAllowedTLS = "allowed-tls" // https://203.0.113.10/
	srvEvil       = "evil"        // http://203.0.113.11/
	srvEvilTLS    = "evil-tls"    // https://203.0.113.11/
	srvBulk       = "bulk"        // http://203.0.113.12/
	srvMetadata   = "metadata"    // http://169.254.169.254/
	srvPrivate    = "private"     // http://10.66.0.5/
	srvInternal   = "internal"    // http://10.66.0.7/
	srvLoopback   = "hut-loopback"
	srvUDP        = "udp" // UDP echo on 203.0.113.11:123 and 203.0.113.53:9999
)

// worldRecords are what the world's DNS server answers; every other name is NXDOMAIN.
var worldRecords = map[string]string{
	"allowed.test":           ipAllowed,
	"www.allowed.test":       ipAllowed,
	"deep.www.allowed.test":  ipAllowed,
	"evil.test":              ipEvil,
	"evil-allowed.test":      ipEvil,
	"allowed.test.evil.test": ipEvil,
	"bulk.test":              ipBulk,
	"api.creds.test":         ipAllowed,
	"rebind.test":            ipPrivate,
	"meta.test":              ipMetadata,
	"loop.test":              "127.0.0.1",
}

// hit is one request a world server received.
type hit struct {
	Host, Path string
	Auth       bool   // an Authorization header arrived
	AuthOK     bool   // ... carrying a value the test gave airlock (w.authOK)
	AuthValue  string // the header's value, for tests that tell credentials apart (never shown to a sandbox)
}

// world is a hut with a daemon in it, a world with servers, and what those servers saw.
type world struct {
	t         *testing.T
	hutPath   string // /proc/<pid>/ns/net of the process holding the hut's namespace
	worldPath string // the same for the world's
	dataDir   string
	config    string // the daemon's configuration file
	caFile    string // the test CA (PEM), trusted by the daemon upstream
	caPEM     []byte
	secret    string // the value of the daemon's secret "apikey"
	key       string // an API key of tenant t1
	adminKey  string // an admin key (pools)
	d         *daemon
	c         *client.Client
	admin     *client.Client

	mu         sync.Mutex // guards hits, queries, authValues, sandboxes, cursors
	hits       map[string][]hit
	queries    []string          // names the world's DNS server was asked, canonical
	authValues []string          // credential values given at create time
	sandboxes  map[string]uint64 // every sandbox the test made (terminated at the end): its netns inode
	cursors    map[string]int64  // by exec: the sandbox's last event before it began
}

// worldOptions change the daemon's configuration.
type worldOptions struct {
	orphanGraceSeconds int // 0: the default
}

// newWorld makes the world and starts a daemon in the hut. Everything is removed at the end
// of the test; the sandboxes the test made are terminated first and checked for leaks.
func newWorld(t *testing.T) *world { return newWorldWith(t, worldOptions{}) }

func newWorldWith(t *testing.T, o worldOptions) *world {
	t.Helper()
	testutil.RequiresRoot(t, "the network world is made of network namespaces")
	for _, tool := range []string{"ip", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIP: the network world needs %s: %v", tool, err)
		}
	}
	w := &world{
		t:         t,
		hits:      map[string][]hit{},
		sandboxes: map[string]uint64{},
		cursors:   map[string]int64{},
	}
	w.secret = "sk-e2e-" + randHex(t, 24)
	w.makeNamespaces()
	w.makeCA()
	w.startServers()

	dir := t.TempDir()
	w.caFile = filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(w.caFile, w.caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{"defaults": map[string]any{"isolation": "process"} /* processDefault */, "network": map[string]any{
		"resolvers":      []string{ipDNS + ":53"},
		"trustedHosts":   map[string]string{"internal.test": ipInternal},
		"secrets":        map[string]any{"apikey": map[string]any{"value": w.secret, "hosts": []string{"api.creds.test"}, "tenants": []string{"t1"}}},
		"upstreamCaFile": w.caFile,
	}}
	if o.orphanGraceSeconds > 0 {
		cfg["process"] = map[string]any{"orphanGraceSeconds": o.orphanGraceSeconds}
	}
	b, _ := json.Marshal(cfg)
	w.config = filepath.Join(dir, "airlock.json")
	if err := os.WriteFile(w.config, b, 0o600); err != nil {
		t.Fatal(err)
	}
	w.dataDir = filepath.Join(dir, "data")
	w.key = newKey(t, w.dataDir, "t1")
	w.adminKey = newAdminKey(t, w.dataDir)
	w.startDaemon()
	return w
}

// startDaemon starts (or restarts, after kill9) the daemon in the hut with the world's
// configuration and data. At the end of the test, before the daemon stops, every sandbox
// the test made is terminated and checked for leaks.
func (w *world) startDaemon() {
	w.t.Helper()
	w.d = startDaemonIn(w.t, w.hutPath, w.dataDir, "--config", w.config)
	w.c = w.d.client(w.key)
	w.admin = w.d.client(w.adminKey)
	w.t.Cleanup(w.terminateAll) // after the daemon's own cleanup, so it runs first
}

// ipIn runs ip(8) with args inside the network namespace at path.
func ipIn(t *testing.T, path string, args ...string) {
	t.Helper()
	if out, err := exec.Command("nsenter", append([]string{"--net=" + path, "--", "ip"}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s (in %s): %v\n%s", strings.Join(args, " "), path, err, out)
	}
}

// holdNamespace starts a process in a new network namespace and returns it; the namespace
// lives as long as the process (killed at the end of the test) and is never bind-mounted, so
// the host's mount table and /run/netns stay as they were.
func holdNamespace(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("unshare", "--net", "--", "sleep", "infinity")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }) // Wait says killed: what was sent
	// unshare execs sleep once the namespace exists; wait until the pid's namespace differs
	// from ours.
	self, _ := os.Readlink("/proc/self/ns/net")
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid)); err == nil && ns != self {
			return cmd
		}
		if time.Now().After(deadline) {
			t.Fatal("unshare --net did not make a namespace")
		}
	}
}

// makeNamespaces makes hut and world, their link and their addresses and routes.
func (w *world) makeNamespaces() {
	t := w.t
	t.Helper()
	hut, other := holdNamespace(t), holdNamespace(t)
	w.hutPath = fmt.Sprintf("/proc/%d/ns/net", hut.Process.Pid)
	w.worldPath = fmt.Sprintf("/proc/%d/ns/net", other.Process.Pid)
	h, o := w.hutPath, w.worldPath
	// Made inside the hut with its peer directly in the world: the test's namespace never
	// holds either end.
	ipIn(t, h, "link", "add", "wan0", "type", "veth", "peer", "name", "wan0", "netns", strconv.Itoa(other.Process.Pid))
	steps := [][]string{
		{h, "link", "set", "lo", "up"},
		{h, "addr", "add", hutLinkAddr + "/30", "dev", "wan0"},
		{h, "link", "set", "wan0", "up"},
		{o, "link", "set", "lo", "up"},
		{o, "addr", "add", worldLinkAddr + "/30", "dev", "wan0"},
		{o, "link", "set", "wan0", "up"},
		{o, "route", "add", "default", "via", hutLinkAddr},
		{h, "route", "add", "203.0.113.0/24", "via", worldLinkAddr},
		{h, "route", "add", ipMetadata + "/32", "via", worldLinkAddr},
		{h, "route", "add", "10.66.0.0/24", "via", worldLinkAddr},
	}
	for _, a := range []string{ipAllowed, ipEvil, ipBulk, ipDNS, ipMetadata, ipPrivate, ipInternal} {
		steps = append(steps, []string{o, "addr", "add", a + "/32", "dev", "lo"})
	}
	for _, s := range steps {
		ipIn(t, s[0], s[1:]...)
	}
}

// The test CA, made once per test binary; it signs the world's HTTPS servers' certificates.
var (
	caOnce sync.Once
	caPEM  []byte
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caErr  error
)

// makeCA makes (once per test binary) the test CA.
func (w *world) makeCA() {
	caOnce.Do(func() {
		caKey, caErr = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if caErr != nil {
			return
		}
		tmpl := &x509.Certificate{
			SerialNumber:          big.NewInt(1),
			Subject:               pkix.Name{CommonName: "airlock e2e test CA"},
			NotBefore:             time.Now().Add(-time.Hour),
			NotAfter:              time.Now().Add(24 * time.Hour),
			IsCA:                  true,
			BasicConstraintsValid: true,
			KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &caKey.PublicKey, caKey)
		if err != nil {
			caErr = err
			return
		}
		caCert, caErr = x509.ParseCertificate(der)
		caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	})
	if caErr != nil {
		w.t.Fatal(caErr)
	}
	w.caPEM = caPEM
}

// leafCert returns a certificate of the test CA for names.
func leafCert(t *testing.T, names ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// listenIn listens on addr from inside the namespace at path.
func listenIn(t *testing.T, path, network, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	if err := inNetns(path, func() (err error) { ln, err = net.Listen(network, addr); return err }); err != nil {
		t.Fatalf("listen %s %s in %s: %v", network, addr, path, err)
	}
	return ln
}

func listenPacketIn(t *testing.T, path, network, addr string) net.PacketConn {
	t.Helper()
	var pc net.PacketConn
	if err := inNetns(path, func() (err error) { pc, err = net.ListenPacket(network, addr); return err }); err != nil {
		t.Fatalf("listen %s %s in %s: %v", network, addr, path, err)
	}
	return pc
}

// startServers starts the world's servers (and one on the hut's loopback, which no sandbox
// may reach); they stop at the end of the test.
func (w *world) startServers() {
	t := w.t
	wp := w.worldPath
	var wg sync.WaitGroup
	var closers []func()
	// Registered first, so that servers started before a failure stop too.
	t.Cleanup(func() {
		for _, c := range closers {
			c()
		}
		wg.Wait()
	})
	serve := func(name string, ln net.Listener, h http.Handler, cert *tls.Certificate) {
		srv := &http.Server{Handler: h, ErrorLog: log.New(io.Discard, "", 0), ReadHeaderTimeout: 10 * time.Second}
		if cert != nil {
			ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{*cert}})
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				t.Errorf("world server %s: %v", name, err)
			}
		}()
		closers = append(closers, func() { srv.Close() })
	}
	allowedCert := leafCert(t, "allowed.test", "www.allowed.test", "deep.www.allowed.test", "api.creds.test")
	evilCert := leafCert(t, "evil.test", "evil-allowed.test", "allowed.test.evil.test")
	serve(srvAllowed, listenIn(t, wp, "tcp4", ipAllowed+":80"), w.web(srvAllowed), nil)
	serve(srvAllowedTLS, listenIn(t, wp, "tcp4", ipAllowed+":443"), w.web(srvAllowedTLS), &allowedCert)
	serve(srvEvil, listenIn(t, wp, "tcp4", ipEvil+":80"), w.web(srvEvil), nil)
	serve(srvEvilTLS, listenIn(t, wp, "tcp4", ipEvil+":443"), w.web(srvEvilTLS), &evilCert)
	serve(srvBulk, listenIn(t, wp, "tcp4", ipBulk+":80"), w.web(srvBulk), nil)
	serve(srvMetadata, listenIn(t, wp, "tcp4", ipMetadata+":80"), w.web(srvMetadata), nil)
	serve(srvPrivate, listenIn(t, wp, "tcp4", ipPrivate+":80"), w.web(srvPrivate), nil)
	serve(srvInternal, listenIn(t, wp, "tcp4", ipInternal+":80"), w.web(srvInternal), nil)
	serve(srvLoopback, listenIn(t, w.hutPath, "tcp4", "127.0.0.1:80"), w.web(srvLoopback), nil)

	packets := func(addr string, serve func(net.PacketConn)) {
		pc := listenPacketIn(t, wp, "udp4", addr)
		wg.Add(1)
		go func() { defer wg.Done(); serve(pc) }()
		closers = append(closers, func() { pc.Close() })
	}
	packets(ipDNS+":53", w.serveDNSUDP)
	packets(ipEvil+":123", w.serveUDPEcho)
	packets(ipDNS+":9999", w.serveUDPEcho)
	dnsTCP := listenIn(t, wp, "tcp4", ipDNS+":53")
	wg.Add(1)
	go func() { defer wg.Done(); w.serveDNSTCP(dnsTCP, &wg) }()
	closers = append(closers, func() { dnsTCP.Close() })
}

// web is the handler of the world's web server name: it records the request and names itself
// and the Host it was asked for; it says whether an Authorization header came, never its value.
// /bytes?n=N answers N bytes; ?delay=MS waits that long before answering.
func (w *world) web(name string) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		w.mu.Lock()
		w.hits[name] = append(w.hits[name], hit{Host: r.Host, Path: r.URL.Path, Auth: auth != "", AuthOK: w.authOK(auth), AuthValue: auth})
		w.mu.Unlock()
		if ms, err := strconv.Atoi(r.URL.Query().Get("delay")); err == nil {
			select {
			case <-time.After(time.Duration(ms) * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
		if r.URL.Path == "/bytes" {
			n, _ := strconv.Atoi(r.URL.Query().Get("n"))
			rw.Header().Set("Content-Length", strconv.Itoa(n))
			buf := make([]byte, 64<<10)
			for i := range buf {
				buf[i] = 'x'
			}
			for n > 0 {
				k := min(n, len(buf))
				if _, err := rw.Write(buf[:k]); err != nil {
					return
				}
				n -= k
			}
			return
		}
		yn := map[bool]string{true: "yes", false: "no"}
		fmt.Fprintf(rw, "server=%s host=%s tls=%s auth=%s\n", name, r.Host, yn[r.TLS != nil], yn[auth != ""])
	})
}

// authOK reports whether auth is a value the test gave airlock: the daemon's secret or a value
// given at create time (acceptAuth). Called with w.mu held.
func (w *world) authOK(auth string) bool {
	return auth != "" && (auth == w.secret || slices.Contains(w.authValues, auth))
}

// acceptAuth adds a credential value given at create time to those authOK recognises.
func (w *world) acceptAuth(v string) {
	w.mu.Lock()
	w.authValues = append(w.authValues, v)
	w.mu.Unlock()
}

// serveUDPEcho answers every datagram with "echo" and records it.
func (w *world) serveUDPEcho(pc net.PacketConn) {
	buf := make([]byte, 2048)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		w.mu.Lock()
		w.hits[srvUDP] = append(w.hits[srvUDP], hit{Host: pc.LocalAddr().String(), Path: string(buf[:min(n, 64)])})
		w.mu.Unlock()
		_, _ = pc.WriteTo([]byte("echo"), from) // a failure is the client's to see
	}
}

func (w *world) serveDNSUDP(pc net.PacketConn) {
	buf := make([]byte, 4096)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		if resp := w.answerDNS(buf[:n]); resp != nil {
			_, _ = pc.WriteTo(resp, from) // a failure is the client's to see
		}
	}
}

func (w *world) serveDNSTCP(ln net.Listener, wg *sync.WaitGroup) {
	var conns sync.Map
	defer func() {
		conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		conns.Store(c, nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conns.Delete(c)
			defer c.Close()
			for {
				_ = c.SetReadDeadline(time.Now().Add(10 * time.Second)) // fails only on a closed conn, which the read says
				var l [2]byte
				if _, err := io.ReadFull(c, l[:]); err != nil {
					return
				}
				q := make([]byte, binary.BigEndian.Uint16(l[:]))
				if _, err := io.ReadFull(c, q); err != nil {
					return
				}
				resp := w.answerDNS(q)
				if resp == nil {
					return
				}
				_, _ = c.Write(binary.BigEndian.AppendUint16(nil, uint16(len(resp)))) // a failure is the client's to see
				_, _ = c.Write(resp)
			}
		}()
	}
}

// answerDNS answers A queries for worldRecords, records every name asked, and says NXDOMAIN
// to the rest.
func (w *world) answerDNS(query []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	name := strings.TrimSuffix(strings.ToLower(q.Name.String()), ".")
	w.mu.Lock()
	w.queries = append(w.queries, name)
	w.mu.Unlock()
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	ip, known := worldRecords[name]
	if !known {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	// The sections in order and the query's own question: these cannot fail.
	_ = b.StartQuestions()
	_ = b.Question(q)
	_ = b.StartAnswers()
	if known && q.Type == dnsmessage.TypeA {
		a := net.ParseIP(ip).To4()
		_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}, dnsmessage.AResource{A: [4]byte(a)})
	}
	resp, err := b.Finish()
	if err != nil {
		return nil
	}
	return resp
}

// hitsOf returns what server name received.
func (w *world) hitsOf(name string) []hit {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]hit(nil), w.hits[name]...)
}

// dnsQueries returns the names the world's DNS server was asked.
func (w *world) dnsQueries() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.queries...)
}

// noHits fails the test if any of servers received anything.
func (w *world) noHits(t *testing.T, servers ...string) {
	t.Helper()
	for _, s := range servers {
		if h := w.hitsOf(s); len(h) > 0 {
			t.Errorf("world server %s was reached %d time(s): %+v", s, len(h), h)
		}
	}
}

// hutLinks returns the hut's interfaces whose name starts with alk (sandboxes' host ends).
func (w *world) hutLinks(t *testing.T) []string {
	t.Helper()
	return alkLinks(t, w.hutPath)
}

// alkLinks returns the interfaces of the network namespace at path whose name starts with alk
// (sandboxes' host ends).
func alkLinks(t *testing.T, path string) []string {
	t.Helper()
	out, err := exec.Command("nsenter", "--net="+path, "--", "ip", "-o", "link").CombinedOutput()
	if err != nil {
		t.Fatalf("ip -o link in %s: %v\n%s", path, err, out)
	}
	var alk []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && strings.HasPrefix(f[1], "alk") {
			alk = append(alk, strings.TrimSuffix(strings.SplitN(f[1], "@", 2)[0], ":"))
		}
	}
	return alk
}

// waitNoVeths fails the test unless the hut has no sandbox veth within d.
func (w *world) waitNoVeths(t *testing.T, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		l := w.hutLinks(t)
		if len(l) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("sandbox veths left in the hut after %v: %v", d, l)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// track records a sandbox to terminate at the end, with its network namespace.
func (w *world) track(t *testing.T, id string) {
	t.Helper()
	ino := sandboxNetns(t, id)
	w.mu.Lock()
	w.sandboxes[id] = ino
	w.mu.Unlock()
}

// terminateAll terminates every sandbox the test made and checks that their networks are
// gone: no veth in the hut, nothing holding a sandbox's network namespace.
func (w *world) terminateAll() {
	t := w.t
	select {
	case <-w.d.exited:
		return // killed or stopped by the test, which checks what it left itself
	default:
	}
	w.mu.Lock()
	boxes := w.sandboxes
	w.sandboxes = map[string]uint64{}
	w.mu.Unlock()
	for id := range boxes {
		if _, err := w.c.Terminate(bg(), id); err != nil && !isStatus(err, http.StatusConflict) {
			t.Errorf("terminate %s: %v", id, err)
		}
	}
	w.waitNoVeths(t, 10*time.Second)
	for id, ino := range boxes {
		waitNetnsGone(t, id, ino, 10*time.Second)
	}
}

// sandboxPids returns the host pids of a sandbox's processes (from its cgroup).
func sandboxPids(id string) []int {
	// The process level's cgroups are under "airlock/<instance>", the container level's under
	// "airlock-container/<instance>", the microvm level's VMMs' under "airlock-microvm/<instance>"
	// (the configuration's defaults).
	for _, pat := range []string{"/sys/fs/cgroup/pids/airlock/*/" + id, "/sys/fs/cgroup/*/airlock/*/" + id, "/sys/fs/cgroup/airlock/*/" + id,
		"/sys/fs/cgroup/pids/airlock-container/*/" + id, "/sys/fs/cgroup/*/airlock-container/*/" + id, "/sys/fs/cgroup/airlock-container/*/" + id,
		"/sys/fs/cgroup/pids/airlock-microvm/*/" + id, "/sys/fs/cgroup/*/airlock-microvm/*/" + id, "/sys/fs/cgroup/airlock-microvm/*/" + id} {
		dirs, _ := filepath.Glob(pat)
		for _, d := range dirs {
			if pids := cgroupDirPids(d); len(pids) > 0 {
				return pids
			}
		}
	}
	return nil
}

// sandboxNetns returns the inode of a live sandbox's network namespace.
func sandboxNetns(t *testing.T, id string) uint64 {
	t.Helper()
	pids := sandboxPids(id)
	if len(pids) == 0 {
		t.Fatalf("sandbox %s: no process in its cgroup", id)
	}
	ino, err := nsInode(fmt.Sprintf("/proc/%d/ns/net", pids[0]))
	if err != nil {
		t.Fatalf("sandbox %s: %v", id, err)
	}
	return ino
}

// nsInode reads a namespace link ("net:[4026532000]").
func nsInode(link string) (uint64, error) {
	s, err := os.Readlink(link)
	if err != nil {
		return 0, err
	}
	v, ok := strings.CutPrefix(s, "net:[")
	if !ok {
		return 0, fmt.Errorf("%s -> %s: not a network namespace", link, s)
	}
	return strconv.ParseUint(strings.TrimSuffix(v, "]"), 10, 64)
}

// netnsHolders lists what keeps the network namespace ino alive: processes in it and open
// descriptors of it (the daemon holds one per sandbox), and nsfs mounts of it (their mount
// points), each as a path that opens the namespace.
func netnsHolders(ino uint64) []string { return netnsHoldersOf(map[uint64]bool{ino: true})[ino] }

// netnsHoldersOf is netnsHolders of each of inos, in one look at the host.
func netnsHoldersOf(inos map[uint64]bool) map[uint64][]string {
	out := map[uint64][]string{}
	add := func(ns, holder string) {
		if v, ok := strings.CutPrefix(ns, "net:["); ok {
			if ino, err := strconv.ParseUint(strings.TrimSuffix(v, "]"), 10, 64); err == nil && inos[ino] {
				out[ino] = append(out[ino], holder)
			}
		}
	}
	links, _ := filepath.Glob("/proc/[0-9]*/ns/net")
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, l := range append(links, fds...) {
		if s, err := os.Readlink(l); err == nil {
			add(s, l)
		}
	}
	// An nsfs mount's root is the namespace ("net:[4026532000]"); its mount point can be opened.
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 4 {
				add(f[3], f[4])
			}
		}
	}
	return out
}

// waitNetnsGone fails the test if the sandbox's network namespace is still held after d.
func waitNetnsGone(t *testing.T, id string, ino uint64, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		h := netnsHolders(ino)
		if len(h) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("sandbox %s: its network namespace net:[%d] is still held by %v", id, ino, h)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// isStatus reports whether err is a daemon error with HTTP status code.
func isStatus(err error, code int) bool {
	var ce *client.Error
	return errors.As(err, &ce) && ce.StatusCode == code
}

func randHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
