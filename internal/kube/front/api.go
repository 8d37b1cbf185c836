package front

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/compat"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/kube/kubeapi"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// caller is who a request acts for: a tenant, and the namespace of its Pods.
type caller struct{ tenant, ns string }

type handler func(w http.ResponseWriter, r *http.Request, c caller) (any, int, error)

// Handler is the front's API: the host's /api/v1 routes of sandboxes, the tenant's reads across
// the nodes, snapshots, restore and fork, and seed 002's /api/sandbox surface; the host's other
// routes answer 501 saying why (docs/kubernetes.md#the-front-api).
func (f *Front) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "mode": "kubernetes"})
	})
	mux.Handle("POST /api/v1/sandboxes", f.auth(f.create))
	mux.Handle("GET /api/v1/sandboxes", f.auth(f.list))
	mux.Handle("GET /api/v1/sandboxes/{id}", f.auth(f.get))
	mux.Handle("DELETE /api/v1/sandboxes/{id}", f.auth(f.terminate))
	mux.Handle("POST /api/v1/sandboxes/{id}/terminate", f.auth(f.terminate))
	mux.Handle("POST /api/v1/sandboxes/{id}/fork", f.auth(f.fork))
	mux.Handle("POST /api/v1/sandboxes/{id}/restore", f.auth(f.restore))
	mux.Handle("/api/v1/sandboxes/{id}/{rest...}", f.auth(f.proxy))

	mux.Handle("GET /api/v1/capabilities", f.auth(f.capabilities))
	mux.Handle("GET /api/v1/templates", f.auth(f.templates))
	mux.Handle("GET /api/v1/snapshots", f.auth(f.snapshots))
	mux.Handle("GET /api/v1/snapshots/{snapshotId}", f.auth(f.snapshot))
	mux.Handle("DELETE /api/v1/snapshots/{snapshotId}", f.auth(f.snapshot))
	mux.Handle("GET /api/v1/events", f.auth(f.events))

	mux.Handle("POST /api/sandbox/create", f.compat(f.compatCreate))
	mux.Handle("GET /api/sandbox/{id}", f.compat(f.compatGet))
	mux.Handle("DELETE /api/sandbox/{id}", f.compat(f.compatDelete))
	mux.Handle("POST /api/sandbox/{id}/run", f.compat(f.proxy))
	mux.Handle("GET /api/sandbox/{id}/run/{runId}", f.compat(f.proxy))

	for _, ns := range notServed {
		for _, p := range ns.paths {
			mux.Handle(p, f.auth(func(w http.ResponseWriter, r *http.Request, c caller) (any, int, error) {
				return nil, 0, errdefs.New(errdefs.ErrNotImplemented, "%s %s is not served by the front API of a cluster: %s (docs/kubernetes.md#the-front-api)", r.Method, r.URL.Path, ns.why)
			}))
		}
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeErrorAs(w, errdefs.New(errdefs.ErrNotFound, "no route %s %s on the front API (docs/kubernetes.md#the-front-api says which it serves)", r.Method, r.URL.Path),
			strings.HasPrefix(r.URL.Path, compat.Prefix))
	})
	return mux
}

// notServed are the host's routes the front does not serve (yet), with why: they answer 501.
var notServed = []struct {
	paths []string
	why   string
}{
	{[]string{"/api/v1/pools", "/api/v1/pools/{name}"}, "warm pools are each host's (a SandboxWarmPool of agent-sandbox keeps Pods ready on airlock nodes)"},
	{[]string{"/api/v1/webhooks", "/api/v1/webhooks/{rest...}"}, "webhooks are each host's: no host holds the tenant's events of the others"},
	{[]string{"/api/v1/tools", "/api/v1/tools/{rest...}", "/mcp", "/mcp/{rest...}"}, "the tool gateway is each host's"},
	{[]string{"/api/v1/images", "/api/v1/images/{rest...}"}, "images are each host's store (a Pod's image is pulled by the node it lands on)"},
	{[]string{"/api/v1/volumes", "/api/v1/tenants", "/api/v1/keys", "/api/v1/keys/{rest...}", "/api/v1/audit/verify"},
		"tenants, keys and quotas are Kubernetes objects here (Namespaces, Secrets, ResourceQuotas), and each host's audit chain is verified on that host"},
}

