package process

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/guest"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// hostSystemDirs are the host directories the host template binds read-only (or recreates as
// symlinks where the host has merged /usr).
var hostSystemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// hostHidden are host directories below hostSystemDirs that the host template covers with an
// empty read-only directory: operators keep their own software, configuration and secrets in
// /usr/local. Config hostTemplate.paths (Config.HostPaths) brings back what sandboxes need.
var hostHidden = []string{"/usr/local"}

// hostEtc are the host /etc entries programs need to start (the dynamic linker's cache, the
// alternatives symlinks Debian points /usr/bin/* through, TLS roots, time zones). Everything else
// in the sandbox's /etc is generated; no host account, secret or config is visible.
var hostEtc = []string{"alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "ssl",
	"ca-certificates", "ca-certificates.conf", "localtime", "timezone", "mime.types", "protocols",
	"services", "terminfo", "inputrc", "magic", "gai.conf"}

// hostTemplate is the part of a host-template plan that depends only on the host; the driver
// computes it once.
type hostTemplate struct {
	binds    []guest.BindMount // the system directories
	hidden   []string          // directories in them covered by an empty one (hostHidden the host has)
	extra    []guest.BindMount // the operator's paths (Config.HostPaths), over the hidden ones
	symlinks []guest.Symlink
	etc      []string // host /etc entries copied into the generated /etc
}

// mounts are the template's binds in the order they are made: the system directories, the
// hidden directories' empty covers, the operator's paths.
func (t hostTemplate) mounts() []guest.BindMount {
	out := append([]guest.BindMount{}, t.binds...)
	for _, h := range t.hidden {
		out = append(out, guest.BindMount{Dst: h, Empty: true, ReadOnly: true, Dir: true})
	}
	return append(out, t.extra...)
}

