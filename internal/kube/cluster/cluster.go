// Package cluster starts a local Kubernetes control plane for development and tests (make
// cluster, test/cluster): etcd, kube-apiserver, kube-scheduler and kube-controller-manager, from
// the binaries scripts/k8s/build.sh pinned and cached, on loopback ports, with a PKI generated in
// the cluster's directory. Nothing here is used by a production airlock.
package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DefaultBinDir is where scripts/k8s/build.sh installs the binaries.
const DefaultBinDir = "/usr/local/lib/airlock/k8s"

// Options says where the cluster lives.
type Options struct {
	// Dir holds everything the cluster writes: PKI, kubeconfigs, etcd's data, logs.
	Dir string
	// BinDir is scripts/k8s/build.sh's DEST (DefaultBinDir when empty): bin/ and crds/.
	BinDir string
	// ControllerManager also starts kube-controller-manager (service accounts, garbage
	// collection of owned objects, node lifecycle), which agent-sandbox needs.
	ControllerManager bool
	// AgentSandbox also installs agent-sandbox's CRDs and runs its controller
	// (StartAgentSandbox, agentsandbox.go).
	AgentSandbox bool
}

// Cluster is a running control plane.
type Cluster struct {
	opts Options
	log  *slog.Logger
	// Kubeconfig is the cluster administrator's kubeconfig (system:masters).
	Kubeconfig string
	// Server is the apiserver's URL.
	Server string
	ca     *CA
	caFile string

	mu    sync.Mutex // guards procs, nodes and atStop
	procs []*proc
	nodes []*Node
	// atStop runs after the processes have stopped (agent-sandbox's namespace and forwarders).
	atStop []func()
}

type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// Binaries are the executables a cluster needs, relative to BinDir.
var Binaries = []string{"bin/etcd", "bin/kube-apiserver", "bin/kube-scheduler", "bin/kube-controller-manager"}

// Missing returns why the binaries in binDir cannot start a cluster ("" when they can).
func Missing(binDir string) string {
	if binDir == "" {
		binDir = DefaultBinDir
	}
	if _, err := os.Stat(filepath.Join(binDir, "manifest.json")); err != nil {
		return fmt.Sprintf("no Kubernetes binaries in %s (build them with make cluster-deps, about 15 minutes cold: scripts/k8s/build.sh)", binDir)
	}
	for _, b := range Binaries {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			return fmt.Sprintf("%s is missing (run scripts/k8s/build.sh)", filepath.Join(binDir, b))
		}
	}
	return ""
}

