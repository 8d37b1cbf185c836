package process

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/guest"
	"github.com/airlockrun/airlock/internal/hosttemplate"
	"github.com/airlockrun/airlock/internal/sandbox"
)

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
		r.Files = hosttemplate.EtcFiles(false, d.resolver(spec))
	} else if spec.RootDir != "" {
		lower, err := hosttemplate.RootDir(spec.RootDir)
		if err != nil {
			return nil, err
		}
		r.Lowers = []string{lower}
		r.Files = hosttemplate.EtcFiles(false, d.resolver(spec))
	} else {
		etc, err := d.rt.Template().Etc(d.resolver(spec))
		if err != nil {
			return nil, fmt.Errorf("generate /etc: %w: %w", err, errdefs.ErrSetup)
		}
		r.Binds = append(r.Binds, d.rt.Template().Mounts()...)
		r.Binds = append(r.Binds, guest.BindMount{Src: etc, Dst: "/etc", ReadOnly: true, Dir: true})
		r.Symlinks = append(r.Symlinks, d.rt.Template().Symlinks()...)
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

// resolver is the name server a sandbox's resolv.conf names: none for egress "none".
func (d *Driver) resolver(spec sandbox.Spec) string {
	return hosttemplate.Resolver(spec, d.cfg.Network)
}
