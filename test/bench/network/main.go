// Command network benchmarks a sandbox's network beside its nearest peers, in one run:
//
//   - setup: airlock's namespace + veth + addresses + routes + nftables firewall + shaping,
//     through netlink from Go, interleaved with the same plumbing done by the usual script
//     (`ip netns add`, `ip link add ... type veth`, `ip addr`, `ip route`, `tc qdisc`; no
//     firewall, which the peer script leaves out, so it does less work than airlock);
//   - throughput: a bulk download by a client inside the sandbox's namespace through airlock's
//     egress proxy (CONNECT, policy checked), against the same download straight over the
//     veth to a server on the host end (no proxy): the ratio is what the proxy costs;
//   - latency: one small HTTP request on a new connection through the proxy (absolute-form,
//     allowlist checked, proxy resolves and dials) against the same request straight over the
//     veth.
//
// The servers listen on loopback and on the veth's host end; nothing leaves the machine.
// Usage, as root, from the repository root:
//
//	go run ./test/bench/network [-rounds N] [-mib N] [-json FILE]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/netpolicy/egress"
	"github.com/airlockrun/airlock/internal/netpolicy/netns"
	"github.com/airlockrun/airlock/test/bench/stats"
)

type result struct {
	Name string `json:"name"`
	stats.Summary
	N      int     `json:"n"`
	Gbitps float64 `json:"gbit_per_s,omitempty"`
}

type report struct {
	Results []result           `json:"results"`
	Ratios  map[string]float64 `json:"ratios"`
}

func main() {
	rounds := flag.Int("rounds", 40, "samples per setup and latency measure")
	mib := flag.Int("mib", 256, "MiB per throughput transfer")
	transfers := flag.Int("transfers", 5, "throughput transfers per path")
	jsonPath := flag.String("json", "", "also write the report as JSON here")
	flag.Parse()
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "network benchmark: needs root")
		os.Exit(1)
	}
	var rep report
	rep.Ratios = map[string]float64{}
	must := func(err error) {
		if err != nil {
			fmt.Fprintln(os.Stderr, "network benchmark:", err)
			os.Exit(1)
		}
	}

	// Setup, interleaved.
	pool, err := netns.NewPool(netip.MustParsePrefix("10.214.0.0/22"))
	must(err)
	var mine, script []time.Duration
	for i := range *rounds {
		t0 := time.Now()
		l, err := pool.Create(netns.Config{Rules: netns.Rules{Egress: api.EgressRestricted, Ports: netns.DefaultPorts}, Mbps: 100})
		must(err)
		mine = append(mine, time.Since(t0))
		l.Close()
		d, err := scriptSetup(i)
		must(err)
		script = append(script, d)
	}
	rep.add("setup: airlock (netlink + nftables + tbf)", mine, 0)
	rep.add("setup: ip/tc script (no firewall)", script, 0)
	rep.Ratios["setup airlock/script p50"] = stats.Ratio(rep.Results[0].P50, rep.Results[1].P50)

	// A sandbox network with airlock's listeners, unshaped, allowed to reach the bench host.
	srv, srvPort := serve("127.0.0.1:0")
	defer srv.Close()
	svc, err := egress.New(egress.Config{
		Pool:    netip.MustParsePrefix("10.214.4.0/24"),
		Trusted: map[string][]netip.Addr{"bulk.bench": {netip.MustParseAddr("127.0.0.1")}},
	}, slog.New(slog.DiscardHandler))
	must(err)
	gw, err := svc.Attach("sbx_bench", api.Network{EgressPolicy: api.EgressRestricted,
		AllowedDomains: []string{"bulk.bench:" + srvPort}}, 0)
	must(err)
	defer gw.Close()
	proxyAddr := net.JoinHostPort(gw.Link.Gateway.String(), strconv.Itoa(int(netns.DefaultPorts.Proxy)))
	// The direct path: another sandbox network, whose firewall lets it reach its host end on
	// the open-mode port, where the same server listens.
	peer, err := pool.Create(netns.Config{Rules: netns.Rules{Egress: api.EgressOpen, Ports: netns.DefaultPorts}})
	must(err)
	defer peer.Close()
	directAddr := net.JoinHostPort(peer.Gateway.String(), strconv.Itoa(int(netns.DefaultPorts.TCP)))
	direct, _ := serve(directAddr)
	defer direct.Close()
	dialIn := func(l *netns.Link) func(string) (net.Conn, error) {
		return func(addr string) (net.Conn, error) {
			var c net.Conn
			err := l.Run(func() error {
				var err error
				c, err = net.DialTimeout("tcp", addr, 5*time.Second)
				return err
			})
			return c, err
		}
	}

	// Throughput, interleaved.
	n := int64(*mib) << 20
	var viaProxy, straight []time.Duration
	for range *transfers {
		d, err := download(dialIn(gw.Link), proxyAddr, "bulk.bench:"+srvPort, n)
		must(err)
		viaProxy = append(viaProxy, d)
		d, err = download(dialIn(peer), directAddr, "", n)
		must(err)
		straight = append(straight, d)
	}
	gbit := func(ds []time.Duration) float64 {
		return float64(n*8) / (stats.Percentile(stats.Millis(ds), 50) / 1000) / 1e9
	}
	rep.add(fmt.Sprintf("throughput: proxy (CONNECT), %d MiB", *mib), viaProxy, gbit(viaProxy))
	rep.add(fmt.Sprintf("throughput: direct veth, %d MiB", *mib), straight, gbit(straight))
	rep.Ratios["throughput proxy/direct"] = gbit(viaProxy) / gbit(straight)

	// Latency of one request on a new connection, interleaved.
	proxied := &http.Transport{DisableKeepAlives: true, Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: proxyAddr}),
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return dialIn(gw.Link)(addr) }}
	plain := &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return dialIn(peer)(addr) }}
	var lp, ld []time.Duration
	for range *rounds {
		d, err := get(proxied, "http://bulk.bench:"+srvPort+"/")
		must(err)
		lp = append(lp, d)
		d, err = get(plain, "http://"+directAddr+"/")
		must(err)
		ld = append(ld, d)
	}
	rep.add("request: through proxy", lp, 0)
	rep.add("request: direct veth", ld, 0)
	rep.Ratios["request added p50 ms"] = rep.Results[len(rep.Results)-2].P50 - rep.Results[len(rep.Results)-1].P50

	rep.print()
	if *jsonPath != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		must(os.WriteFile(*jsonPath, b, 0o644))
	}
}