// auth authenticates the bearer key against the key Secrets' hashes and calls h as its tenant.
func (f *Front) auth(h handler) http.Handler { return f.serve(h, false) }

// compat is auth for seed 002's surface: it answers bare objects, and errors as
// {"error": {...}} with the surface's field names.
func (f *Front) compat(h handler) http.Handler { return f.serve(h, true) }

func (f *Front) serve(h handler, bare bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := f.authenticate(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="airlock"`)
			writeErrorAs(w, err, bare)
			return
		}
		data, status, err := h(w, r, c)
		switch {
		case errors.Is(err, errWritten):
		case err != nil && bare:
			writeErrorAs(w, compat.Error(err), true)
		case err != nil:
			writeError(w, err)
		case bare:
			writeBare(w, status, data)
		default:
			writeJSON(w, status, data)
		}
	})
}

// errWritten is a handler's answer it wrote itself (the proxy).
var errWritten = errors.New("response written")

func (f *Front) authenticate(r *http.Request) (caller, error) {
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || strings.TrimSpace(key) == "" {
		return caller{}, errdefs.New(errdefs.ErrUnauthenticated, "an API key is required: Authorization: Bearer <key>")
	}
	objs, err := f.keys.ByIndex(byHash, kubeapi.HashKey(strings.TrimSpace(key)))
	if err != nil || len(objs) == 0 {
		return caller{}, errdefs.New(errdefs.ErrUnauthenticated, "the API key is unknown or revoked")
	}
	s, _ := objs[0].(*corev1.Secret)
	ten := ""
	if s != nil {
		ten = string(s.Data[kubeapi.KeyTenant])
	}
	if ten == "" {
		return caller{}, errdefs.New(errdefs.ErrUnauthenticated, "the API key names no tenant")
	}
	ns, err := f.tenantNamespace(ten)
	if err != nil {
		return caller{}, errdefs.New(errdefs.ErrPermissionDenied, "%v", err)
	}
	return caller{tenant: ten, ns: ns}, nil
}

// podName is the name of sandbox id's Pod.
func podName(id string) string { return "sbx-" + strings.TrimPrefix(id, "sbx_") }

// podOf is the Pod of the caller's sandbox id; another tenant's is not found, as an unknown one.
func (f *Front) podOf(c caller, id string) (*corev1.Pod, error) {
	if kubeapi.ValidSandboxID(id) {
		p, err := f.pods.Pods(c.ns).Get(podName(id))
		if err == nil && p.Annotations[kubeapi.AnnotationSandbox] == id {
			return p, nil
		}
	}
	return nil, errdefs.New(errdefs.ErrNotFound, "no sandbox %s", id)
}

func (f *Front) create(w http.ResponseWriter, r *http.Request, c caller) (any, int, error) {
	var spec api.Spec
	if err := decodeBody(w, r, &spec, false); err != nil {
		return nil, 0, err
	}
	wait := false
	if v := r.URL.Query().Get("wait"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, 0, errdefs.Invalid("wait", "wait=%q: true or false", v)
		}
		wait = b
	}
	var pod *corev1.Pod
	var err error
	id := sandbox.NewID("sbx_")
	if spec.FromSnapshot != "" {
		pod, err = f.restorePod(r.Context(), c, id, spec)
	} else {
		pod, err = podFor(c.ns, id, spec, f.lostNodes())
	}
	if err != nil {
		return nil, 0, err
	}
	sb, status, err := f.place(r.Context(), c, pod, wait)
	if err != nil {
		return nil, 0, err
	}
	return f.withEndpoints(r, sb), status, nil
}

// place creates pod, a sandbox's, and answers at once (202, provisioning) or, with wait, once
// the sandbox is ready on its node (201).
func (f *Front) place(ctx context.Context, c caller, pod *corev1.Pod, wait bool) (api.Sandbox, int, error) {
	made, err := f.client.CoreV1().Pods(c.ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return api.Sandbox{}, 0, apiError(err)
	}
	if !wait {
		return podView(made), http.StatusAccepted, nil
	}
	// Without an agent the node's answer is the sandbox's once it is made: asked for at once,
	// rather than after the Pod's status comes back through the apiserver.
	sb, err := f.waitReady(ctx, c, pod.Annotations[kubeapi.AnnotationSandbox], !startsAgent(pod))
	if err != nil {
		return api.Sandbox{}, 0, err
	}
	return sb, http.StatusCreated, nil
}

// unschedulableFor is how long a waiting create lets the scheduler find no node before it
// gives up (and removes the Pod): the cluster has no room for the sandbox.
const unschedulableFor = 10 * time.Second

// waitReady waits until sandbox id is ready on its node (or its Pod failed, or found no node:
// the error says why, and the Pod is removed).
//
// With ask, once the Pod is on a node the front asks the node directly: its metrics route
// answers once the sandbox is made (a host's operations wait for a provisioning sandbox), and
// its record then is the answer, without waiting for the node's status write to come back
// through the apiserver (docs/performance.md#kubernetes-the-front-api). Before the node has
// the Pod it answers 404, and is asked again.
func (f *Front) waitReady(ctx context.Context, c caller, id string, ask bool) (api.Sandbox, error) {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	remove := func(p *corev1.Pod) {
		zero := int64(0)
		_ = f.client.CoreV1().Pods(c.ns).Delete(context.WithoutCancel(ctx), p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}) // gone already: fine
	}
	for {
		if p, err := f.pods.Pods(c.ns).Get(podName(id)); err == nil {
			switch {
			case p.Status.Phase == corev1.PodFailed:
				remove(p)
				return api.Sandbox{}, podFailure(p)
			case unschedulable(p, unschedulableFor):
				remove(p)
				return api.Sandbox{}, errdefs.New(errdefs.ErrServiceUnavailable, "no airlock node has room for the sandbox (the scheduler, for %s: %s)", unschedulableFor, scheduledCondition(p).Message)
			case p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded,
				ask && p.Spec.NodeName != "" && !f.isLost(p.Spec.NodeName) && f.nodeCall(ctx, p, c.tenant, "/api/v1/sandboxes/"+id+"/metrics", new(api.Metrics)) == nil:
				var sb api.Sandbox
				if err := f.nodeCall(ctx, p, c.tenant, "/api/v1/sandboxes/"+id, &sb); err == nil && sb.Status != api.StatusProvisioning {
					return sb, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return api.Sandbox{}, ctx.Err()
		case <-t.C:
		}
	}
}

func (f *Front) get(w http.ResponseWriter, r *http.Request, c caller) (any, int, error) {
	p, err := f.podOf(c, r.PathValue("id"))
	if err != nil {
		return nil, 0, err
	}
	return f.withEndpoints(r, f.viewOf(r.Context(), c, p)), http.StatusOK, nil
}

// viewOf is pod's sandbox: its node's answer, or, when the node cannot give it (not placed
// yet, lost, never made it), what the Pod says.
func (f *Front) viewOf(ctx context.Context, c caller, p *corev1.Pod) api.Sandbox {
	if f.askable(p) {
		var sb api.Sandbox
		if err := f.nodeCall(ctx, p, c.tenant, "/api/v1/sandboxes/"+p.Annotations[kubeapi.AnnotationSandbox], &sb); err == nil {
			return sb
		}
	}
	return f.lostView(p)
}

// lostView is podView, failed with node_lost when the Pod's node is lost.
func (f *Front) lostView(p *corev1.Pod) api.Sandbox {
	sb := podView(p)
	if f.isLost(p.Spec.NodeName) && sandbox.Live(sb.Status) {
		sb.Status, sb.Reason = api.StatusFailed, kubeapi.ReasonNodeLost
	}
	return sb
}

// reachable says whether pod's sandbox is to be asked of its node: placed, made, not lost.
// settleWait bounds how long a call on a sandbox still being made waits for it (settle).
const settleWait = time.Minute

// settle waits, up to settleWait or ctx, while pod's sandbox is still being made (the Pod
// pending on no lost node), and returns the Pod as the front last saw it and whether its node
// has the sandbox. A call on a sandbox that is provisioning waits for it, as on a host; and a
// waiting create answers as soon as the node has the sandbox (waitReady asks the node itself),
// before the node's status write, which makes the Pod reachable here, has come back through the
// apiserver: so once the Pod is bound, the node is asked too (every settleAsk). A node that does
// not answer ends the wait at once with its error: a call on its sandbox fails fast, rather
// than waiting until the node is found lost.
func (f *Front) settle(ctx context.Context, c caller, p *corev1.Pod) (*corev1.Pod, bool, error) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	deadline := time.Now().Add(settleWait)
	var asked time.Time
	for p.Status.Phase == corev1.PodPending && !f.reachable(p) && !f.isLost(p.Spec.NodeName) && time.Now().Before(deadline) {
		if f.askable(p) && time.Since(asked) >= settleAsk {
			asked = time.Now()
			var sb api.Sandbox
			switch err := f.nodeCall(ctx, p, c.tenant, "/api/v1/sandboxes/"+p.Annotations[kubeapi.AnnotationSandbox], &sb); {
			case err == nil:
				return p, true, nil
			case !errors.Is(err, errdefs.ErrNotFound): // the node does not answer
				return p, false, err
			}
		}
		select {
		case <-ctx.Done():
			return p, false, ctx.Err()
		case <-t.C:
		}
		q, err := f.pods.Pods(p.Namespace).Get(p.Name)
		if err != nil || q.UID != p.UID {
			return p, false, nil
		}
		p = q
	}
	return p, f.reachable(p), nil
}

// settleAsk is how often settle asks a bound Pod's node for its sandbox.
const settleAsk = 100 * time.Millisecond

func (f *Front) reachable(p *corev1.Pod) bool {
	return f.askable(p) && containerID(p) != ""
}

// askable says whether pod's node may be asked for its sandbox: placed, not lost. The node may
// have made it before its status write, which makes the Pod reachable, comes back through the
// apiserver (a waiting create answers as soon as the node has it): a read asks the node then
// too, and takes the Pod's word when the node has none yet.
func (f *Front) askable(p *corev1.Pod) bool {
	return p.Spec.NodeName != "" && !f.isLost(p.Spec.NodeName) && p.Status.Reason != kubeapi.PodReasonNodeLost
}

func (f *Front) list(w http.ResponseWriter, r *http.Request, c caller) (any, int, error) {
	pods, err := f.pods.Pods(c.ns).List(labels.Everything())
	if err != nil {
		return nil, 0, err
	}
	byNode := map[string]*corev1.Pod{}
	for _, p := range pods {
		if f.askable(p) {
			byNode[p.Spec.NodeName] = p
		}
	}
	var mu sync.Mutex
	answered := map[string]bool{}
	found := map[string]api.Sandbox{}
	var wg sync.WaitGroup
	for node, p := range byNode {
		wg.Go(func() {
			var sbs []api.Sandbox
			if err := f.nodeCall(r.Context(), p, c.tenant, "/api/v1/sandboxes?"+r.URL.RawQuery, &sbs); err != nil {
				f.log.Warn("list a node's sandboxes", "node", node, "err", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			answered[node] = true
			for _, sb := range sbs {
				found[sb.ID] = sb
			}
		})
	}
	wg.Wait()
	statuses := r.URL.Query()["status"]
	out := []api.Sandbox{}
	for _, p := range pods {
		id := p.Annotations[kubeapi.AnnotationSandbox]
		if sb, ok := found[id]; ok {
			out = append(out, f.withEndpoints(r, sb))
			continue
		}
		if f.reachable(p) && answered[p.Spec.NodeName] {
			continue // its node left it out: the query's filter
		}
		sb := f.lostView(p)
		if len(statuses) == 0 || slices.ContainsFunc(statuses, func(s string) bool { return slices.Contains(strings.Split(s, ","), sb.Status) }) {
			out = append(out, f.withEndpoints(r, sb))
		}
	}
	slices.SortFunc(out, func(a, b api.Sandbox) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out, http.StatusOK, nil
}

// terminate deletes the sandbox's Pod: its node ends the sandbox and removes the Pod. A Pod
// of a lost node (or none) is removed at once; the node, should it come back, ends what it
// had (a Pod that is gone).
func (f *Front) terminate(w http.ResponseWriter, r *http.Request, c caller) (any, int, error) {
	p, err := f.podOf(c, r.PathValue("id"))
	if err != nil {
		return nil, 0, err
	}
	sb := f.lostView(p)
	if err := f.removePod(r.Context(), p); err != nil {
		return nil, 0, err
	}
	if sandbox.Live(sb.Status) || sb.Status == api.StatusCompleted || sb.Status == api.StatusFailed {
		sb.Status, sb.Reason = api.StatusTerminated, sandbox.ReasonTerminated
	}
	sb.UpdatedAt = time.Now().UTC()
	return f.withEndpoints(r, sb), http.StatusOK, nil
}

// removePod deletes a sandbox's Pod and waits until it is gone: its node has then ended the
// sandbox (it removes the Pod after). A Pod no node runs (none yet, or a lost one) goes at once.
func (f *Front) removePod(ctx context.Context, p *corev1.Pod) error {
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}}
	if !f.reachable(p) {
		zero := int64(0)
		opts.GracePeriodSeconds = &zero
	}
	if err := f.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, opts); err != nil && !apierrors.IsNotFound(err) {
		return apiError(err)
	}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if q, err := f.pods.Pods(p.Namespace).Get(p.Name); err != nil || q.UID != p.UID {
			break
		}
	}
	return nil
}

// proxy passes a call on one sandbox (exec, its WebSocket, files, logs, events, metrics,
// snapshots, ...) to the node that runs it, as its tenant.
func (f *Front) proxy(w http.ResponseWriter, r *http.Request, c caller) (any, int, error) {
	_, p, err := f.sandboxOnNode(r, c)
	if err != nil {
		return nil, 0, err
	}
	base, err := f.nodeURL(p.Spec.NodeName)
	if err != nil {
		return nil, 0, err
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(base)
			pr.Out.Header.Del("Authorization") // the tenant's key stays here
			pr.Out.Header.Set(kubeapi.HeaderTenant, c.tenant)
			// The node answers as the client sees the front: its endpoints name the front.
			pr.Out.Host = pr.In.Host
			scheme := "http"
			if pr.In.TLS != nil {
				scheme = "https"
			}
			pr.Out.Header.Set(kubeapi.HeaderFrontScheme, scheme)
		},
		Transport:     f.nodeRT,
		FlushInterval: -1, // logs and events stream
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			writeErrorAs(w, errdefs.New(errdefs.ErrServiceUnavailable, "node %s did not answer: %v", p.Spec.NodeName, err), strings.HasPrefix(r.URL.Path, compat.Prefix))
		},
	}
	ctx, stop := f.untilLost(r.Context(), p.Spec.NodeName)
	defer stop()
	rp.ServeHTTP(w, r.WithContext(ctx))
	return nil, 0, errWritten
}

// maxBody bounds a request's JSON body.
const maxBody = 1 << 20

// decodeBody decodes r's JSON body into v strictly (no unknown field, at most maxBody bytes);
// with optional an empty body leaves v as it is.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return errdefs.Invalid("body", "cannot read the body (at most %d bytes): %v", maxBody, err)
	}
	if optional && len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errdefs.Invalid("body", "the request body: %v", err)
	}
	return nil
}

// sandboxOnNode is the caller's sandbox of r's {id} and its Pod, once on a node that can take a
// call on it (onNode).
func (f *Front) sandboxOnNode(r *http.Request, c caller) (string, *corev1.Pod, error) {
	id := r.PathValue("id")
	p, err := f.podOf(c, id)
	if err != nil {
		return id, nil, err
	}
	p, err = f.onNode(r.Context(), c, p)
	return id, p, err
}

// onNode waits while pod's sandbox is being made (settle) and returns its Pod once it is on a
// node that can take a call on it; a lost node's, or one not placed, is a 409 with its status,
// and one whose node does not answer a 503.
func (f *Front) onNode(ctx context.Context, c caller, p *corev1.Pod) (*corev1.Pod, error) {
	p, on, err := f.settle(ctx, c, p)
	id := p.Annotations[kubeapi.AnnotationSandbox]
	switch {
	case f.isLost(p.Spec.NodeName) || p.Status.Reason == kubeapi.PodReasonNodeLost:
		return nil, &conflict{status: api.StatusFailed, msg: fmt.Sprintf("sandbox %s is failed: its node %s was lost (node_lost)", id, p.Spec.NodeName)}
	case err != nil:
		return nil, err
	case !on:
		sb := podView(p)
		return nil, &conflict{status: sb.Status, msg: fmt.Sprintf("sandbox %s is %s: not on a node yet", id, sb.Status)}
	}
	return p, nil
}

// nodeURL is the base of the front's routes on node's kubelet port.
func (f *Front) nodeURL(node string) (*url.URL, error) {
	n, err := f.nodes.Get(node)
	if err != nil {
		return nil, errdefs.New(errdefs.ErrServiceUnavailable, "node %s: %v", node, err)
	}
	ip := ""
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			ip = a.Address
		}
	}
	port := n.Status.DaemonEndpoints.KubeletEndpoint.Port
	if ip == "" || port == 0 {
		return nil, errdefs.New(errdefs.ErrServiceUnavailable, "node %s has no InternalIP and kubelet port", node)
	}
	return &url.URL{Scheme: "https", Host: netJoin(ip, port), Path: kubeapi.FrontPrefix}, nil
}

func netJoin(ip string, port int32) string {
	if strings.Contains(ip, ":") {
		return "[" + ip + "]:" + strconv.Itoa(int(port))
	}
	return ip + ":" + strconv.Itoa(int(port))
}

// nodeCall GETs path from the node of pod as tenant and decodes the answer's data into out.
func (f *Front) nodeCall(ctx context.Context, p *corev1.Pod, tenant, path string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, nodeCallFor)
	defer cancel()
	return f.nodeDo(ctx, p.Spec.NodeName, tenant, http.MethodGet, path, nil, out)
}

// nodeCallFor bounds a read from one node; maxNodeAnswer bounds its size.
const (
	nodeCallFor   = 10 * time.Second
	maxNodeAnswer = 32 << 20
)

// nodeDo calls method path on node as tenant, with body as JSON (nil: none), and decodes the
// answer's data into out (nil: drop it). A node's refusal is its error as it gave it, kind,
// field and status, so that it answers the tenant as the node would (a 404 stays a 404).
func (f *Front) nodeDo(ctx context.Context, node, tenant, method, path string, body, out any) error {
	base, err := f.nodeURL(node)
	if err != nil {
		return err
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base.String()+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set(kubeapi.HeaderTenant, tenant)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := f.nodeRT.RoundTrip(req)
	if err != nil {
		return errdefs.New(errdefs.ErrServiceUnavailable, "node %s did not answer: %v", node, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxNodeAnswer+1))
	if err != nil {
		return errdefs.New(errdefs.ErrServiceUnavailable, "node %s: %v", node, err)
	}
	if len(b) > maxNodeAnswer {
		return errdefs.New(errdefs.ErrServiceUnavailable, "node %s answered more than %d MiB", node, maxNodeAnswer>>20)
	}
	var env api.Response[json.RawMessage]
	if err := json.Unmarshal(b, &env); err != nil {
		return fmt.Errorf("node %s answered %s: %s", node, resp.Status, bytes.TrimSpace(b[:min(len(b), 200)]))
	}
	if !env.OK || env.Error != nil {
		return nodeError(node, resp.StatusCode, env.Error)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(env.Data, out)
}

// withEndpoints points sb's endpoints at the front, which routes them.
func (f *Front) withEndpoints(r *http.Request, sb api.Sandbox) api.Sandbox {
	h, ws := "http://", "ws://"
	if r.TLS != nil {
		h, ws = "https://", "wss://"
	}
	base := "/api/v1/sandboxes/" + sb.ID
	sb.Endpoints = api.Endpoints{Exec: ws + r.Host + base + "/exec", Logs: ws + r.Host + base + "/logs",
		Files: h + r.Host + base + "/files", Metrics: h + r.Host + base + "/metrics"}
	return sb
}

// scheduledCondition is pod's PodScheduled condition (zero when it has none yet).
func scheduledCondition(p *corev1.Pod) corev1.PodCondition {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c
		}
	}
	return corev1.PodCondition{}
}

// unschedulable says whether the scheduler has found no node for pod for longer than d.
func unschedulable(p *corev1.Pod, d time.Duration) bool {
	c := scheduledCondition(p)
	return p.Spec.NodeName == "" && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable &&
		time.Since(p.CreationTimestamp.Time) > d
}
