package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/internal/kube/cluster"
	"github.com/airlockrun/airlock/internal/kube/kubeapi"
	"github.com/airlockrun/airlock/internal/kube/node"
)

// frontGrace is the front's node-lost grace here: nodes renew their lease every 10 s.
const frontGrace = 20 * time.Second

var (
	frontOnce sync.Once
	frontErr  error
	front     *cluster.Node
	// Two tenants of the front, each with its namespace, quota and key.
	tenantA, tenantB *client.Client
	keyA, keyB       string
)

// frontAPI starts the front API (once) and makes tenants a and b.
func frontAPI(t *testing.T) {
	t.Helper()
	frontOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if front, frontErr = kc.StartFront(ctx, nodes[0].Binary(), frontGrace); frontErr != nil {
			return
		}
		for _, x := range []struct {
			name string
			c    **client.Client
			key  *string
		}{{"a", &tenantA, &keyA}, {"b", &tenantB, &keyB}} {
			key, err := kc.AddTenant(ctx, x.name, kubeapi.Quota{MaxSandboxes: 40, MaxMemoryMB: 40 * 256})
			if err != nil {
				frontErr = err
				return
			}
			*x.key = key
			if *x.c, err = client.New(front.API, key); err != nil {
				frontErr = err
				return
			}
			if frontErr = waitKey(ctx, *x.c); frontErr != nil {
				return
			}
		}
	})
	if frontErr != nil {
		t.Fatalf("front API: %v", frontErr)
	}
}

