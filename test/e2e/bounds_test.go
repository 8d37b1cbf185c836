package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	d, _, key := newDaemonConfig(t, `{"server":{"maxHeaderBytes":65536,"maxConnectionsPerClient":256}}`)
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
		io.Copy(io.Discard, resp.Body)
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
				io.Copy(io.Discard, resp.Body)
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