func (r *report) add(name string, ds []time.Duration, gbit float64) {
	r.Results = append(r.Results, result{Name: name, Summary: stats.Summarize(ds), N: len(ds), Gbitps: gbit})
}

func (r *report) print() {
	fmt.Printf("%-44s %9s %9s %9s %6s %10s\n", "measure", "p50 ms", "p90 ms", "p99 ms", "n", "Gbit/s")
	for _, x := range r.Results {
		g := ""
		if x.Gbitps > 0 {
			g = fmt.Sprintf("%.2f", x.Gbitps)
		}
		fmt.Printf("%-44s %9.3f %9.3f %9.3f %6d %10s\n", x.Name, x.P50, x.P90, x.P99, x.N, g)
	}
	for k, v := range r.Ratios {
		fmt.Printf("%-44s %9.3f\n", k, v)
	}
}

// scriptSetup does, with ip and tc, what a hand-rolled sandbox script does for its network,
// and removes it again (outside the timing).
func scriptSetup(i int) (time.Duration, error) {
	ns := fmt.Sprintf("albench%d", i)
	host := fmt.Sprintf("albh%d", i)
	gw, sb := "10.214.8.1", "10.214.8.2"
	steps := [][]string{
		{"ip", "netns", "add", ns},
		{"ip", "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"ip", "addr", "add", gw + "/30", "dev", host},
		{"ip", "link", "set", host, "up"},
		{"ip", "-n", ns, "link", "set", "lo", "up"},
		{"ip", "-n", ns, "addr", "add", sb + "/30", "dev", "eth0"},
		{"ip", "-n", ns, "link", "set", "eth0", "up"},
		{"ip", "-n", ns, "route", "add", "default", "via", gw},
		{"tc", "qdisc", "add", "dev", host, "root", "tbf", "rate", "100mbit", "burst", "128k", "latency", "50ms"},
		{"ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "100mbit", "burst", "128k", "latency", "50ms"},
	}
	t0 := time.Now()
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			return 0, fmt.Errorf("%v: %w: %s", s, err, out)
		}
	}
	d := time.Since(t0)
	for _, s := range [][]string{{"ip", "link", "del", host}, {"ip", "netns", "del", ns}} {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			return 0, fmt.Errorf("%v: %w: %s", s, err, out)
		}
	}
	return d, nil
}

// serve answers GET /?n=N with N zero bytes (default a few bytes).
func serve(addr string) (net.Listener, string) {
	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		panic(err)
	}
	zero := make([]byte, 1<<20)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		if n == 0 {
			_, _ = io.WriteString(w, "ok\n") // a failure is the client's to see
			return
		}
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		for n > 0 {
			k, err := w.Write(zero[:min(n, int64(len(zero)))])
			if err != nil {
				return
			}
			n -= int64(k)
		}
	})
	go func() { _ = http.Serve(ln, h) }() // it returns once the caller closes ln
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return ln, port
}

// download fetches n bytes from the bulk server, through the proxy with CONNECT target when
// target is set, and returns how long the transfer took.
func download(dial func(string) (net.Conn, error), addr, target string, n int64) (time.Duration, error) {
	t0 := time.Now()
	c, err := dial(addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if target != "" {
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			return 0, err
		}
		if resp.StatusCode != 200 {
			return 0, fmt.Errorf("CONNECT %s: %s", target, resp.Status)
		}
	}
	fmt.Fprintf(c, "GET /?n=%d HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n", n)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return 0, err
	}
	got, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return 0, err
	}
	if got != n {
		return 0, fmt.Errorf("downloaded %d bytes, want %d", got, n)
	}
	return time.Since(t0), nil
}

func get(tr *http.Transport, u string) (time.Duration, error) {
	t0 := time.Now()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(u)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", u, err)
	}
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return time.Since(t0), nil
}
