package cluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/airlockrun/airlock/internal/kube/kubeapi"
)

// FrontNamespace is where a local cluster's front API reads its keys.
const FrontNamespace = "airlock-system"

// StartFront starts the front API (airlock serve --cluster kubernetes, the binary at airlock)
// on a loopback port, with a kubeconfig of the airlock:fronts group (which reaches the nodes'
// kubelet ports too: the cluster's CA signed both sides) and node-lost grace; it returns once
// it answers. Stop ends it with the nodes.
func (c *Cluster) StartFront(ctx context.Context, airlock string, grace time.Duration) (*Node, error) {
	cs, err := c.Client()
	if err != nil {
		return nil, err
	}
	if err := kubeapi.EnsureFrontRBAC(ctx, cs, kubeapi.FrontGroup, FrontNamespace); err != nil {
		return nil, err
	}
	kubeconfig, err := c.WriteKubeconfig("front", "airlock-front", []string{kubeapi.FrontGroup})
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	f := &Node{Name: "front", API: "http://127.0.0.1:" + strconv.Itoa(port), Log: filepath.Join(c.opts.Dir, "logs", "front.log")}
	if f.logf, err = os.OpenFile(f.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return nil, err
	}
	f.argv = []string{airlock, "serve", "--cluster", "kubernetes", "--kubeconfig", kubeconfig,
		"--listen", "127.0.0.1:" + strconv.Itoa(port), "--front-namespace", FrontNamespace, "--node-lost-grace", grace.String()}
	if err := f.start(); err != nil {
		f.logf.Close()
		return nil, fmt.Errorf("front API: %w", err)
	}
	c.mu.Lock()
	c.nodes = append(c.nodes, f)
	c.mu.Unlock()
	for deadline := time.Now().Add(time.Minute); ; {
		select {
		case <-f.done:
			return nil, fmt.Errorf("the front API exited at start; its log ends:\n%s", tailFile(f.Log, 3000))
		default:
		}
		if resp, err := http.Get(f.API + "/healthz"); err == nil {
			resp.Body.Close()
			return f, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the front API did not answer within a minute; see %s", f.Log)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// AddTenant makes tenant name in the cluster for the front API: its namespace (labelled, with
// quota q) and an API key, which it returns (only its hash is stored).
func (c *Cluster) AddTenant(ctx context.Context, name string, q kubeapi.Quota) (string, error) {
	cs, err := c.Client()
	if err != nil {
		return "", err
	}
	ns, quota := kubeapi.TenantObjects("tenant-"+name, name, q)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("tenant %s: %w", name, err)
	}
	if _, err := cs.CoreV1().ResourceQuotas(ns.Name).Create(ctx, quota, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("tenant %s: %w", name, err)
	}
	// The apiserver admits a Pod against a ResourceQuota once the controller has counted it.
	for deadline := time.Now().Add(time.Minute); ; {
		rq, err := cs.CoreV1().ResourceQuotas(ns.Name).Get(ctx, quota.Name, metav1.GetOptions{})
		if err == nil && len(rq.Status.Hard) > 0 {
			break
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("tenant %s: its ResourceQuota was not counted within a minute (kube-controller-manager's resourcequota-controller)", name)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var b [24]byte
	_, _ = rand.Read(b[:]) // crypto/rand does not fail on Linux
	key := "ak_" + hex.EncodeToString(b[:])
	if _, err := cs.CoreV1().Secrets(FrontNamespace).Create(ctx, kubeapi.APIKeySecret(FrontNamespace, "key-"+name+"-"+hex.EncodeToString(b[:3]), name, key), metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("tenant %s's key: %w", name, err)
	}
	return key, nil
}

// Binary is the airlock binary n runs.
func (n *Node) Binary() string { return n.argv[0] }

// ClientTLS is a TLS configuration for user cn (no groups, so no rights unless granted): a client
// certificate the cluster's CA signed, trusting that CA. Tests call a node's kubelet port with it
// as a stranger to the cluster's RBAC would.
func (c *Cluster) ClientTLS(cn string) (*tls.Config, error) {
	kp, err := c.ca.Issue(cn, nil)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(c.ca.Cert)
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}
