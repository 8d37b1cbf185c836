package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/airlockrun/airlock/internal/kube/kubeapi"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

// NodeTenant is the tenant whose sandboxes a local cluster's Pods become.
const NodeTenant = "cluster"

// Node is an airlock daemon of the local cluster, registered as a Kubernetes node.
type Node struct {
	Name string
	// API is the daemon's own /api/v1 (http://127.0.0.1:PORT).
	API string
	// DataDir is its data dir: its instance, so its cgroups, uids and network names are its own.
	DataDir string
	// Log is its output.
	Log string

	argv []string // the daemon's command line, for Restart
	cmd  *exec.Cmd
	done chan struct{}
	logf *os.File
}

// Client is a client of the apiserver as the cluster's administrator.
func (c *Cluster) Client() (*kubernetes.Clientset, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return kubernetes.NewForConfig(rc)
}

// Prepare creates what airlock nodes need in the cluster: the node ClusterRole bound to the
// local nodes' group, and the airlock RuntimeClasses.
func (c *Cluster) Prepare(ctx context.Context) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	if err := kubeapi.EnsureNodeRBAC(ctx, cs, kubeapi.NodeGroup); err != nil {
		return err
	}
	return kubeapi.EnsureRuntimeClasses(ctx, cs)
}

// StartNode starts `airlock serve` (the binary at airlock) as node name: its own data dir
// under the cluster's directory, its own API and kubelet API ports on loopback, a kubeconfig
// of the airlock:nodes group and a kubelet serving certificate signed by the cluster's CA. It
// returns once the node is Ready in the cluster.
func (c *Cluster) StartNode(ctx context.Context, airlock, name string) (*Node, error) {
	dir := filepath.Join(c.opts.Dir, "nodes", name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	kubeconfig, err := c.WriteKubeconfig("node-"+name, "airlock-node:"+name, []string{kubeapi.NodeGroup})
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	serving, err := c.ca.Issue(name, nil, "127.0.0.1", name)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	cert, key, err := serving.Write(dir, "kubelet")
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	n := &Node{Name: name, API: "http://127.0.0.1:" + strconv.Itoa(ports[0]), DataDir: filepath.Join(dir, "data"),
		Log: filepath.Join(c.opts.Dir, "logs", name+".log")}
	if n.logf, err = os.OpenFile(n.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return nil, err
	}
	n.argv = []string{airlock, "serve", "--data-dir", n.DataDir, "--listen", "127.0.0.1:" + strconv.Itoa(ports[0]),
		"--kubeconfig", kubeconfig, "--node-name", name, "--pod-tenant", NodeTenant, "--tenant-label",
		"--kubelet-listen", "127.0.0.1:" + strconv.Itoa(ports[1]), "--kubelet-tls-cert", cert, "--kubelet-tls-key", key,
		"--kubelet-client-ca", c.caFile}
	if err := n.start(); err != nil {
		n.logf.Close()
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	c.mu.Lock()
	c.nodes = append(c.nodes, n)
	c.mu.Unlock()
	if err := c.waitNode(ctx, n, 90*time.Second); err != nil {
		return nil, err
	}
	return n, nil
}

// start starts n's daemon.
func (n *Node) start() error {
	n.cmd = exec.Command(n.argv[0], n.argv[1:]...)
	n.cmd.Stdout, n.cmd.Stderr = n.logf, n.logf
	n.cmd.Env = append(os.Environ(), "AIRLOCK_LOG=info")
	// A daemon whose starter dies stops as it would at Ctrl-C: it ends its sandboxes, so that
	// nothing of theirs outlives the cluster.
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	if err := n.cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	n.done = done
	go func(cmd *exec.Cmd) {
		_ = cmd.Wait() // how it ended is in its log
		close(done)
	}(n.cmd)
	return nil
}

// Restart starts node n's daemon again, on the same data dir, ports and names, after Kill, and
// waits until the node is Ready again.
func (c *Cluster) Restart(ctx context.Context, n *Node) error {
	select {
	case <-n.done:
	default:
		return fmt.Errorf("node %s is running", n.Name)
	}
	if err := n.start(); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	return c.waitNode(ctx, n, 90*time.Second)
}

// waitNode waits until node n answers on its API and is Ready in the cluster.
func (c *Cluster) waitNode(ctx context.Context, n *Node, within time.Duration) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(within)
	for {
		select {
		case <-n.done:
			return fmt.Errorf("node %s exited at start; its log ends:\n%s", n.Name, tailFile(n.Log, 3000))
		default:
		}
		ready := false
		if kn, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); err == nil {
			for _, cond := range kn.Status.Conditions {
				if cond.Type == "Ready" && cond.Status == "True" {
					ready = true
				}
			}
		}
		if ready {
			resp, err := http.Get(n.API + "/healthz")
			if err == nil {
				resp.Body.Close()
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s not ready within %s; see %s", n.Name, within, n.Log)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Kill ends node n's daemon with SIGKILL, as a host that disappears would: its sandboxes are
// left for its next start to recover, or for StopNode's cleanup.
func (n *Node) Kill() error {
	if err := n.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-n.done
	return nil
}

// stop ends node n's daemon with SIGTERM (its sandboxes end with it), SIGKILL after 30 s.
func (n *Node) stop() {
	_ = n.cmd.Process.Signal(syscall.SIGTERM) // one that exited already: done is closed
	select {
	case <-n.done:
	case <-time.After(30 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.done
	}
	n.logf.Close()
	if n.DataDir != "" { // not the front API's
		removeInstanceCgroups(n.DataDir)
	}
}

// removeInstanceCgroups removes the cgroup directories a stopped airlock daemon on dataDir
// leaves, empty, in each hierarchy (<hierarchy>/<parent>/<instance>: made at its first sandbox,
// kept for the next): a local cluster's nodes do not come back. rmdir removes only an empty
// cgroup, so one with a sandbox still in it stays and the leak check names it.
func removeInstanceCgroups(dataDir string) {
	inst := uidalloc.InstanceOf(dataDir)
	for _, pattern := range []string{"/sys/fs/cgroup/*/*/" + inst, "/sys/fs/cgroup/*/" + inst} {
		dirs, _ := filepath.Glob(pattern)
		for _, d := range dirs {
			_ = os.Remove(d) // not empty: a leak, reported by whoever checks
		}
	}
}
