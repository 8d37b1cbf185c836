package microvm

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The VMM runs jailed: the airlock binary re-executes itself under jailArg0 in new mount, PID,
// IPC, UTS and network namespaces (QEMU.Start), waits until the driver has put it in the VM's
// cgroup, assembles the VM's share — the host paths the guest may read, bound read-only under
// an empty tmpfs — inside its own mount namespace (so it vanishes with the VMM, and nothing of it
// is mounted on the host), drops to the sandbox's own unprivileged uid with no capabilities and
// no_new_privs, and executes QEMU, whose own seccomp filter (-sandbox) then applies.

// jailArg0 is the argv[0] the airlock binary runs as a VMM's jail under.
const jailArg0 = "airlock-vmm"

// IsJail reports whether this process was started as a VMM's jail.
func IsJail() bool { return len(os.Args) > 1 && os.Args[0] == jailArg0 }

// jailConfig is the jail's argv[1].
type jailConfig struct {
	Args   []string     `json:"args"` // QEMU's argv; Args[0] is its path
	UID    int          `json:"uid"`
	GID    int          `json:"gid"`
	Groups []int        `json:"groups,omitempty"`
	Share  string       `json:"share,omitempty"` // where to assemble the share
	Mounts []ShareMount `json:"mounts,omitempty"`
	// KVM, with Dir, gives the VMM a /dev/kvm of its own (see kvmNode).
	KVM bool   `json:"kvm,omitempty"`
	Dir string `json:"dir,omitempty"`
	// Writable and WritableMounts are the writable share's.
	Writable       string       `json:"writable,omitempty"`
	WritableMounts []ShareMount `json:"writableMounts,omitempty"`
	// Build says the jail makes a root image (rootimage.go): Args is mkfs.erofs, run as root
	// (the tree holds host root's files) on the tree assembled at Share, with no network.
	Build bool `json:"build,omitempty"`
	// Lowers, with Build, are directories stacked read-only at Share (an overlay, top first)
	// instead of Mounts.
	Lowers []string `json:"lowers,omitempty"`
	// RAMFill, when not 0, is the descriptor carrying extents (memory.go) to lay into guest RAM,
	// descriptor 6, of RAMSize bytes, before QEMU starts.
	RAMFill int   `json:"ramFill,omitempty"`
	RAMSize int64 `json:"ramSize,omitempty"`
	// Detached says the VM outlives the airlock process that made it (VMConfig.Sockets): no
	// parent-death signal once QEMU runs.
	Detached bool `json:"detached,omitempty"`
}

// Jail runs the jail and executes QEMU; it never returns.
func Jail() {
	err := jail()
	fmt.Fprintln(os.Stderr, "airlock-vmm:", err)
	os.Exit(1)
}

