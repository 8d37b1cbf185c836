package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
)

// TestPoolConcurrentClaims fills a networked warm pool of 50 and claims all of it with 50
// concurrent creates, each with its own environment, allowlist and credential. Every sandbox must
// have exactly its own: its variable, its policy (even claims may reach allowed.test, odd ones
// not), and its credential, which arrives at the server for its own request only and is nowhere
// in its environment. Then the pool refills, is removed, and nothing is left of either.
//
// Not parallel: 50 networked sandboxes and their refills are the whole machine's work for a while.
func TestPoolConcurrentClaims(t *testing.T) {
	w := newWorld(t)
	const n = 50
	shape := smallSpec()
	shape.Network = restricted() // waiting sandboxes reach nothing
	if _, err := w.admin.PutPool(bg(), api.Pool{Name: "claims", Spec: shape, Size: n, RefillPerSecond: 100}); err != nil {
		t.Fatalf("put pool: %v", err)
	}
	removed := false
	remove := func() {
		if !removed {
			removed = true
			if _, err := w.admin.DeletePool(bg(), "claims"); err != nil {
				t.Errorf("delete pool: %v", err)
			}
		}
	}
	t.Cleanup(remove) // before the world's own cleanup counts veths
	waitPoolState(t, w.c, "claims", 3*time.Minute, func(s api.PoolStatus) bool { return s.Ready == n })

	values := make([]string, n)
	for i := range values {
		values[i] = "Bearer claim-" + strconv.Itoa(i) + "-" + randHex(t, 8)
		w.acceptAuth(values[i])
	}
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			s := smallSpec()
			s.Environment = map[string]string{"CLAIM": strconv.Itoa(i)}
			domains := []string{"api.creds.test"}
			if i%2 == 0 {
				domains = append(domains, "allowed.test")
			}
			s.Network = restricted(domains...)
			s.Network.Credentials = []api.Credential{{Host: "api.creds.test", Header: "Authorization", Value: values[i]}}
			<-start
			sb, err := w.c.Create(bg(), s)
			ids[i], errs[i] = sb.ID, err
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
		w.track(t, ids[i])
	}
	st, err := w.c.Pool(bg(), "claims")
	if err != nil {
		t.Fatal(err)
	}
	if st.Claims != n || st.Misses != 0 {
		t.Errorf("pool after %d creates: claims %d, misses %d; want every create claimed", n, st.Claims, st.Misses)
	}

	codes := regexp.MustCompile(`code=(\d{3})`)
	sem := make(chan struct{}, 8)
	for i, id := range ids {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			p, err := w.c.Events(bg(), id, client.EventOptions{Type: api.EventSandboxClaimed})
			if err != nil || len(p.Events) != 1 || p.Events[0].Data["pool"] != "claims" {
				t.Errorf("claim %d (%s): want one %s event of pool claims, got %+v (%v)", i, id, api.EventSandboxClaimed, p.Events, err)
			}
			script := fmt.Sprintf("echo claim=$CLAIM; env | grep -c claim- ; %s; %s",
				curl(fmt.Sprintf("http://api.creds.test/claim-%d", i)), curl("http://allowed.test/"))
			r := w.sh(t, id, script)
			lines := strings.Split(r.Stdout, "\n")
			if len(lines) < 2 || lines[0] != fmt.Sprintf("claim=%d", i) || lines[1] != "0" {
				t.Errorf("claim %d: want its own CLAIM and no credential in its environment:\n%s", i, show(r))
			}
			if !strings.Contains(r.Stdout, "host=api.creds.test tls=yes auth=yes") {
				t.Errorf("claim %d: its credentialed request did not arrive with a credential:\n%s", i, show(r))
			}
			want := "200"
			if i%2 == 1 {
				want = "403"
			}
			if m := codes.FindAllStringSubmatch(r.Stdout, -1); len(m) != 2 || m[0][1] != "200" || m[1][1] != want {
				t.Errorf("claim %d: allowed.test answered %v, want %s (its own allowlist)\n%s", i, m, want, show(r))
			}
		})
	}
	wg.Wait()
	got := map[string][]string{}
	for _, h := range w.hitsOf(srvAllowedTLS) {
		got[h.Path] = append(got[h.Path], h.AuthValue)
	}
	for i := range n {
		if v := got[fmt.Sprintf("/claim-%d", i)]; len(v) != 1 || v[0] != values[i] {
			t.Errorf("claim %d: the server saw credentials %q for its request, want exactly its own", i, v)
		}
	}
	waitPoolState(t, w.c, "claims", 3*time.Minute, func(s api.PoolStatus) bool { return s.Ready == n })
	remove()
	if _, err := w.c.Pool(bg(), "claims"); !isStatus(err, 404) {
		t.Errorf("pool after delete: %v, want 404", err)
	}
}

// waitPoolState polls pool name until ok says yes.
func waitPoolState(t *testing.T, c *client.Client, name string, d time.Duration, ok func(api.PoolStatus) bool) api.PoolStatus {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		s, err := c.Pool(bg(), name)
		if err != nil {
			t.Fatalf("pool %s: %v", name, err)
		}
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool %s after %v: %+v", name, d, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
