// Package arch guards the layering of the module: which packages may import which. It has no
// code, only this test, which reads every non-test Go file's imports.
package arch

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/airlockrun/airlock"

// imports maps each package of the module (by path relative to the module root) to what its
// non-test files import: other packages of the module (relative), or "std" / "ext:PATH".
func imports(t *testing.T) map[string][]string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	out := map[string][]string{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		rel = filepath.ToSlash(rel)
		for _, im := range f.Imports {
			path := strings.Trim(im.Path.Value, `"`)
			switch {
			case path == module || strings.HasPrefix(path, module+"/"):
				path = strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
			case !strings.Contains(strings.Split(path, "/")[0], "."):
				path = "std"
			default:
				path = "ext:" + path
			}
			if !slices.Contains(out[rel], path) {
				out[rel] = append(out[rel], path)
			}
		}
		if _, ok := out[rel]; !ok {
			out[rel] = nil
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func under(pkg string, prefixes ...string) bool {
	for _, p := range prefixes {
		if pkg == p || strings.HasPrefix(pkg, p+"/") {
			return true
		}
	}
	return false
}

// levelOf is the concrete level pkg belongs to, or "".
func levelOf(pkg string, concrete []string) string {
	for _, c := range concrete {
		if under(pkg, c) {
			return c
		}
	}
	return ""
}

func TestLayers(t *testing.T) {
	g := imports(t)
	if len(g["internal/manager"]) == 0 {
		t.Fatalf("found no imports of internal/manager: the walk is wrong (%d packages)", len(g))
	}
	concrete := []string{"internal/driver/process", "internal/driver/container", "internal/driver/wasm", "internal/driver/microvm"}
	rules := []struct {
		name string
		// broken reports whether pkg importing dep breaks the rule.
		broken func(pkg, dep string) bool
	}{
		{"the wire types (api) import only the standard library", func(pkg, dep string) bool {
			return pkg == "api" && dep != "std"
		}},
		{"the Go SDK (client) imports only the standard library, api and internal/websocket", func(pkg, dep string) bool {
			return under(pkg, "client", "internal/websocket") && dep != "std" && dep != "api" && dep != "internal/websocket" && !under(dep, "client")
		}},
		{"drivers never import the daemon's upper layers", func(pkg, dep string) bool {
			return under(pkg, "internal/driver") && under(dep, "internal/manager", "internal/server", "internal/cli", "internal/daemon", "internal/levels", "internal/config")
		}},
		{"only levels, daemon, the binary (and its entry: the roles it starts as) and the tests' drivertest import a concrete level", func(pkg, dep string) bool {
			// drivertest gives the container and wasm suites the process level they run on.
			return under(dep, concrete...) && !under(pkg, "internal/levels", "internal/daemon", "internal/entry", "internal/driver/drivertest", "cmd", "test") &&
				levelOf(pkg, concrete) != levelOf(dep, concrete)
		}},
		{"one level never imports another", func(pkg, dep string) bool {
			l := levelOf(pkg, concrete)
			return l != "" && levelOf(dep, concrete) != "" && levelOf(dep, concrete) != l
		}},
		{"nothing under internal imports the CLI, the binary or the tests", func(pkg, dep string) bool {
			return under(pkg, "internal", "api", "client") && under(dep, "internal/cli", "cmd", "test") && !under(pkg, "internal/cli")
		}},
		{"the tests' helpers (testutil) are imported by tests only", func(pkg, dep string) bool {
			return dep == "internal/testutil"
		}},
		{"the MCP server (mcpserve) imports only api and the MCP SDK: the daemon and the CLI each give it their backend", func(pkg, dep string) bool {
			return pkg == "internal/mcpserve" && dep != "std" && dep != "api" && !strings.HasPrefix(dep, "ext:github.com/modelcontextprotocol/go-sdk/")
		}},
		{"the tool gateway (tools) is imported only by the server, the daemon and the tests", func(pkg, dep string) bool {
			return dep == "internal/tools" && !under(pkg, "internal/server", "internal/daemon", "cmd", "test")
		}},
		{"the Kubernetes code (internal/kube, client-go) is linked only into airlock-kube: airlock is every sandbox's init", func(pkg, dep string) bool {
			return (under(dep, "internal/kube") || strings.HasPrefix(dep, "ext:k8s.io/") || strings.HasPrefix(dep, "ext:github.com/virtual-kubelet/")) &&
				!under(pkg, "internal/kube", "cmd/airlock-kube", "test", "scripts")
		}},
		{"the server is imported only by the daemon, the CLI (serve) and the tests", func(pkg, dep string) bool {
			return under(dep, "internal/server") && !under(pkg, "internal/server", "internal/daemon", "internal/cli", "cmd", "test")
		}},
	}
	pkgs := make([]string, 0, len(g))
	for p := range g {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, r := range rules {
		for _, p := range pkgs {
			for _, d := range g[p] {
				if r.broken(p, d) {
					t.Errorf("%s: %s imports %s", r.name, p, d)
				}
			}
		}
	}
}

// TestGuestBinary: cmd/airlock-guest, which every microvm guest runs twice per boot (its PID 1
// and the sandbox's init), reaches only the guest's side of airlock: each package more is
// initialised at both starts, under a software CPU (internal/driver/microvm/guestbin.go).
func TestGuestBinary(t *testing.T) {
	g := imports(t)
	seen := map[string]bool{}
	var walk func(pkg string)
	walk = func(pkg string) {
		if seen[pkg] {
			return
		}
		seen[pkg] = true
		for _, d := range g[pkg] {
			if d != "std" && !strings.HasPrefix(d, "ext:") {
				walk(d)
			} else {
				seen[d] = true
			}
		}
	}
	walk("cmd/airlock-guest")
	if !seen["internal/guest/vm"] || !seen["internal/guest/pid1"] {
		t.Fatalf("cmd/airlock-guest does not reach the guest agent and init: the walk is wrong (%v)", seen)
	}
	for dep := range seen {
		if under(dep, "internal/driver", "internal/manager", "internal/server", "internal/daemon", "internal/cli", "internal/levels",
			"internal/store", "internal/tools", "internal/kube", "internal/guest/host", "client") ||
			(strings.HasPrefix(dep, "ext:") && !under(strings.TrimPrefix(dep, "ext:"), "golang.org/x/sys", "golang.org/x/net/bpf", "github.com/vishvananda/netlink",
				"github.com/vishvananda/netns", "github.com/klauspost/compress")) {
			t.Errorf("the guest binary reaches %s", dep)
		}
	}
}
