package process

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlockrun/airlock/internal/cgroups"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

// This file is the level's part of airlock's configuration file: the sections "process" and
// "hostTemplate" as an operator writes them, their defaults and their checks. Package levels
// places them in the file and turns them into a Config. Validate's errors begin with the field's
// path inside the section, so that the file's error reads "config: process.uidBase ...".

// Settings is the "process" section of the configuration file.
type Settings struct {
	// CgroupParent is the cgroup under which every sandbox's cgroup is made. Default "airlock".
	CgroupParent string `json:"cgroupParent"`
	// UIDBase is where the pool of host uids/gids that sandboxes' ids are mapped to starts (at the
	// first multiple of 65536 at or above it). Every live sandbox, process or container level,
	// gets a range of 65536 of its own, disjoint from every other sandbox's on the host, this
	// daemon's or another airlock's (records in /run/airlock/uids). Default 2000000000; the pool
	// must not hold real host users.
	UIDBase uint32 `json:"uidBase"`
	// UIDRanges is the pool's size in ranges of 65536: the most sandboxes this airlock runs at
	// once. Default 4096 (host ids 2000027648 to 2268463103).
	UIDRanges int `json:"uidRanges"`
	// OrphanGraceSeconds is how long a daemon's sandbox outlives the daemon (a crash, kill -9)
	// waiting for the restarted daemon to adopt it; then it ends. Default 60; 0 ends sandboxes
	// with the daemon. The one-shot `airlock run` always uses 0.
	OrphanGraceSeconds int `json:"orphanGraceSeconds"`
}

// HostTemplateSettings is the "hostTemplate" section: the host template is the host's /usr, /bin
// and /lib* read-only, with /usr/local covered by an empty directory (operators keep their own
// software, configuration and secrets there), at the process and container levels.
type HostTemplateSettings struct {
	// Paths are more host paths the template binds read-only at the same place in every
	// sandbox, over the hidden /usr/local: e.g. "/usr/local/bin/tool" or "/opt/sdk". Absolute,
	// clean and present on the host; not / nor under /proc, /dev, /etc, /tmp, /workspace, /home,
	// /root or /.airlock (what the sandbox's own root has there). Default none.
	Paths []string `json:"paths"`
}

// DefaultSettings returns the section's defaults.
func DefaultSettings() Settings {
	d := DefaultConfig()
	return Settings{CgroupParent: d.CgroupParent, UIDBase: d.UIDBase, UIDRanges: uidalloc.DefaultRanges, OrphanGraceSeconds: 60}
}

// Validate checks the section.
func (s Settings) Validate() error {
	if err := cgroups.ValidParent(s.CgroupParent); err != nil {
		return fmt.Errorf("cgroupParent %q must be a relative cgroup path: %w", s.CgroupParent, err)
	}
	if g := s.OrphanGraceSeconds; g < 0 || g > 3600 {
		return errors.New("orphanGraceSeconds must be between 0 and 3600")
	}
	if err := uidalloc.Check(s.UIDBase, s.UIDRanges); err != nil {
		return fmt.Errorf("uidBase and uidRanges: %w", err)
	}
	return nil
}

// Config returns the level's configuration for the airlock named instance, keeping its state in
// dataDir, with the host template's operator paths of host.
func (s Settings) Config(dataDir, instance string, host HostTemplateSettings) Config {
	c := DefaultConfig()
	c.CgroupParent = path.Join(s.CgroupParent, instance)
	c.UIDBase, c.UIDRanges, c.Instance = s.UIDBase, s.UIDRanges, instance
	c.StateDir = filepath.Join(dataDir, "process")
	c.OrphanGrace = time.Duration(s.OrphanGraceSeconds) * time.Second
	c.HostPaths = host.Paths
	return c
}

// templateReserved are the sandbox paths the host template's own root has: an operator's path
// may not go there.
var templateReserved = []string{"/proc", "/dev", "/etc", "/tmp", "/workspace", "/home", "/root", "/.airlock"}

// Validate checks the section: every path clean, absolute, present, and not where the sandbox's
// own root is.
func (h HostTemplateSettings) Validate() error {
	for i, p := range h.Paths {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
			return fmt.Errorf("paths[%d] %q must be a clean absolute path other than /", i, p)
		}
		for _, r := range templateReserved {
			if p == r || strings.HasPrefix(p, r+"/") {
				return fmt.Errorf("paths[%d] %q: the sandbox's own %s is there", i, p, r)
			}
		}
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("paths[%d]: %w", i, err)
		}
	}
	return nil
}
