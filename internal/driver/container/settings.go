package container

import (
	"fmt"
	"path"
	"path/filepath"

	"github.com/airlockrun/airlock/internal/cgroups"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// Settings is the "container" section of airlock's configuration file, as an operator writes it;
// package levels places it in the file and turns it into a Config. Validate's errors begin with
// the field's path inside the section.
type Settings struct {
	// Runtime is the runtime of sandboxes that name none: runsc (gVisor, default) or runc.
	Runtime string `json:"runtime"`
	// Runsc and Runc are the runtimes' binaries; empty means found in PATH.
	Runsc string `json:"runsc"`
	Runc  string `json:"runc"`
	// RunscPlatform is gVisor's platform: systrap (default), ptrace or kvm.
	RunscPlatform string `json:"runscPlatform"`
	// CgroupParent is where the runtimes make sandboxes' cgroups. Default "airlock-container".
	CgroupParent string `json:"cgroupParent"`
	// PrepareRestores (default true): once a runsc sandbox has a memory snapshot, the container
	// its next in-place restore goes into is made ahead (`runsc create`), so that the restore
	// only loads the image. It costs an idle gVisor sandbox per such sandbox.
	PrepareRestores bool `json:"prepareRestores"`
}

// DefaultSettings returns the section's defaults.
func DefaultSettings() Settings {
	d := DefaultConfig()
	return Settings{Runtime: d.Runtime, RunscPlatform: d.RunscPlatform, CgroupParent: d.CgroupParent, PrepareRestores: true}
}

// Validate checks the section.
func (s Settings) Validate() error {
	if r := s.Runtime; r != sandbox.RuntimeRunsc && r != sandbox.RuntimeRunc {
		return fmt.Errorf("runtime must be runsc or runc (got %q)", r)
	}
	if p := s.RunscPlatform; p != "systrap" && p != "ptrace" && p != "kvm" {
		return fmt.Errorf("runscPlatform must be systrap, ptrace or kvm (got %q)", p)
	}
	if err := cgroups.ValidParent(s.CgroupParent); err != nil {
		return fmt.Errorf("cgroupParent %q must be a relative cgroup path: %w", s.CgroupParent, err)
	}
	return nil
}

// Config returns the level's configuration for the airlock named instance (its network and
// images are attached by package levels).
func (s Settings) Config(instance string) Config {
	c := DefaultConfig()
	c.Runtime, c.Runsc, c.Runc, c.RunscPlatform = s.Runtime, s.Runsc, s.Runc, s.RunscPlatform
	c.CgroupParent = path.Join(s.CgroupParent, instance)
	c.NoPreparedRestores = !s.PrepareRestores
	c.StateDir = StateDirOf(instance)
	return c
}

// StateDirOf is where the container level of the airlock named instance keeps its bundles and the
// runtimes' state: under /run/airlock, not in the data dir, because runc's user namespace root
// must be able to traverse every directory above a sandbox's root, and the data dir is private
// (0700). One directory per instance, so airlocks on different data dirs never meet.
func StateDirOf(instance string) string {
	return filepath.Join("/run/airlock/container", instance)
}