func jail() error {
	var c jailConfig
	if err := json.Unmarshal([]byte(os.Args[1]), &c); err != nil {
		return err
	}
	// The go-ahead: the driver has put this process in the VM's cgroup.
	goAhead := os.NewFile(3, "go")
	if n, err := goAhead.Read(make([]byte, 1)); n != 1 {
		return fmt.Errorf("no go-ahead (%d bytes): %w", n, err)
	}
	goAhead.Close()
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("private mounts: %w", err)
	}
	if c.Build && len(c.Lowers) > 0 {
		esc := make([]string, len(c.Lowers))
		for i, l := range c.Lowers {
			esc[i] = strings.NewReplacer(`\`, `\\`, ":", `\:`, ",", `\,`).Replace(l)
		}
		o := "lowerdir=" + strings.Join(esc, ":")
		if err := unix.Mount("overlay", c.Share, "overlay", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, o); err != nil {
			return fmt.Errorf("stack %s: %w", o, err)
		}
	} else if c.Share != "" {
		if err := assembleShare(c.Share, c.Mounts, true); err != nil {
			return fmt.Errorf("share: %w", err)
		}
	}
	if c.Writable != "" {
		if err := assembleShare(c.Writable, c.WritableMounts, false); err != nil {
			return fmt.Errorf("writable share: %w", err)
		}
	}
	if c.Build {
		return syscall.Exec(c.Args[0], c.Args, []string{})
	}
	if c.RAMFill != 0 {
		// In the VM's cgroup already: the pages written are charged to the VM.
		fill := os.NewFile(uintptr(c.RAMFill), "ram-fill")
		err := layExtents(fill, fdWriterAt(6), c.RAMSize)
		fill.Close()
		if err != nil {
			return fmt.Errorf("guest RAM: %w", err)
		}
	}
	if c.KVM {
		if err := kvmNode(c.Dir, c.UID, c.GID); err != nil {
			return fmt.Errorf("/dev/kvm: %w", err)
		}
	}
	groups := c.Groups
	if groups == nil {
		groups = []int{}
	}
	if err := syscall.Setgroups(groups); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setresgid(c.GID, c.GID, c.GID); err != nil {
		return fmt.Errorf("setgid %d: %w", c.GID, err)
	}
	if err := syscall.Setresuid(c.UID, c.UID, c.UID); err != nil {
		return fmt.Errorf("setuid %d: %w", c.UID, err)
	}
	// The uid change cleared the parent-death signal: the VM dies with the airlock that made
	// it, unless it is to outlive it for the next one to adopt.
	if !c.Detached {
		if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
			return fmt.Errorf("parent-death signal: %w", err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}

	return syscall.Exec(c.Args[0], c.Args, []string{})
}

// kvmNode gives the VMM, in its own mount namespace, a /dev/kvm node of its own uid: the host's
// may be root's alone (mode 0600), and the VMM is not root. The node is made on a tmpfs of the
// jail's namespace (dir/dev) and bound over /dev/kvm there; the host's stays as it is.
func kvmNode(dir string, uid, gid int) error {
	var st unix.Stat_t
	if err := unix.Stat("/dev/kvm", &st); err != nil {
		return err
	}
	d := filepath.Join(dir, "dev")
	if err := os.MkdirAll(d, 0o700); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", d, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=4k"); err != nil {
		return err
	}
	node := filepath.Join(d, "kvm")
	if err := unix.Mknod(node, unix.S_IFCHR|0o600, int(st.Rdev)); err != nil {
		return err
	}
	if err := os.Chown(node, uid, gid); err != nil {
		return err
	}
	return unix.Mount(node, "/dev/kvm", "", unix.MS_BIND, "")
}

// assembleShare builds a share at dir: an empty tmpfs, each mount bound at its path in it (or
// covered by an empty directory), then all of it made read-only — or, for the writable share,
// its skeleton only.
func assembleShare(dir string, mounts []ShareMount, readOnly bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=1m"); err != nil {
		return err
	}
	ro := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	for _, m := range mounts {
		dst := filepath.Join(dir, m.Dst)
		if m.Empty {
			// Over a read-only bind made before it: its mount point exists there already. It
			// is made read-only with the rest, once the binds over it have their mount points.
			if err := unix.Mount("tmpfs", dst, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
				return fmt.Errorf("cover %s: %w", m.Dst, err)
			}
			continue
		}
		if m.Dir {
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
		} else {
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(dst, os.O_CREATE|os.O_RDONLY, 0o644)
			if err != nil {
				return err
			}
			f.Close()
		}
		if err := unix.Mount(m.Src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s: %w", m.Src, err)
		}
		attr := ro
		if !readOnly {
			attr = &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
		}
		if err := unix.MountSetattr(unix.AT_FDCWD, dst, unix.AT_RECURSIVE, attr); err != nil {
			return fmt.Errorf("mount options of %s: %w", m.Src, err)
		}
	}
	if !readOnly {
		return unix.MountSetattr(unix.AT_FDCWD, dir, 0, ro)
	}
	return unix.MountSetattr(unix.AT_FDCWD, dir, unix.AT_RECURSIVE, ro)
}