// waitKey waits until the front knows c's key: it reads the key Secrets through a watch.
func waitKey(ctx context.Context, c *client.Client) error {
	for {
		_, err := c.List(ctx, client.ListOptions{})
		if !errors.Is(err, client.ErrUnauthorized) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the front did not take a new key: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func frontSpec() api.Spec {
	return api.Spec{Isolation: "process", Resources: api.Resources{CPU: 0.1, MemoryMB: 256}}
}

// nodeOf is the node a sandbox of the front runs on (its metadata says it).
func nodeOf(t *testing.T, sb api.Sandbox) *cluster.Node {
	t.Helper()
	for _, n := range nodes {
		if n.Name == sb.Metadata[node.MetaNode] {
			return n
		}
	}
	t.Fatalf("sandbox %s names no node of the cluster: metadata %v", sb.ID, sb.Metadata)
	return nil
}

// TestFrontAPI creates twelve sandboxes through the front API: the scheduler spreads them over
// the three nodes; each runs python through the front; another tenant sees none of them; the
// WebSocket exec, files and the 202 create pass through too; after delete nothing is left.
func TestFrontAPI(t *testing.T) {
	frontAPI(t)
	ctx := ctxFor(t, 5*time.Minute)
	const n = 12
	sbs := make([]api.Sandbox, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			spec := frontSpec()
			spec.Name = fmt.Sprintf("spread-%d", i)
			sbs[i], errs[i] = tenantA.Create(ctx, spec)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("create through the front: %v", err)
	}
	t.Cleanup(func() {
		for _, sb := range sbs {
			_, _ = tenantA.Terminate(context.Background(), sb.ID)
		}
	})
	per := map[string]int{}
	for _, sb := range sbs {
		if sb.Status != api.StatusReady {
			t.Errorf("sandbox %s: status %s (%s), want ready", sb.ID, sb.Status, sb.Reason)
		}
		per[nodeOf(t, sb).Name]++
	}
	t.Logf("sandboxes per node: %v", per)
	if len(per) != len(nodes) {
		t.Errorf("12 sandboxes landed on %d of %d nodes: %v", len(per), len(nodes), per)
	}
	for _, sb := range sbs {
		res, err := tenantA.Exec(ctx, sb.ID, api.ExecRequest{Command: api.Command{"python3", "-c", "print(6*7)"}})
		if err != nil || res.ExitCode != 0 || res.Stdout != "42\n" {
			t.Fatalf("exec in %s through the front: %+v, %v", sb.ID, res, err)
		}
	}

	// Tenant b sees none of them, under any route.
	if list, err := tenantB.List(ctx, client.ListOptions{}); err != nil || len(list) != 0 {
		t.Errorf("tenant b lists %d sandboxes (err %v), want none", len(list), err)
	}
	if list, err := tenantA.List(ctx, client.ListOptions{}); err != nil || len(list) != n {
		t.Errorf("tenant a lists %d sandboxes (err %v), want %d", len(list), err, n)
	}
	victim := sbs[0].ID
	if _, err := tenantB.Get(ctx, victim); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("tenant b gets a's sandbox: %v, want not found", err)
	}
	if _, err := tenantB.Exec(ctx, victim, api.ExecRequest{Command: api.Command{"true"}}); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("tenant b execs in a's sandbox: %v, want not found", err)
	}
	if _, err := tenantB.Terminate(ctx, victim); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("tenant b terminates a's sandbox: %v, want not found", err)
	}
	if _, err := tenantB.ReadFile(ctx, victim, "/etc/hostname"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("tenant b reads a file of a's sandbox: %v, want not found", err)
	}

	// The WebSocket exec, with stdin, and the files API pass through the front to the node.
	var out bytes.Buffer
	res, err := tenantA.ExecInteractive(ctx, victim, api.ExecStart{ExecRequest: api.ExecRequest{Command: api.Command{"python3", "-c", "import sys; print(sum(int(x) for x in sys.stdin.read().split()))"}}},
		client.Stdio{Stdin: strings.NewReader("40 2\n"), Stdout: &out})
	if err != nil || res.ExitCode != 0 || out.String() != "42\n" {
		t.Errorf("WebSocket exec through the front: %+v, %v, stdout %q", res, err, out.String())
	}
	if _, err := tenantA.WriteFile(ctx, victim, "/tmp/answer", strings.NewReader("42"), 0o644); err != nil {
		t.Errorf("upload through the front: %v", err)
	} else if res, err := tenantA.Exec(ctx, victim, api.ExecRequest{Command: api.Command{"cat", "/tmp/answer"}}); err != nil || res.Stdout != "42" {
		t.Errorf("the uploaded file: %+v, %v", res, err)
	}

	// The sandbox's audit events come from its node, execs included.
	if page, err := tenantA.Events(ctx, victim, client.EventOptions{Type: "exec."}); err != nil || len(page.Events) == 0 {
		t.Errorf("exec events through the front: %d (%v), want some", len(page.Events), err)
	}

	// A create without wait answers 202, provisioning, with the ID it keeps.
	async, err := tenantA.CreateAsync(ctx, frontSpec())
	if err != nil || async.Status != api.StatusProvisioning || !kubeapi.ValidSandboxID(async.ID) {
		t.Fatalf("create without wait: %+v, %v; want provisioning with an ID", async, err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		sb, err := tenantA.Get(ctx, async.ID)
		if err == nil && sb.Status == api.StatusReady && sb.ID == async.ID {
			sbs = append(sbs, sb)
			break
		}
		if time.Now().After(deadline) {
			p, perr := cs.CoreV1().Pods("tenant-a").Get(ctx, "sbx-"+strings.TrimPrefix(async.ID, "sbx_"), metav1.GetOptions{})
			pod := fmt.Sprint(perr)
			if perr == nil {
				pod = podText(p)
			}
			t.Fatalf("the 202 sandbox %s not ready within 60 s: %s/%s, %v; its Pod: %s", async.ID, sb.Status, sb.Reason, err, pod)
		}
	}

	// Delete: the Pods leave the API and nothing of the sandboxes is left on their nodes.
	for _, sb := range sbs {
		got, err := tenantA.Terminate(ctx, sb.ID)
		if err != nil || got.Status != api.StatusTerminated {
			t.Errorf("terminate %s: %+v, %v", sb.ID, got.Status, err)
		}
	}
	for _, sb := range sbs {
		waitNoSandbox(t, nodeOf(t, sb), sb.ID)
	}
	pods, err := cs.CoreV1().Pods("tenant-a").List(ctx, metav1.ListOptions{LabelSelector: kubeapi.LabelFront + "=true"})
	if err != nil || len(pods.Items) != 0 {
		t.Errorf("tenant a's Pods after delete: %d (err %v), want none", len(pods.Items), err)
	}
}

// TestFrontQuotaAndKeys: a create past the tenant's ResourceQuota is a 429, and a request
// without a valid key a 401.
func TestFrontQuotaAndKeys(t *testing.T) {
	frontAPI(t)
	ctx := ctxFor(t, 2*time.Minute)
	key, err := kc.AddTenant(ctx, "small", kubeapi.Quota{MaxSandboxes: 1})
	if err != nil {
		t.Fatal(err)
	}
	small, err := client.New(front.API, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := waitKey(ctx, small); err != nil {
		t.Fatal(err)
	}
	sb, err := small.Create(ctx, frontSpec())
	if err != nil {
		t.Fatalf("the first create of a tenant of one sandbox: %v", err)
	}
	t.Cleanup(func() { _, _ = small.Terminate(context.Background(), sb.ID) })
	if _, err := small.Create(ctx, frontSpec()); !errors.Is(err, client.ErrQuotaExceeded) {
		t.Errorf("a create past the quota: %v, want quota exceeded", err)
	}
	stranger, err := client.New(front.API, "ak_not-a-key")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stranger.List(ctx, client.ListOptions{}); !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("a list with an unknown key: %v, want unauthorized", err)
	}
	if _, err := small.Terminate(ctx, sb.ID); err != nil {
		t.Errorf("terminate: %v", err)
	}
}

