package microvm

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/guest"
	"github.com/airlockrun/airlock/internal/guest/vm"
	"github.com/airlockrun/airlock/internal/hosttemplate"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// vmPlan is init's configuration for a sandbox (Config, whose every mount source is a path of
// the guest, which the guest agent clones for init: guest/vm/rewrite.go) with the host trees the
// VM gets it from: read-only images (rootimage.go) of the root, and 9p shares of the operator's
// volumes.
type vmPlan struct {
	Config *guest.Config
	// On the host template: its mounts (one image, at vm.TemplateDir) and the generated /etc
	// (another, at vm.EtcDir).
	Template []ShareMount
	Etc      string
	// Otherwise Lowers are the root's directories, top first (an image's layers, or an
	// operator's template), stacked into one image at vm.RootImageDir.
	Lowers []string
	// Share and Writable are the operator's volumes, read-only and writable.
	Share, Writable []ShareMount
}

// plan makes the plan of spec; lowers, when given, are its image's layers, top first
// (driver.ImageLayers). A template directory is the operator's (spec.RootDir: the config's
// templates, or the one-shot run's --rootfs), never a tenant's.
func (d *Driver) plan(spec sandbox.Spec, lowers []string) (*vmPlan, error) {
	c := &guest.Config{
		Hostname:    guest.Hostname,
		NoFile:      uint64(spec.Resources.MaxOpenFiles),
		DiskBytes:   spec.Resources.DiskMB << 20,
		LayerDevice: vm.LayerDevice, // the agent names the disk it found
		LayerFsType: "ext4",
		Landlock:    true, // the guest kernel's own (6.1 has it)
	}
	p := &vmPlan{Config: c}
	home := "/home/agent"
	if spec.User == sandbox.UserRoot {
		home = "/root"
	} else {
		c.UID, c.GID = sandbox.AgentUID, sandbox.AgentUID
	}
	r := &c.Root
	resolver := hosttemplate.Resolver(spec, d.cfg.Network)
	var err error
	switch {
	case len(lowers) > 0:
		p.Lowers = lowers
	case spec.RootDir != "":
		lower, err := hosttemplate.RootDir(spec.RootDir)
		if err != nil {
			return nil, err
		}
		p.Lowers = []string{lower}
	}
	templateBinds := 0
	if p.Lowers != nil {
		r.Lowers = []string{vm.RootImageDir}
		r.Files = hosttemplate.EtcFiles(false, resolver)
	} else {
		if p.Etc, err = d.rt.Template().Etc(resolver); err != nil {
			return nil, fmt.Errorf("generate /etc: %w: %w", err, errdefs.ErrSetup)
		}
		// The image holds the template's tree as the sandbox sees it (/usr/local covered, the
		// operator's paths in place): one bind of it per top-level path.
		var bound []string
		for _, m := range d.rt.Template().Mounts() {
			p.Template = append(p.Template, ShareMount{Src: m.Src, Dst: m.Dst, Dir: m.Dir, Empty: m.Empty})
			if m.Empty || slices.ContainsFunc(bound, func(b string) bool { return strings.HasPrefix(m.Dst, b+"/") }) {
				continue
			}
			bound = append(bound, m.Dst)
			r.Binds = append(r.Binds, guest.BindMount{Src: path.Join(vm.TemplateDir, m.Dst), Dst: m.Dst, ReadOnly: true, Dir: m.Dir})
		}
		r.Binds = append(r.Binds, guest.BindMount{Src: vm.EtcDir, Dst: "/etc", ReadOnly: true, Dir: true})
		templateBinds = len(r.Binds)
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
		real, err := filepath.EvalSymlinks(m.Host)
		if err != nil {
			return nil, errdefs.Invalid(fmt.Sprintf("binds[%d]", i), "host path %q: %v", m.Host, err)
		}
		st, err := os.Stat(real)
		if err != nil {
			return nil, errdefs.Invalid(fmt.Sprintf("binds[%d]", i), "host path %q: %v", m.Host, err)
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
				return nil, errdefs.Invalid(fmt.Sprintf("filesystem.readWrite[%d]", i), "%s is inside %s, which is read-only", p, b.Dst)
			}
			bound = true
		}
		if !bound {
			r.Dirs = append(r.Dirs, guest.WriteDir{Path: p, Mode: 0o755, UID: c.UID})
		}
	}
	r.ReadOnly = spec.Filesystem.ReadOnly
	r.Blocked = spec.Filesystem.Blocked
	if p.Lowers != nil {
		// An image's root is writable throughout (copy-on-write into the layer).
		c.LandRules = []guest.LandRule{{Path: "/", Write: true}}
	} else {
		c.LandRules = []guest.LandRule{{Path: "/", Write: false}, {Path: "/dev", Write: true}, {Path: "/proc", Write: true}}
		for _, dir := range r.Dirs {
			c.LandRules = append(c.LandRules, guest.LandRule{Path: dir.Path, Write: true})
		}
	}
	// The operator's volumes come through the shares, each at its host path there.
	for i := templateBinds; i < len(r.Binds); i++ {
		b := &r.Binds[i]
		if b.ReadOnly {
			p.Share = append(p.Share, ShareMount{Src: b.Src, Dst: b.Src, Dir: b.Dir})
			b.Src = path.Join(vm.ShareDir, b.Src)
		} else {
			p.Writable = append(p.Writable, ShareMount{Src: b.Src, Dst: b.Src, Dir: b.Dir})
			if p.Lowers == nil {
				c.LandRules = append(c.LandRules, guest.LandRule{Path: b.Dst, Write: true})
			}
			b.Src = path.Join(vm.WritableDir, b.Src)
		}
	}
	return p, nil
}

// images makes (or finds) the read-only images of p's root, with the serials the guest agent
// mounts them by.
func (d *Driver) images(ctx context.Context, p *vmPlan) ([]Image, error) {
	if p.Lowers != nil {
		img, err := d.roots.layers(ctx, p.Lowers)
		if err != nil {
			return nil, fmt.Errorf("the root's image: %w", err)
		}
		return []Image{{Path: img, Serial: vm.SerialRoot}}, nil
	}
	tpl, err := d.roots.template(ctx, p.Template)
	if err != nil {
		return nil, fmt.Errorf("the host template's image: %w", err)
	}
	etc, err := d.roots.directory(ctx, "etc", p.Etc)
	if err != nil {
		return nil, fmt.Errorf("the /etc image: %w", err)
	}
	return []Image{{Path: tpl, Serial: vm.SerialTemplate}, {Path: etc, Serial: vm.SerialEtc}}, nil
}
