package cluster

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	frontapi "github.com/airlockrun/airlock/internal/kube/front"
	"github.com/airlockrun/airlock/internal/kube/kubeapi"
)

// createN creates n sandboxes of tenant a through the front, at once.
func createN(t *testing.T, ctx context.Context, n int) []api.Sandbox {
	t.Helper()
	sbs := make([]api.Sandbox, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { sbs[i], errs[i] = tenantA.Create(ctx, frontSpec()) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("create through the front: %v", err)
	}
	return sbs
}

// TestFrontNodeLost kills one node's daemon with SIGKILL, as a host that disappears: its
// sandboxes fail with reason node_lost within the front's grace, an exec on them errors at
// once (never hangs), new sandboxes go to the other nodes; when the node comes back it
// reclaims what it had, and nothing is left.
func TestFrontNodeLost(t *testing.T) {
	frontAPI(t)
	ctx := ctxFor(t, 10*time.Minute)
	sbs := createN(t, ctx, 6)
	all := append([]api.Sandbox{}, sbs...)
	t.Cleanup(func() {
		for _, sb := range all {
			_, _ = tenantA.Terminate(context.Background(), sb.ID)
		}
	})
	lostNode := nodeOf(t, sbs[0])
	var onLost, elsewhere []api.Sandbox
	for _, sb := range sbs {
		if nodeOf(t, sb) == lostNode {
			onLost = append(onLost, sb)
		} else {
			elsewhere = append(elsewhere, sb)
		}
	}
	t.Logf("losing node %s with %d of the 6 sandboxes", lostNode.Name, len(onLost))

	killed := time.Now()
	if err := lostNode.Kill(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = kc.Restart(context.Background(), lostNode)
		}
	})
	// Before the grace: an exec fails at once (the node does not answer), it does not hang.
	t0 := time.Now()
	if _, err := tenantA.Exec(ctx, onLost[0].ID, api.ExecRequest{Command: api.Command{"true"}}); err == nil {
		t.Errorf("exec on a sandbox of a killed node succeeded")
	} else if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("exec on a sandbox of a killed node took %s to fail (%v)", d, err)
	} else {
		t.Logf("exec before the grace: %v after %s", err, d.Round(time.Millisecond))
	}

	// Within the grace (plus the lease's renew interval, 10 s, and a margin): failed, node_lost.
	within := frontGrace + 15*time.Second
	for _, sb := range onLost {
		for {
			got, err := tenantA.Get(ctx, sb.ID)
			if err == nil && got.Status == api.StatusFailed && got.Reason == kubeapi.ReasonNodeLost {
				break
			}
			if time.Since(killed) > within {
				t.Fatalf("sandbox %s of the killed node %s: %+v (%v) after %s, want failed/node_lost", sb.ID, lostNode.Name, got.Status+"/"+got.Reason, err, within)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	t.Logf("the killed node's sandboxes were failed/node_lost %s after the kill (grace %s)", time.Since(killed).Round(100*time.Millisecond), frontGrace)
	t0 = time.Now()
	_, err := tenantA.Exec(ctx, onLost[0].ID, api.ExecRequest{Command: api.Command{"true"}})
	if !errors.Is(err, client.ErrConflict) || time.Since(t0) > 2*time.Second {
		t.Errorf("exec on a node_lost sandbox: %v after %s, want a prompt conflict", err, time.Since(t0))
	}
	if list, err := tenantA.List(ctx, client.ListOptions{Status: []string{api.StatusFailed}}); err != nil || len(list) != len(onLost) {
		t.Errorf("list of failed sandboxes: %d (%v), want the %d of the lost node", len(list), err, len(onLost))
	}
	// The tenant-wide reads merged over the nodes answer without the lost one, and say so.
	for _, path := range []string{"/api/v1/snapshots", "/api/v1/capabilities", "/api/v1/events?limit=10"} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, front.API+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+keyA)
		t0 := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		if missing := resp.Header.Get(frontapi.HeaderMissing); resp.StatusCode != http.StatusOK || !strings.Contains(missing, lostNode.Name+" (lost)") || time.Since(t0) > 5*time.Second {
			t.Errorf("GET %s with node %s lost: %d, %s %q after %s; want 200 naming it", path, lostNode.Name, resp.StatusCode, frontapi.HeaderMissing, missing, time.Since(t0))
		}
	}

	// New sandboxes go to the other nodes, and the others still work.
	more := createN(t, ctx, 4)
	all = append(all, more...)
	for _, sb := range append(more, elsewhere...) {
		if nodeOf(t, sb) == lostNode {
			t.Errorf("sandbox %s was placed on the lost node", sb.ID)
		}
		if res, err := tenantA.Exec(ctx, sb.ID, api.ExecRequest{Command: api.Command{"python3", "-c", "print(6*7)"}}); err != nil || res.Stdout != "42\n" {
			t.Errorf("exec in %s on a live node: %+v, %v", sb.ID, res, err)
		}
	}

	// The node comes back: it reclaims what it had (its Pods are over in the API).
	restarted = true
	if err := kc.Restart(ctxFor(t, 2*time.Minute), lostNode); err != nil {
		t.Fatalf("restart node %s: %v", lostNode.Name, err)
	}
	for _, sb := range onLost {
		waitNoSandbox(t, lostNode, sb.ID)
		if got, err := tenantA.Get(ctx, sb.ID); err != nil || got.Status != api.StatusFailed || got.Reason != kubeapi.ReasonNodeLost {
			t.Errorf("sandbox %s after its node came back: %s/%s (%v), want its record failed/node_lost", sb.ID, got.Status, got.Reason, err)
		}
	}
	for _, sb := range all {
		if _, err := tenantA.Terminate(ctx, sb.ID); err != nil {
			t.Errorf("terminate %s: %v", sb.ID, err)
		}
	}
	for _, sb := range all {
		waitNoSandbox(t, nodeOf(t, sb), sb.ID)
	}
	if list, err := tenantA.List(ctx, client.ListOptions{}); err != nil || len(list) != 0 {
		t.Errorf("tenant a lists %d sandboxes after delete (%v)", len(list), err)
	}
}
