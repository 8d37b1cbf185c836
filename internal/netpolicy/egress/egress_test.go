package egress

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/netpolicy"
	"github.com/airlockrun/airlock/internal/netpolicy/netns"
	"github.com/airlockrun/airlock/internal/testutil"
)

// events collects what the service reports.
type events struct {
	mu  sync.Mutex
	evs []netpolicy.Event
}

func (e *events) sink(id string, ev netpolicy.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evs = append(e.evs, ev)
}

func (e *events) wait(t *testing.T, match func(netpolicy.Event) bool) netpolicy.Event {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		e.mu.Lock()
		i := slices.IndexFunc(e.evs, match)
		var ev netpolicy.Event
		if i >= 0 {
			ev = e.evs[i]
		}
		e.mu.Unlock()
		if i >= 0 {
			return ev
		}
	}
	t.Fatalf("no matching event among %+v", e.evs)
	return netpolicy.Event{}
}

func newService(t *testing.T, trusted map[string][]netip.Addr) (*Service, *events) {
	t.Helper()
	testutil.RequiresRoot(t, "network namespaces")
	svc, err := New(Config{Pool: netip.MustParsePrefix("10.215.0.0/24"), Trusted: trusted}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ev := &events{}
	svc.SetSink(ev.sink)
	return svc, ev
}

// web serves "hello" on loopback; the policy trusts web.test to be there.
func web(t *testing.T) (port string) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hello") })}
	go func() { _ = srv.Serve(ln) }() // until the cleanup closes it
	t.Cleanup(func() { srv.Close() })
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port
}

// fetch GETs u through the sandbox's explicit proxy from inside its namespace.
func fetch(g *Gateway, u string) (int, error) {
	proxy := &url.URL{Scheme: "http", Host: net.JoinHostPort(g.Link.Gateway.String(), strconv.Itoa(int(netns.DefaultPorts.Proxy)))}
	tr := &http.Transport{Proxy: http.ProxyURL(proxy), DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := g.Link.Run(func() error {
				var err error
				c, err = net.DialTimeout(network, addr, 2*time.Second)
				return err
			})
			return c, err
		}}
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get(u)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func TestAttachUpdateClose(t *testing.T) {
	svc, ev := newService(t, map[string][]netip.Addr{"web.test": {netip.MustParseAddr("127.0.0.1")}})
	port := web(t)
	g, err := svc.Attach("sbx_a", api.Network{EgressPolicy: api.EgressRestricted, AllowedDomains: []string{"web.test:" + port}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if code, err := fetch(g, "http://web.test:"+port+"/"); err != nil || code != 200 {
		t.Fatalf("allowed fetch: %d %v", code, err)
	}
	e := ev.wait(t, func(e netpolicy.Event) bool { return e.Kind == netpolicy.KindConnect && e.Allow })
	if e.Name != "web.test" || e.BytesIn == 0 {
		t.Errorf("allow event %+v", e)
	}
	// Live: the same name is now denied, with a 403 naming the rule.
	if err := g.Update(api.Network{EgressPolicy: api.EgressRestricted, AllowedDomains: []string{"other.test"}}); err != nil {
		t.Fatal(err)
	}
	if code, err := fetch(g, "http://web.test:"+port+"/"); err != nil || code != 403 {
		t.Fatalf("after the change: %d %v, want 403", code, err)
	}
	ev.wait(t, func(e netpolicy.Event) bool { return !e.Allow && e.Rule == netpolicy.RuleNotListed })
	// To none: the firewall rejects even the proxy, at once.
	if err := g.Update(api.Network{EgressPolicy: api.EgressNone}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := fetch(g, "http://web.test:"+port+"/"); err == nil || time.Since(start) > time.Second {
		t.Fatalf("egress none: err %v after %v; want a fast refusal", err, time.Since(start))
	}
	host := g.Link.HostIf
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if links, _ := netns.HostLinks(); slices.Contains(links, host) {
		t.Fatalf("veth %s left after Close", host)
	}
}

func TestBadPolicy(t *testing.T) {
	svc, _ := newService(t, nil)
	before, _ := netns.HostLinks()
	_, err := svc.Attach("sbx_b", api.Network{EgressPolicy: api.EgressRestricted,
		Credentials: []api.Credential{{Host: "api.test", Header: "Authorization", Secret: "missing"}}}, 0)
	if err == nil {
		t.Fatal("a credential naming an unknown secret was accepted")
	}
	if after, _ := netns.HostLinks(); len(after) != len(before) {
		t.Fatalf("a refused Attach left veths: %v → %v", before, after)
	}
}

// TestReleaseAdopt is a daemon restart: the first service lets go of a sandbox's network
// without removing it, a second one adopts it from a process inside and serves it again.
func TestReleaseAdopt(t *testing.T) {
	svc, _ := newService(t, map[string][]netip.Addr{"web.test": {netip.MustParseAddr("127.0.0.1")}})
	port := web(t)
	n := api.Network{EgressPolicy: api.EgressRestricted, AllowedDomains: []string{"web.test:" + port}}
	g, err := svc.Attach("sbx_c", n, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A process that lives in the namespace, as a sandbox's init does.
	cmd := exec.Command("sleep", "30")
	if err := g.Link.Run(cmd.Start); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cmd.Process.Kill(); err != nil {
			t.Error(err)
		}
		_ = cmd.Wait() // killed: its error says so
	}()
	slot := g.Link.Slot
	if err := g.Release(); err != nil {
		t.Fatal(err)
	}
	if links, _ := netns.HostLinks(); !slices.Contains(links, g.Link.HostIf) {
		t.Fatal("Release removed the network")
	}
	svc2, _ := newService(t, map[string][]netip.Addr{"web.test": {netip.MustParseAddr("127.0.0.1")}})
	if _, err := svc2.Adopt("sbx_c", os.Getpid(), slot, n); err == nil {
		t.Fatal("adopted through a process outside the sandbox's namespace")
	}
	g2, err := svc2.Adopt("sbx_c", cmd.Process.Pid, slot, n)
	if err != nil {
		t.Fatal(err)
	}
	defer g2.Close()
	if code, err := fetch(g2, "http://web.test:"+port+"/"); err != nil || code != 200 {
		t.Fatalf("after adoption: %d %v", code, err)
	}
}