// TestFrontUnschedulable: a sandbox no node has room for (more vCPUs than any node offers) is
// never left provisioning: a waiting create answers 503 and leaves no Pod; one answered 202
// becomes failed with reason unschedulable, and its record says why.
func TestFrontUnschedulable(t *testing.T) {
	frontAPI(t)
	ctx := ctxFor(t, 2*time.Minute)
	ns, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kubeapi.NodeLabel + "=true"})
	if err != nil {
		t.Fatal(err)
	}
	const cpus = 8 // the largest a sandbox may ask for
	for _, n := range ns.Items {
		if c := n.Status.Allocatable.Cpu(); c.Cmp(*resource.NewQuantity(cpus, resource.DecimalSI)) >= 0 {
			t.Skipf("node %s offers %s CPUs: a sandbox of %d fits there", n.Name, c, cpus)
		}
	}
	spec := frontSpec()
	spec.Resources.CPU = cpus

	if _, err := tenantA.Create(ctx, spec); !errors.Is(err, client.ErrUnavailable) || !strings.Contains(err.Error(), "no airlock node has room") {
		t.Errorf("a waiting create no node has room for: %v, want unavailable (503) saying so", err)
	}
	async, err := tenantA.CreateAsync(ctx, spec)
	if err != nil || async.Status != api.StatusProvisioning {
		t.Fatalf("create without wait: %+v, %v; want provisioning", async, err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		sb, err := tenantA.Get(ctx, async.ID)
		if err == nil && sb.Status == api.StatusFailed {
			if sb.Reason != "unschedulable" {
				t.Errorf("the 202 sandbox failed with reason %q, want unschedulable", sb.Reason)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the 202 sandbox no node has room for is still %s/%s (%v) after 60 s", sb.Status, sb.Reason, err)
		}
	}
	if _, err := tenantA.Terminate(ctx, async.ID); err != nil {
		t.Errorf("delete the failed sandbox: %v", err)
	}
	pods, err := cs.CoreV1().Pods("tenant-a").List(ctx, metav1.ListOptions{LabelSelector: kubeapi.LabelFront + "=true"})
	if err != nil || len(pods.Items) != 0 {
		t.Errorf("tenant a's Pods after: %d (err %v), want none", len(pods.Items), err)
	}
}

// TestFrontRouteRefusesStrangers: the daemon's API on a node's kubelet port acts as the tenant a
// caller names, so only a caller the apiserver allows nodes/proxy (the front) may reach it: a
// client without a certificate, and one with a certificate of the cluster's CA but no rights,
// naming tenant a, are refused and see nothing of its sandboxes.
func TestFrontRouteRefusesStrangers(t *testing.T) {
	frontAPI(t)
	ctx := ctxFor(t, 2*time.Minute)
	sb, err := tenantA.Create(ctx, frontSpec())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = tenantA.Terminate(context.Background(), sb.ID) })
	n, err := cs.CoreV1().Nodes().Get(ctx, sb.Metadata[node.MetaNode], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	addr := ""
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			addr = a.Address
		}
	}
	url := fmt.Sprintf("https://%s/airlock/api/v1/sandboxes/%s", net.JoinHostPort(addr, strconv.Itoa(int(n.Status.DaemonEndpoints.KubeletEndpoint.Port))), sb.ID)
	stranger, err := kc.ClientTLS("mallory")
	if err != nil {
		t.Fatal(err)
	}
	anonymous := stranger.Clone()
	anonymous.Certificates = nil
	for _, tc := range []struct {
		name string
		tls  *tls.Config
	}{{"no certificate", anonymous}, {"a certificate without nodes/proxy", stranger}} {
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc.tls}}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(kubeapi.HeaderTenant, "a")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d %s, want 401 or 403", tc.name, resp.StatusCode, body)
		}
		if strings.Contains(string(body), `"isolation"`) {
			t.Errorf("%s: the answer is the sandbox's record: %s", tc.name, body)
		}
	}
}
