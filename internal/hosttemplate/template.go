// Package hosttemplate is the host template: what of the host a sandbox's root filesystem is made
// of when the sandbox brings no image or rootfs of its own — the host's system directories bound
// read-only (/usr/local covered, the operator's hostTemplate.paths bound over it), the
// merged-/usr symlinks, and a generated /etc: accounts for root and agent only, name resolution
// by the sandbox's network policy, and copies of the few host entries programs need. It also
// writes the name files of a root that keeps its own /etc (an image's).
//
// It runs on the host. The levels that build roots share it: the process level sends it to init
// as binds to make (Mounts, Symlinks, Etc), the container level assembles it into a bundle
// (Template). One Host is probed per airlock process; its /etc directories are cached under a
// state directory.
package hosttemplate

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/guest"
	"github.com/airlockrun/airlock/internal/netpolicy/egress"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// hostSystemDirs are the host directories the host template binds read-only (or recreates as
// symlinks where the host has merged /usr).
var hostSystemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// hostHidden are host directories below hostSystemDirs that the host template covers with an
// empty read-only directory: operators keep their own software, configuration and secrets in
// /usr/local. Config hostTemplate.paths (Probe's paths) brings back what sandboxes need.
var hostHidden = []string{"/usr/local"}

// hostEtc are the host /etc entries programs need to start (the dynamic linker's cache, the
// alternatives symlinks Debian points /usr/bin/* through, TLS roots, time zones). Everything else
// in the sandbox's /etc is generated; no host account, secret or config is visible.
var hostEtc = []string{"alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "ssl",
	"ca-certificates", "ca-certificates.conf", "localtime", "timezone", "mime.types", "protocols",
	"services", "terminfo", "inputrc", "magic", "gai.conf"}

// Host is the part of the host template that depends only on the host, probed once, and the
// cache of its generated /etc directories. It is safe for concurrent use.
type Host struct {
	binds    []guest.BindMount // the system directories
	hidden   []string          // directories in them covered by an empty one (hostHidden the host has)
	extra    []guest.BindMount // the operator's paths, over the hidden ones
	symlinks []guest.Symlink
	etc      []string // host /etc entries copied into the generated /etc

	stateDir string            // where the generated /etc directories are kept
	etcMu    sync.Mutex        // guards etcDirs
	etcDirs  map[string]string // the generated /etc by name server, built once per process
}

// Probe finds the host's system directories and resolves paths, the operator's extra ones (config
// hostTemplate.paths); a path that is not there is an error naming it. The Host it returns holds
// what was found even then (Summary describes it); stateDir is where Etc keeps the generated /etc.
func Probe(paths []string, stateDir string) (*Host, error) {
	t := &Host{stateDir: stateDir}
	for _, p := range hostSystemDirs {
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
			// the host has no such entry
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return t, err
			}
			t.symlinks = append(t.symlinks, guest.Symlink{Path: p, Target: target})
		case fi.IsDir():
			t.binds = append(t.binds, guest.BindMount{Src: p, Dst: p, ReadOnly: true, Dir: true})
		}
	}
	for _, h := range hostHidden {
		if fi, err := os.Stat(h); err == nil && fi.IsDir() {
			t.hidden = append(t.hidden, h)
		}
	}
	for _, p := range paths {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return t, fmt.Errorf("hostTemplate.paths: %w", err)
		}
		fi, err := os.Stat(real)
		if err != nil {
			return t, fmt.Errorf("hostTemplate.paths: %w", err)
		}
		t.extra = append(t.extra, guest.BindMount{Src: real, Dst: p, ReadOnly: true, Dir: fi.IsDir()})
	}
	for _, e := range hostEtc {
		if _, err := os.Lstat("/etc/" + e); err == nil {
			t.etc = append(t.etc, e)
		}
	}
	if m, _ := filepath.Glob("/etc/python3*"); len(m) > 0 {
		for _, p := range m {
			t.etc = append(t.etc, filepath.Base(p))
		}
	}
	sort.Strings(t.etc)
	return t, nil
}

// Usable reports whether the host has system directories to bind.
func (t *Host) Usable() bool { return len(t.binds) > 0 }

// Summary describes what Probe found, for `airlock doctor`.
func (t *Host) Summary() string {
	return fmt.Sprintf("host /usr read-only (%s hidden), %d merged-/usr links, %d host /etc entries copied into a generated /etc, %d operator paths",
		strings.Join(hostHidden, ", "), len(t.symlinks), len(t.etc), len(t.extra))
}

// Mounts are the template's binds in the order they are made: the system directories, the
// hidden directories' empty covers, the operator's paths. The generated /etc is not among them
// (Etc).
func (t *Host) Mounts() []guest.BindMount {
	out := append([]guest.BindMount{}, t.binds...)
	for _, h := range t.hidden {
		out = append(out, guest.BindMount{Dst: h, Empty: true, ReadOnly: true, Dir: true})
	}
	return append(out, t.extra...)
}

