package e2e

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/metrics/metricstest"
)

// TestDaemonUnauthenticatedFlood: 10,000 requests without a valid key, with headers and bodies of
// about 60 KB (one in 50 with headers over the 64 KiB cap), from 32 keep-alive clients, grow the database
// (airlock.db and its WAL) by no more than a few KB: refusals are counted, never stored. Before,
// 100 such requests grew it by 90 MB.
func TestDaemonUnauthenticatedFlood(t *testing.T) {
	const (
		requests = 10_000
		clients  = 32
		overCap  = 4 // the kind of request whose headers are over the cap
	)
	d, _, key := newDaemonConfig(t, `{`+processDefault+`, "server":{"maxHeaderBytes":65536,"maxConnectionsPerClient":256}}`)
	dbBytes := func() int64 {
		var n int64
		for _, f := range []string{"airlock.db", "airlock.db-wal"} {
			if fi, err := os.Stat(filepath.Join(d.dataDir, f)); err == nil {
				n += fi.Size()
			}
		}
		return n
	}
	// The barrier: a key holder's read writes nothing, and answers once every event produced
	// before it is written.
	settle := func() {
		t.Helper()
		req, _ := http.NewRequest("GET", d.url+"/api/v1/events", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /api/v1/events: %v %v", resp, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body) // drained for the connection's reuse; the status is checked
		resp.Body.Close()
		http.DefaultClient.CloseIdleConnections()
	}
	settle()
	before := dbBytes()

	big := strings.Repeat("A", 60_000)
	over := strings.Repeat("B", 80_000)
	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var (
		next                         atomic.Int64
		got401, gotOver, otherStatus atomic.Int64
		mu                           sync.Mutex
		firstErr                     error
	)
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > requests {
					return
				}
				kind := i % 5
				if kind == overCap && i%50 != overCap {
					kind = 0
				}
				var req *http.Request
				switch kind {
				case 0: // no key, a large user agent
					req, _ = http.NewRequest("GET", d.url+"/api/v1/sandboxes", nil)
					req.Header.Set("User-Agent", big)
				case 1: // an unknown key of 60 KB
					req, _ = http.NewRequest("DELETE", d.url+"/api/v1/sandboxes/sbx_x", nil)
					req.Header.Set("Authorization", "Bearer "+big)
				case 2: // an unknown key, a large body
					req, _ = http.NewRequest("POST", d.url+"/api/v1/sandboxes", strings.NewReader(big))
					req.Header.Set("Authorization", "Bearer alk_unknown")
				case 3: // no key, a long path and a header of 50 KB
					req, _ = http.NewRequest("PUT", d.url+"/api/v1/sandboxes/sbx_"+big[:4000]+"/network", strings.NewReader("{}"))
					req.Header.Set("X-Filler", big[:50_000])
				case overCap: // every 50th: headers over the cap (431, or the connection cut under it)
					req, _ = http.NewRequest("GET", d.url+"/api/v1/capabilities", nil)
					req.Header.Set("User-Agent", over)
				}
				resp, err := hc.Do(req)
				if err != nil {
					if kind != overCap {
						mu.Lock()
						firstErr = cmpErr(firstErr, fmt.Errorf("request %d: %w", i, err))
						mu.Unlock()
					}
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body) // drained for the connection's reuse; the status is checked
				resp.Body.Close()
				switch {
				case resp.StatusCode == http.StatusUnauthorized && kind != overCap:
					got401.Add(1)
				case resp.StatusCode == http.StatusRequestHeaderFieldsTooLarge && kind == overCap:
					gotOver.Add(1)
				default:
					otherStatus.Add(1)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if firstErr != nil {
		t.Errorf("a request under the caps failed: %v", firstErr)
	}
	if got401.Load() != requests-requests/50 || otherStatus.Load() != 0 {
		t.Errorf("%d answers 401 (want %d), %d other answers", got401.Load(), requests-requests/50, otherStatus.Load())
	}
	t.Logf("%d requests from %d clients in %v: %d answered 401, %d of %d over the header cap answered 431 (the others were cut)",
		requests, clients, took, got401.Load(), gotOver.Load(), requests/50)

	settle()
	after := dbBytes()
	if grew := after - before; grew > 8<<10 {
		t.Errorf("airlock.db + WAL grew by %d bytes (%d → %d), want at most a few KB", grew, before, after)
	}
	t.Logf("airlock.db + WAL: %d → %d bytes", before, after)
	fams := metricstest.Scrape(t, d.url+"/metrics")
	if n := fams.Value("airlock_api_unauthenticated_total", map[string]string{"reason": "missing"}) +
		fams.Value("airlock_api_unauthenticated_total", map[string]string{"reason": "invalid"}); n != float64(got401.Load()) {
		t.Errorf("airlock_api_unauthenticated_total: %v, want %d", n, got401.Load())
	}
	if n := fams.Value("airlock_api_connections_refused_total", map[string]string{"reason": "client"}); n != 0 {
		t.Errorf("%v connections refused: the clients stayed under the caps", n)
	}
	healthz(t, d.url, time.Second)
}

// cmpErr keeps the first error.
func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// healthz fails t unless GET /healthz on a fresh connection answers 200 within limit.
func healthz(t *testing.T, url string, limit time.Duration) {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	t0 := time.Now()
	resp, err := (&http.Client{Transport: tr, Timeout: limit}).Get(url + "/healthz")
	if err != nil {
		t.Errorf("GET /healthz: %v after %v", err, time.Since(t0))
		return
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz: %s", resp.Status)
	}
}

// TestDaemonIdleConnections: 20,000 idle connections from one client address (127.0.0.2) cost
// the daemon no more descriptors than its per-client cap: the rest are reset as they come.
// Meanwhile /healthz from another client (127.0.0.1) answers within a second, and once the
// idle connections are closed the daemon's descriptors return to where they were. Before, the
// daemon ran out of descriptors (accept4: too many open files) and /healthz timed out.
func TestDaemonIdleConnections(t *testing.T) {
	const (
		want      = 20_000
		perClient = 200
	)
	d, _, _ := newDaemonConfig(t, fmt.Sprintf(`{%s, "server":{"maxConnections":1000,"maxConnectionsPerClient":%d,"idleTimeoutSeconds":30}}`, processDefault, perClient))
	pid := d.cmd.Process.Pid
	n := raiseTestOpenFiles(t, want+200) - 200
	if n < want {
		t.Logf("the host's hard open-file limit (%d) is below %d connections and this test's own files: using %d connections, still far above the daemon's caps", n+200, want, n)
	}
	settledFDs := func(limit int) int {
		t.Helper()
		var fds int
		for range 100 {
			if fds = countFDs(t, pid); fds <= limit {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		return fds
	}
	base := countFDs(t, pid)

	conns := dialIdle(t, d.url, "127.0.0.2", n)
	defer closeAll(conns)
	held := countFDs(t, pid)
	t.Logf("%d connections dialed; the daemon's descriptors: %d before, %d while they are open", n, base, held)
	if held > base+perClient+50 {
		t.Errorf("the daemon holds %d descriptors with the idle connections open, %d before: more than its per-client cap (%d) allows", held, base, perClient)
	}
	healthz(t, d.url, time.Second)
	fams := metricstest.Scrape(t, d.url+"/metrics")
	if got := fams.Value("airlock_api_connections_refused_total", map[string]string{"reason": "client"}); got < float64(n-perClient-50) {
		t.Errorf("airlock_api_connections_refused_total{reason=client} = %v, want about %d", got, n-perClient)
	}
	if got := fams.Value("airlock_api_connections", nil); got > perClient+5 {
		t.Errorf("airlock_api_connections = %v, want at most the per-client cap (%d) and the scrape", got, perClient)
	}

	closeAll(conns)
	if after := settledFDs(base + 5); after > base+5 {
		t.Errorf("the daemon's descriptors: %d before, %d ten seconds after the idle connections closed", base, after)
	}
	healthz(t, d.url, time.Second)

	// Out of descriptors: with the daemon's open-file limit just above what it has, a client
	// within the caps makes its accept fail with EMFILE. The daemon backs off and retries, and
	// answers again once the connections close.
	var lim unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &lim); err != nil {
		t.Fatal(err)
	}
	low := unix.Rlimit{Cur: uint64(countFDs(t, pid) + 20), Max: lim.Max}
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &low, nil); err != nil {
		t.Fatal(err)
	}
	conns = dialIdle(t, d.url, "127.0.0.3", perClient)
	time.Sleep(time.Second)
	select {
	case <-d.exited:
		t.Fatalf("the daemon exited out of descriptors:\n%s", d.log())
	default:
	}
	if !strings.Contains(d.log(), "too many open files") {
		t.Errorf("the daemon's accept never failed with EMFILE under a limit of %d: the test did not test it", low.Cur)
	}
	closeAll(conns)
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &lim, nil); err != nil {
		t.Fatal(err)
	}
	settledFDs(base + 5)
	healthz(t, d.url, time.Second)
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		c.Close()
	}
}

