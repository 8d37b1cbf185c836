// Package cluster is the Kubernetes e2e (docs/kubernetes.md): a real etcd, kube-apiserver,
// kube-scheduler and kube-controller-manager (the binaries scripts/k8s/build.sh caches) and
// three airlock daemons registered as nodes, driven through client-go as kubectl would.
package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/airlockrun/airlock/internal/kube/cluster"
	"github.com/airlockrun/airlock/internal/testutil"
)

// RequireEnv, set to 1, makes a missing binary a failure instead of a skip (make test sets it:
// its deps build the binaries).
const RequireEnv = "AIRLOCK_TEST_REQUIRE_K8S"

var (
	kc    *cluster.Cluster
	nodes []*cluster.Node
	cs    *kubernetes.Clientset
	rc    *rest.Config
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Geteuid() != 0 {
		if os.Getenv(testutil.RequireRootEnv) == "1" {
			fmt.Fprintf(os.Stderr, "test/cluster needs root (its airlock nodes make sandboxes), and %s=1 says skipping is not allowed\n", testutil.RequireRootEnv)
			return 1
		}
		fmt.Fprintln(os.Stderr, "SKIP: test/cluster needs root (its airlock nodes make sandboxes)")
		return 0
	}
	bin := os.Getenv("AIRLOCK_K8S_DIR")
	if why := cluster.Missing(bin); why != "" {
		if os.Getenv(RequireEnv) == "1" {
			fmt.Fprintf(os.Stderr, "test/cluster: %s, and %s=1 says skipping is not allowed\n", why, RequireEnv)
			return 1
		}
		fmt.Fprintf(os.Stderr, "SKIP: test/cluster: %s\n", why)
		return 0
	}
	for _, d := range cluster.SweepStale(os.TempDir(), "airlock-cluster-") {
		fmt.Fprintf(os.Stderr, "test/cluster: removed %s, left by a run that was killed\n", d)
	}
	tmp, err := os.MkdirTemp("", "airlock-cluster-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "test/cluster:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	if err := os.WriteFile(filepath.Join(tmp, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "test/cluster:", err)
		return 1
	}
	airlock, err := buildAirlock(tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, "test/cluster:", err)
		return 1
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := filepath.Join(tmp, "cluster")
	start := time.Now()
	kc, nodes, err = cluster.Up(ctx, cluster.UpOptions{Options: cluster.Options{Dir: dir, BinDir: bin, ControllerManager: true, AgentSandbox: true}, Airlock: airlock, Nodes: 3}, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "test/cluster: start the cluster:", err)
		dumpLogs(dir)
		return 1
	}
	fmt.Fprintf(os.Stderr, "test/cluster: control plane and 3 airlock nodes up in %s\n", time.Since(start).Round(100*time.Millisecond))
	if rc, err = clientcmd.BuildConfigFromFlags("", kc.Kubeconfig); err == nil {
		cs, err = kubernetes.NewForConfig(rc)
	}
	code := 1
	if err != nil {
		fmt.Fprintln(os.Stderr, "test/cluster: client:", err)
	} else {
		code = m.Run()
	}
	kc.Stop()
	if leaks := leaksOf(dir, nodes); len(leaks) > 0 {
		fmt.Fprintf(os.Stderr, "test/cluster: the stopped cluster left:\n  %s\n", strings.Join(leaks, "\n  "))
		code = 1
	}
	if code != 0 {
		dumpLogs(dir)
	}
	return code
}

// buildAirlock builds the binaries under test into dir, airlock and beside it airlock-kube
// (which airlock serve --kubeconfig runs) and airlock-guest, or takes $AIRLOCK_BIN (with airlock-kube beside it).
func buildAirlock(dir string) (string, error) {
	if bin := os.Getenv("AIRLOCK_BIN"); bin != "" {
		return filepath.Abs(bin)
	}
	if err := testutil.BuildCommands(dir, "airlock", "airlock-kube", "airlock-guest"); err != nil {
		return "", err
	}
	return filepath.Join(dir, "airlock"), nil
}

// dumpLogs prints the tail of every component's log, for a failed run.
func dumpLogs(dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		if len(b) > 6000 {
			b = b[len(b)-6000:]
		}
		fmt.Fprintf(os.Stderr, "----- %s (tail)\n%s\n", filepath.Base(l), b)
	}
}