// Symlinks are the merged-/usr links of the host (/bin → usr/bin, ...), to make in the root.
func (t *Host) Symlinks() []guest.Symlink { return append([]guest.Symlink(nil), t.symlinks...) }

// Template is the host template for a level that assembles it itself (the container level):
// the host directories bound read-only at the same path, the directories in them to cover with an
// empty read-only one, the operator's paths to bind read-only over those, the merged-/usr
// symlinks, and the generated /etc for a network (a directory to bind read-only at /etc).
type Template struct {
	Dirs     []string
	Hidden   []string
	Paths    []Path
	Symlinks map[string]string // path → target
	Etc      string
}

// Path is an operator's path of the host template: host path Src (symlinks resolved) bound
// read-only at Dst.
type Path struct {
	Src, Dst string
	Dir      bool
}

// Template returns the host template whose /etc names resolver (see Resolver).
func (t *Host) Template(resolver string) (Template, error) {
	etc, err := t.Etc(resolver)
	if err != nil {
		return Template{}, fmt.Errorf("generate /etc: %w: %w", err, errdefs.ErrSetup)
	}
	out := Template{Etc: etc, Symlinks: map[string]string{}}
	for _, b := range t.binds {
		out.Dirs = append(out.Dirs, b.Src)
	}
	out.Hidden = t.hidden
	for _, b := range t.extra {
		out.Paths = append(out.Paths, Path{Src: b.Src, Dst: b.Dst, Dir: b.Dir})
	}
	for _, l := range t.symlinks {
		out.Symlinks[l.Path] = l.Target
	}
	return out, nil
}

// NameFiles are the files that make a root filesystem with an /etc of its own (an image's, a
// rootfs) resolve names by its network: /etc/hostname, /etc/hosts and /etc/resolv.conf, path →
// content. resolver is the name server (see Resolver).
func NameFiles(resolver string) map[string]string {
	out := map[string]string{}
	for _, f := range EtcFiles(false, resolver) {
		out[f.Path] = f.Content
	}
	return out
}

// EtcFiles generates the sandbox's /etc: name resolution for the sandbox's own names (guest.Hostname)
// by resolver and, with accounts, accounts for root and agent only. A root that keeps its own /etc
// (an image, a rootfs) keeps its accounts.
func EtcFiles(accounts bool, resolver string) []guest.PlainFile {
	host := guest.Hostname
	resolv := "# airlock: egress policy none, no name server\n"
	if resolver != "" {
		resolv = "# airlock answers every query of this sandbox, by its network policy\nnameserver " + resolver + "\noptions ndots:1 timeout:2 attempts:2\n"
	}
	files := []guest.PlainFile{
		{Path: "/etc/hostname", Content: host + "\n", Mode: 0o644},
		{Path: "/etc/hosts", Mode: 0o644, Content: "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" + host + "\n"},
		{Path: "/etc/resolv.conf", Mode: 0o644, Content: resolv},
	}
	if accounts {
		files = append(files,
			guest.PlainFile{Path: "/etc/passwd", Mode: 0o644, Content: "root:x:0:0:root:/root:/bin/sh\n" +
				"agent:x:1000:1000:agent:/home/agent:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"},
			guest.PlainFile{Path: "/etc/group", Mode: 0o644, Content: "root:x:0:\ntty:x:5:\nagent:x:1000:\nnogroup:x:65534:\n"},
			guest.PlainFile{Path: "/etc/nsswitch.conf", Mode: 0o644, Content: "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n"},
		)
	}
	return files
}

// Resolver is the name server the resolv.conf of a sandbox of spec names: the network service's
// resolver, none for egress "none" (or without a network service).
func Resolver(spec sandbox.Spec, network *egress.Service) string {
	if spec.Network.EgressPolicy == sandbox.EgressNone || network == nil {
		return ""
	}
	return network.Resolver().String()
}

// RootDir checks an operator's root directory (a template's dir, `airlock run --rootfs`) as a
// sandbox's read-only root and returns it with its symlinks resolved: a directory, and not the
// host's own root — the host itself, with every mount on it (/proc, /sys, the data dir...), is
// not a root filesystem to copy on write, and no idmapped mount can be made of it.
func RootDir(dir string) (string, error) {
	lower, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", errdefs.Invalid("rootfs", "%v", err)
	}
	if st, err := os.Stat(lower); err != nil || !st.IsDir() {
		return "", errdefs.Invalid("rootfs", "%q is not a directory", dir)
	}
	if lower == "/" {
		return "", errdefs.Invalid("rootfs", "%q is the host's own root; give a directory holding a root filesystem (an unpacked image, a debootstrap), or leave it out for the host template", dir)
	}
	return lower, nil
}