// Start brings up etcd, the apiserver, the scheduler (and the controller manager) and waits
// until the apiserver is ready. Stop ends them; so does ctx's end.
func Start(ctx context.Context, opts Options, log *slog.Logger) (_ *Cluster, err error) {
	if opts.BinDir == "" {
		opts.BinDir = DefaultBinDir
	}
	if why := Missing(opts.BinDir); why != "" {
		return nil, errors.New(why)
	}
	pki := filepath.Join(opts.Dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(opts.Dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(opts.Dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts, log: log}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if c.ca, err = newCA("airlock-local-cluster"); err != nil {
		return nil, err
	}
	c.caFile = filepath.Join(pki, "ca.crt")
	if err := os.WriteFile(c.caFile, c.ca.CertPEM, 0o600); err != nil {
		return nil, err
	}
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, apiPort, schedPort, kcmPort := ports[0], ports[1], ports[2], ports[3], ports[4]
	c.Server = "https://127.0.0.1:" + strconv.Itoa(apiPort)

	serving, err := c.ca.Issue("kube-apiserver", nil, "127.0.0.1", "localhost", "kubernetes", "kubernetes.default",
		"kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "10.0.0.1")
	if err != nil {
		return nil, err
	}
	servingCert, servingKey, err := serving.Write(pki, "apiserver")
	if err != nil {
		return nil, err
	}
	kubeletClient, err := c.ca.Issue("kube-apiserver-kubelet-client", []string{"system:masters"})
	if err != nil {
		return nil, err
	}
	kcCert, kcKey, err := kubeletClient.Write(pki, "apiserver-kubelet-client")
	if err != nil {
		return nil, err
	}
	saKey, saPub, err := serviceAccountKeys(pki)
	if err != nil {
		return nil, err
	}
	if c.Kubeconfig, err = c.WriteKubeconfig("admin", "airlock-admin", []string{"system:masters"}); err != nil {
		return nil, err
	}

	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdClient)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(etcdPeer)
	if err := c.start("etcd", "--name=airlock", "--data-dir="+filepath.Join(opts.Dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=airlock="+peerURL, "--unsafe-no-fsync", "--log-level=warn"); err != nil {
		return nil, err
	}
	if err := c.start("kube-apiserver", "--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(apiPort),
		"--tls-cert-file="+servingCert, "--tls-private-key-file="+servingKey, "--client-ca-file="+c.caFile,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+saPub, "--service-account-signing-key-file="+saKey,
		"--service-cluster-ip-range=10.0.0.0/24", "--authorization-mode=Node,RBAC",
		"--kubelet-client-certificate="+kcCert, "--kubelet-client-key="+kcKey,
		"--kubelet-certificate-authority="+c.caFile, "--kubelet-preferred-address-types=InternalIP",
		// The kubernetes Service cannot point at loopback: no endpoints for it (nothing in a
		// sandbox Pod talks to the apiserver).
		"--endpoint-reconciler-type=none",
		"--profiling=false", "--v=0"); err != nil {
		return nil, err
	}
	if err := c.waitReady(ctx, 2*time.Minute); err != nil {
		return nil, err
	}
	if err := c.start("kube-scheduler", "--kubeconfig="+c.Kubeconfig, "--authentication-kubeconfig="+c.Kubeconfig,
		"--authorization-kubeconfig="+c.Kubeconfig, "--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(schedPort), "--profiling=false"); err != nil {
		return nil, err
	}
	if opts.AgentSandbox {
		// Before the controller manager: its garbage collector watches the kinds served when it
		// starts (others only from its resync, 30 s later), and a Sandbox's Pod goes with it.
		if err := c.StartAgentSandbox(ctx); err != nil {
			return nil, err
		}
	}
	if opts.ControllerManager {
		if err := c.start("kube-controller-manager", "--kubeconfig="+c.Kubeconfig, "--authentication-kubeconfig="+c.Kubeconfig,
			"--authorization-kubeconfig="+c.Kubeconfig, "--leader-elect=false",
			"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(kcmPort),
			"--service-account-private-key-file="+saKey, "--root-ca-file="+c.caFile,
			"--use-service-account-credentials=false", "--profiling=false",
			// What sandbox Pods and agent-sandbox need, nothing that runs workloads of its own.
			"--controllers=serviceaccount-controller,serviceaccount-token-controller,garbage-collector-controller,"+
				"namespace-controller,node-lifecycle-controller,pod-garbage-collector-controller,root-ca-certificate-publisher-controller,"+
				"resourcequota-controller"); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// CA is the cluster's certificate authority: it verifies every client of the apiserver and of the
// airlock nodes' kubelet API, and signs their serving certificates.
func (c *Cluster) CA() *CA { return c.ca }

// CAFile is the CA's certificate on disk.
func (c *Cluster) CAFile() string { return c.caFile }

// Dir is the cluster's directory.
func (c *Cluster) Dir() string { return c.opts.Dir }

// BinDir is where the cluster's binaries (and agent-sandbox's) are.
func (c *Cluster) BinDir() string { return c.opts.BinDir }

// WriteKubeconfig writes DIR/NAME.kubeconfig for a client certificate of user in groups.
func (c *Cluster) WriteKubeconfig(name, user string, groups []string) (string, error) {
	kp, err := c.ca.Issue(user, groups)
	if err != nil {
		return "", err
	}
	p := filepath.Join(c.opts.Dir, name+".kubeconfig")
	return p, os.WriteFile(p, kubeconfig(c.Server, c.ca.CertPEM, kp, user), 0o600)
}

// Start runs a binary of BinDir/bin as part of the cluster (agent-sandbox's controller, say),
// its output in DIR/logs/NAME.log; Stop ends it with the rest.
func (c *Cluster) Start(name string, args ...string) error { return c.start(name, args...) }

func (c *Cluster) start(name string, args ...string) error {
	f, err := os.OpenFile(filepath.Join(c.opts.Dir, "logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(c.opts.BinDir, "bin", name), args...)
	cmd.Stdout, cmd.Stderr = f, f
	// Killed with the process that started it, should that one die first (a test's crash).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), log: f}
	go func() {
		_ = cmd.Wait() // its status is read from ProcessState
		close(p.done)
	}()
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	c.log.Debug("started", "component", name, "pid", cmd.Process.Pid)
	return nil
}

// Stop ends the airlock nodes (each ends its sandboxes), then every process of the control
// plane, the last started first, each with SIGTERM and after 10 s SIGKILL; it waits for them.
func (c *Cluster) Stop() {
	c.mu.Lock()
	procs, nodes, atStop := c.procs, c.nodes, c.atStop
	c.procs, c.nodes, c.atStop = nil, nil, nil
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(n.stop)
	}
	wg.Wait()
	for i := len(procs) - 1; i >= 0; i-- {
		p := procs[i]
		_ = p.cmd.Process.Signal(syscall.SIGTERM) // one that exited already: done is closed
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		p.log.Close()
	}
	for _, f := range atStop {
		f()
	}
}

// Exited names a process of the cluster that has exited, or "".
func (c *Cluster) Exited() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		select {
		case <-p.done:
			return p.name
		default:
		}
	}
	return ""
}

// waitReady polls the apiserver's /readyz with the admin's certificate.
func (c *Cluster) waitReady(ctx context.Context, within time.Duration) error {
	kp, err := c.ca.Issue("airlock-readyz", []string{"system:masters"})
	if err != nil {
		return err
	}
	cert, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AddCert(c.ca.Cert)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	deadline := time.Now().Add(within)
	for {
		if name := c.Exited(); name != "" {
			return fmt.Errorf("%s exited at start; its log ends:\n%s", name, tailFile(filepath.Join(c.opts.Dir, "logs", name+".log"), 3000))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.Server+"/readyz", nil)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/readyz answered %s", resp.Status)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kube-apiserver not ready within %s (last: %w); see %s", within, err, filepath.Join(c.opts.Dir, "logs"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// freePorts returns n loopback ports free at the time of asking.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// FreePort returns one loopback port free at the time of asking.
func FreePort() (int, error) {
	p, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return p[0], nil
}

// tailFile is the last n bytes of the file at p, for an error that has to say why.
func tailFile(p string, n int64) string {
	f, err := os.Open(p)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart) // on failure: from the start
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// ownerFile, in a cluster's directory, holds the pid of the process that started the cluster.
const ownerFile = "owner.pid"

// SweepStale removes the cluster directories under parent whose names start with prefix and
// whose starter is gone: what a cluster killed with SIGKILL left (its processes died with it:
// the control plane by SIGKILL, the airlock nodes by SIGTERM, ending their sandboxes). It
// returns what it removed.
func SweepStale(parent, prefix string) []string {
	dirs, _ := filepath.Glob(filepath.Join(parent, prefix+"*"))
	var out []string
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, ownerFile))
		if err != nil {
			continue // not a cluster's, or one still starting
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || syscall.Kill(pid, 0) == nil {
			continue
		}
		nodes, _ := filepath.Glob(filepath.Join(d, "nodes", "*", "data"))
		nodes2, _ := filepath.Glob(filepath.Join(d, "*", "nodes", "*", "data")) // test/cluster's layout
		for _, n := range append(nodes, nodes2...) {
			removeInstanceCgroups(n)
		}
		if os.RemoveAll(d) == nil {
			out = append(out, d)
		}
	}
	return out
}
