package microvm

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

// plan is init's configuration for a sandbox of spec — the host template's root, built by init
// in the guest as at the process level, on the disk (guest.Config.LayerDevice) — and the share
// its binds are made from: each host path the plan binds, at the same path in the read-only
// share, or in the writable one for the operator's read-write volumes.
func (d *Driver) plan(spec sandbox.Spec) (*guest.Config, []ShareMount, []ShareMount, error) {
	c := &guest.Config{
		Hostname:    guest.Hostname,
		NoFile:      uint64(spec.Resources.MaxOpenFiles),
		DiskBytes:   spec.Resources.DiskMB << 20,
		LayerDevice: "/dev/vda",
		LayerFsType: "ext4",
		Landlock:    true, // the guest kernel's own (6.1 has it)
	}
	home := "/home/agent"
	if spec.User == sandbox.UserRoot {
		home = "/root"
	} else {
		c.UID, c.GID = sandbox.AgentUID, sandbox.AgentUID
	}
	r := &c.Root
	etc, err := d.rt.Template().Etc(hosttemplate.Resolver(spec, d.cfg.Network))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("generate /etc: %w: %w", err, errdefs.ErrSetup)
	}
	r.Binds = append(r.Binds, d.rt.Template().Mounts()...)
	r.Binds = append(r.Binds, guest.BindMount{Src: etc, Dst: "/etc", ReadOnly: true, Dir: true})
	r.Symlinks = append(r.Symlinks, d.rt.Template().Symlinks()...)
	r.Dirs = []guest.WriteDir{
		{Path: "/tmp", Mode: 0o1777},
		{Path: "/workspace", Mode: 0o755, UID: c.UID},
		{Path: home, Mode: 0o700, UID: c.UID},
	}
	if spec.Workdir != "/workspace" && spec.Workdir != home && spec.Workdir != "/tmp" {
		r.Dirs = append(r.Dirs, guest.WriteDir{Path: spec.Workdir, Mode: 0o755, UID: c.UID})
	}
	for i, m := range spec.Binds {
		real, err := filepath.EvalSymlinks(m.Host)
		if err != nil {
			return nil, nil, nil, errdefs.Invalid(fmt.Sprintf("binds[%d]", i), "host path %q: %v", m.Host, err)
		}
		st, err := os.Stat(real)
		if err != nil {
			return nil, nil, nil, errdefs.Invalid(fmt.Sprintf("binds[%d]", i), "host path %q: %v", m.Host, err)
		}
		r.Binds = append(r.Binds, guest.BindMount{Src: real, Dst: m.Path, ReadOnly: m.ReadOnly, Dir: st.IsDir()})
	}
	for i, p := range spec.Filesystem.ReadWrite {
		bound := false
		for _, b := range r.Binds {
			if p != b.Dst && !strings.HasPrefix(p, b.Dst+"/") {
				continue
			}
			if b.ReadOnly {
				return nil, nil, nil, errdefs.Invalid(fmt.Sprintf("filesystem.readWrite[%d]", i), "%s is inside %s, which is read-only", p, b.Dst)
			}
			bound = true
		}
		if !bound {
			r.Dirs = append(r.Dirs, guest.WriteDir{Path: p, Mode: 0o755, UID: c.UID})
		}
	}
	r.ReadOnly = spec.Filesystem.ReadOnly
	r.Blocked = spec.Filesystem.Blocked
	c.LandRules = []guest.LandRule{{Path: "/", Write: false}, {Path: "/dev", Write: true}, {Path: "/proc", Write: true}}
	for _, dir := range r.Dirs {
		c.LandRules = append(c.LandRules, guest.LandRule{Path: dir.Path, Write: true})
	}
	var share, writable []ShareMount
	for _, b := range r.Binds {
		switch {
		case b.Empty:
			share = append(share, ShareMount{Dst: b.Dst, Empty: true, Dir: true})
		case b.ReadOnly:
			share = append(share, ShareMount{Src: b.Src, Dst: b.Src, Dir: b.Dir})
		default:
			writable = append(writable, ShareMount{Src: b.Src, Dst: b.Src, Dir: b.Dir})
			c.LandRules = append(c.LandRules, guest.LandRule{Path: b.Dst, Write: true})
		}
	}
	return c, share, writable, nil
}
