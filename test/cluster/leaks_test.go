package cluster

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlockrun/airlock/internal/kube/cluster"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

// leaksOf lists what a stopped cluster in dir left on the host: processes that name the
// directory (etcd, the apiserver, the nodes' daemons), mounts under it, and each node's
// sandbox cgroups and uid ranges (found by its instance: no other airlock's are counted).
func leaksOf(dir string, nodes []*cluster.Node) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(dir)) {
			out = append(out, fmt.Sprintf("process %s: %s", filepath.Base(filepath.Dir(p)), strings.ReplaceAll(string(bytes.TrimRight(b, "\x00")), "\x00", " ")))
		}
	}
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, l := range strings.Split(string(mi), "\n") {
			if strings.Contains(l, dir) {
				out = append(out, "mount "+l)
			}
		}
	}
	for _, n := range nodes {
		out = append(out, nodeLeaks(n)...)
	}
	return out
}

// nodeLeaks lists node n's sandbox cgroups (in every hierarchy) and uid ranges.
func nodeLeaks(n *cluster.Node) []string {
	inst := uidalloc.InstanceOf(n.DataDir)
	var out []string
	hier, _ := filepath.Glob("/sys/fs/cgroup/*")
	hier = append(hier, "/sys/fs/cgroup")
	for _, h := range hier {
		_ = filepath.WalkDir(h, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			if strings.Count(strings.TrimPrefix(p, h), "/") > 3 {
				return filepath.SkipDir
			}
			if d.Name() == inst {
				out = append(out, "cgroup "+p+" of node "+n.Name)
				return filepath.SkipDir
			}
			return nil
		})
	}
	for _, r := range uidalloc.Records(uidalloc.DefaultDir, func(r uidalloc.Record) bool { return r.Instance == inst }) {
		out = append(out, fmt.Sprintf("uid range %v of sandbox %s on node %s", r.Range, r.Sandbox, n.Name))
	}
	return out
}

// sandboxLeaks lists what sandbox id left on node n: its uid range and its cgroups.
func sandboxLeaks(n *cluster.Node, id string) []string {
	inst := uidalloc.InstanceOf(n.DataDir)
	var out []string
	for _, r := range uidalloc.Records(uidalloc.DefaultDir, func(r uidalloc.Record) bool { return r.Instance == inst && r.Sandbox == id }) {
		out = append(out, fmt.Sprintf("uid range %v", r.Range))
	}
	cgs, _ := filepath.Glob("/sys/fs/cgroup/*/*/" + inst + "/" + id)
	more, _ := filepath.Glob("/sys/fs/cgroup/*/*/*/" + inst + "/" + id)
	for _, cg := range append(cgs, more...) {
		out = append(out, "cgroup "+cg)
	}
	return out
}
