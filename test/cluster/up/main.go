// Command up is make cluster: a local Kubernetes cluster whose nodes are airlock daemons
// (docs/kubernetes.md#a-local-cluster). It starts etcd, kube-apiserver, kube-scheduler and
// kube-controller-manager on loopback from the cached binaries, three airlock nodes, prints a
// KUBECONFIG and an example, and at Ctrl-C (or SIGTERM) stops everything and removes its
// directory.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/airlockrun/airlock/internal/kube/cluster"
	"github.com/airlockrun/airlock/internal/kube/kubeapi"
)

func main() { os.Exit(run()) }

func run() int {
	airlock := flag.String("airlock", "bin/airlock", "the airlock binary the nodes run")
	nodes := flag.Int("nodes", 3, "how many airlock nodes")
	binDir := flag.String("k8s-dir", os.Getenv("AIRLOCK_K8S_DIR"), "scripts/k8s/build.sh's directory (default "+cluster.DefaultBinDir+")")
	dir := flag.String("dir", "", "the cluster's directory, removed at the end (default a new one under $TMPDIR)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	bin, err := filepath.Abs(*airlock)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		return 2
	}
	if _, err := os.Stat(bin); err != nil {
		fmt.Fprintf(os.Stderr, "cluster: the airlock binary: %v (make build)\n", err)
		return 2
	}
	for _, d := range cluster.SweepStale(os.TempDir(), "airlock-cluster-") {
		log.Info("removed a cluster's directory left by a run that was killed", "dir", d)
	}
	if *dir == "" {
		if *dir, err = os.MkdirTemp("", "airlock-cluster-"); err != nil {
			fmt.Fprintln(os.Stderr, "cluster:", err)
			return 1
		}
	}
	defer os.RemoveAll(*dir)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	c, ns, err := cluster.Up(ctx, cluster.UpOptions{Options: cluster.Options{Dir: *dir, BinDir: *binDir, ControllerManager: true, AgentSandbox: true},
		Airlock: bin, Nodes: *nodes}, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		fmt.Fprintln(os.Stderr, "cluster: the components' logs were in", filepath.Join(*dir, "logs"))
		return 1
	}
	defer c.Stop()
	front, err := c.StartFront(ctx, bin, 40*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster: the front API:", err)
		return 1
	}
	key, err := c.AddTenant(ctx, "demo", kubeapi.Quota{MaxSandboxes: 20, MaxMemoryMB: 20 * 2048})
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		return 1
	}
	kubectl := filepath.Join(c.BinDir(), "bin", "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		kubectl = "kubectl"
	}
	fmt.Printf(`
A Kubernetes cluster with %d airlock nodes is up (%s): the apiserver at %s.
Logs: %s

  export KUBECONFIG=%s
  %s get nodes -L runtime.airlock.dev/airlock-process
  cat <<'YAML' | %s apply -f -
  apiVersion: v1
  kind: Pod
  metadata: {name: hello}
  spec:
    runtimeClassName: airlock-process
    restartPolicy: Never
    containers:
    - name: agent
      image: airlock.dev/template/host
      command: [python3, -c, "print(6*7)"]
      resources: {limits: {cpu: 500m, memory: 256Mi}}
  YAML
  %s logs hello      # 42, once it is Completed
  %s delete pod hello

The front API (airlock serve --cluster kubernetes), tenant demo:

  export AIRLOCK_HOST=%s AIRLOCK_TOKEN=%s
  %s create --isolation process         # prints the sandbox's ID, on one of the nodes
  %s exec ID -- python3 -c 'print(6*7)'

Ctrl-C stops the cluster and removes everything it made.
`, len(ns), time.Since(start).Round(100*time.Millisecond), c.Server, filepath.Join(*dir, "logs"), c.Kubeconfig, kubectl, kubectl, kubectl, kubectl, front.API, key, bin, bin)
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "cluster: stopping")
	return 0
}