// probeHostTemplate finds the host's system directories, and resolves paths, the operator's
// extra ones: a path that is not there is an error naming it.
func probeHostTemplate(paths []string) (hostTemplate, error) {
	var t hostTemplate
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

// plan turns a validated spec into init's configuration.
// lowers, when given, are an image's layers, top first.
func (d *Driver) plan(id string, spec sandbox.Spec, lowers []string) (*guest.Config, error) {
	c := &guest.Config{
		Hostname:  guest.Hostname,
		NoFile:    uint64(spec.Resources.MaxOpenFiles),
		DiskBytes: spec.Resources.DiskMB << 20,
		Landlock:  d.landlockABI > 0,
	}
	home := "/home/agent"
	if spec.User == sandbox.UserRoot {
		home = "/root"
	} else {
		c.UID, c.GID = sandbox.AgentUID, sandbox.AgentUID
	}
	r := &c.Root
	if len(lowers) > 0 {
		r.Lowers = lowers
		r.Files = etcFiles(c.Hostname, false, d.resolver(spec))
	} else if spec.RootDir != "" {
		lower, err := filepath.EvalSymlinks(spec.RootDir)
		if err != nil {
			return nil, errdefs.Invalid("rootfs", "%v", err)
		}
		if st, err := os.Stat(lower); err != nil || !st.IsDir() {
			return nil, errdefs.Invalid("rootfs", "%q is not a directory", spec.RootDir)
		}
		if lower == "/" {
			// The host itself, with every mount on it (/proc, /sys, the data dir...): not a
			// root filesystem to copy on write, and no idmapped mount can be made of it.
			return nil, errdefs.Invalid("rootfs", "%q is the host's own root; give a directory holding a root filesystem (an unpacked image, a debootstrap), or leave --rootfs out for the host template", spec.RootDir)
		}
		r.Lowers = []string{lower}
		r.Files = etcFiles(c.Hostname, false, d.resolver(spec))
	} else {
		etc, err := d.etcTemplate(d.resolver(spec))
		if err != nil {
			return nil, fmt.Errorf("generate /etc: %v: %w", err, errdefs.ErrSetup)
		}
		r.Binds = append(r.Binds, d.host.mounts()...)
		r.Binds = append(r.Binds, guest.BindMount{Src: etc, Dst: "/etc", ReadOnly: true, Dir: true})
		r.Symlinks = append(r.Symlinks, d.host.symlinks...)
	}
	r.Dirs = []guest.WriteDir{
		{Path: "/tmp", Mode: 0o1777},
		{Path: "/workspace", Mode: 0o755, UID: c.UID},
		{Path: home, Mode: 0o700, UID: c.UID},
	}
	if spec.Workdir != "/workspace" && spec.Workdir != home && spec.Workdir != "/tmp" {
		r.Dirs = append(r.Dirs, guest.WriteDir{Path: spec.Workdir, Mode: 0o755, UID: c.UID})
	}
	for i, m := range spec.Binds {
		b, err := userBind(fmt.Sprintf("binds[%d]", i), m)
		if err != nil {
			return nil, err
		}
		r.Binds = append(r.Binds, b)
	}
	for i, p := range spec.Filesystem.ReadWrite {
		field := fmt.Sprintf("filesystem.readWrite[%d]", i)
		if bound, err := writablePath(field, p, r); err != nil {
			return nil, err
		} else if !bound {
			r.Dirs = append(r.Dirs, guest.WriteDir{Path: p, Mode: 0o755, UID: c.UID})
		}
	}
	r.ReadOnly = spec.Filesystem.ReadOnly
	r.Blocked = spec.Filesystem.Blocked
	c.LandRules = landRules(c, spec)
	return c, nil
}

// writablePath refuses a readWrite path that a read-only mount would cover (the host template's
// directories and read-only volumes are not the sandbox's to write), and reports one inside a
// writable bind, which is writable already.
func writablePath(field, p string, r *guest.RootPlan) (bound bool, err error) {
	for _, b := range r.Binds {
		if p != b.Dst && !strings.HasPrefix(p, b.Dst+"/") {
			continue
		}
		if b.ReadOnly {
			return false, errdefs.Invalid(field, "%s is inside %s, which is read-only", p, b.Dst)
		}
		bound = true
	}
	return bound, nil
}

// userBind is a host path the operator binds into the sandbox (airlock run --ro/--rw, or a
// volume the daemon granted).
func userBind(field string, m sandbox.Bind) (guest.BindMount, error) {
	real, err := filepath.EvalSymlinks(m.Host)
	if err != nil {
		return guest.BindMount{}, errdefs.Invalid(field, "host path %q: %v", m.Host, err)
	}
	st, err := os.Stat(real)
	if err != nil {
		return guest.BindMount{}, errdefs.Invalid(field, "host path %q: %v", m.Host, err)
	}
	return guest.BindMount{Src: real, Dst: m.Path, ReadOnly: m.ReadOnly, Dir: st.IsDir()}, nil
}

// landRules is the Landlock view of the same filesystem: everything readable and executable,
// writes only where the mounts allow them. It is a second wall should a mount be misconfigured.
func landRules(c *guest.Config, spec sandbox.Spec) []guest.LandRule {
	if len(c.Root.Lowers) > 0 {
		// A directory rootfs is writable throughout (copy-on-write into the layer).
		return []guest.LandRule{{Path: "/", Write: true}}
	}
	rules := []guest.LandRule{{Path: "/", Write: false}, {Path: "/dev", Write: true}, {Path: "/proc", Write: true}}
	for _, d := range c.Root.Dirs {
		rules = append(rules, guest.LandRule{Path: d.Path, Write: true})
	}
	for _, b := range c.Root.Binds {
		if !b.ReadOnly {
			rules = append(rules, guest.LandRule{Path: b.Dst, Write: true})
		}
	}
	return rules
}

// etcFiles generates the sandbox's /etc: accounts for root and agent only, and name resolution
// for the sandbox's own names. With a directory rootfs the image keeps its accounts.
func etcFiles(host string, accounts bool, resolver string) []guest.PlainFile {
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

// resolver is the name server a sandbox's resolv.conf names: none for egress "none".
func (d *Driver) resolver(spec sandbox.Spec) string {
	if spec.Network.EgressPolicy == sandbox.EgressNone || d.cfg.Network == nil {
		return ""
	}
	return d.cfg.Network.Resolver().String()
}