// dialIdle opens n connections to url from the address from (64 at a time) and returns them:
// those the daemon accepted, and those it reset after the dial returned. A reset during the dial
// is a refusal too; any other dial error fails t.
func dialIdle(t *testing.T, url, from string, n int) []net.Conn {
	t.Helper()
	addr := strings.TrimPrefix(url, "http://")
	var (
		mu     sync.Mutex
		conns  []net.Conn
		failed error
		next   atomic.Int64
		wg     sync.WaitGroup
	)
	dialer := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
	for range 64 {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				c, err := dialer.Dial("tcp", addr)
				mu.Lock()
				switch {
				case err == nil:
					conns = append(conns, c)
				case errors.Is(err, syscall.ECONNRESET):
				default:
					failed = cmpErr(failed, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if failed != nil {
		closeAll(conns)
		t.Fatalf("dial: %v", failed)
	}
	return conns
}

// raiseTestOpenFiles raises this test process's open-file limit to want if it can (as root,
// past the hard limit too) and returns the limit it has; the old one is back when t ends. The
// daemon was started before, with its own.
func raiseTestOpenFiles(t *testing.T, want uint64) int {
	t.Helper()
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	lim := unix.Rlimit{Cur: max(want, old.Cur), Max: max(want, old.Max)}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		lim = unix.Rlimit{Cur: old.Max, Max: old.Max} // not allowed past the hard limit
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
			t.Error(err)
		}
	})
	return int(lim.Cur)
}

// countFDs counts the open file descriptors of process pid.
func countFDs(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
