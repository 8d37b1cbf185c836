package pid1

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/fsroot"
	"github.com/airlockrun/airlock/internal/guest"
	"github.com/airlockrun/airlock/internal/snapshot"
)

// staging is where init mounts the writable layer before the first pivot_root. The mount is in
// the sandbox's private mount namespace; the host never sees it, and the first pivot_root moves it
// away, so a bind source under the host's /tmp is still reachable through /oldroot.
const staging = "/tmp"

// buildRoot executes c.Root inside init's fresh mount namespace (as root of the sandbox's user
// namespace), and returns init's clone of the writable layer, which it keeps for the host to read
// the layer through (guest.MsgLayer). Layout of the writable layer, one tmpfs capped at
// c.DiskBytes:
//
//	/oldroot   the host's root, detached at the end
//	/newroot   the sandbox's root: a self bind (host template, made read-only) or an overlay
//	/upper, /work   the overlay's upper and work dirs (directory template)
//
// The writable directories (/tmp, /workspace, ...) live in the same tmpfs, so one cap covers every
// byte a sandbox can write.
func buildRoot(c *guest.Config, fds []int) (layer int, err error) {
	b := &rootBuilder{plan: c.Root, fds: fds, layer: -1, device: c.LayerDevice, fsType: c.LayerFsType}
	for _, step := range []func() error{
		func() error { return b.stageLayer(c.DiskBytes) },
		b.enterLayer,
		b.mountBase,
		b.populate,
		b.mountBinds,
		b.readOnlyPaths,
		mountProc,
		mountDev,
		b.blockPaths,
		b.sealRoot,
		enterRoot,
	} {
		if err := step(); err != nil {
			return b.layer, err
		}
	}
	return b.layer, nil
}

// rootBuilder holds what buildRoot's steps share: the plan, the mount sources the host sent
// (detached mount trees it cloned, and a snapshot's pipe), and the layer's clone once made.
type rootBuilder struct {
	plan  guest.RootPlan
	fds   []int
	layer int
	// device and fsType, when set, hold the writable layer instead of a tmpfs (a VM's disk).
	device, fsType string
}

// src is the descriptor at index i of the configuration's.
func (b *rootBuilder) src(i int) (int, error) {
	if i < 0 || i >= len(b.fds) {
		return 0, fmt.Errorf("mount source %d: no such descriptor", i)
	}
	return b.fds[i], nil
}

// stageLayer mounts the writable layer (a tmpfs of size bytes) at staging, fills it from the
// snapshot the plan seeds it with, keeps a clone of it, and makes the directories the layout
// needs in it.
func (b *rootBuilder) stageLayer(size int64) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if b.device != "" {
		if err := unix.Mount(b.device, staging, b.fsType, unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
			return fmt.Errorf("mount writable layer (%s on %s): %w", b.fsType, b.device, err)
		}
	} else {
		opts := fmt.Sprintf("size=%d,mode=0755", size)
		if err := unix.Mount("tmpfs", staging, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return fmt.Errorf("mount writable layer (%s): %w", opts, err)
		}
	}
	if b.plan.Seed != nil {
		// Before anything of the host is reachable from the layer (/oldroot is mounted below).
		fd, err := b.src(*b.plan.Seed)
		if err != nil {
			return err
		}
		if err := unix.SetNonblock(fd, false); err != nil {
			return fmt.Errorf("restore the snapshot's layer: %w", err)
		}
		if _, err := snapshot.ExtractLayer(fdReader(fd), staging, snapshot.ExtractOptions{Layout: guest.LayerLayout}); err != nil {
			return fmt.Errorf("restore the snapshot's layer: %w", err)
		}
	}
	// A detached clone of the layer alone (none of the mounts later made on it).
	layer, err := unix.OpenTree(unix.AT_FDCWD, staging, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("clone the writable layer: %w", err)
	}
	b.layer = layer
	for _, d := range []string{"oldroot", "newroot", "upper", "work"} {
		if err := os.Mkdir(staging+"/"+d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		// A restored layer brought these; they must still be plain directories.
		if fi, err := os.Lstat(staging + "/" + d); err != nil || !fi.IsDir() {
			return fmt.Errorf("writable layer: %s is not a directory", d)
		}
	}
	return nil
}

// enterLayer makes the layer the root (pivot_root), the host's root at /oldroot.
func (b *rootBuilder) enterLayer() error {
	if err := unix.PivotRoot(staging, staging+"/oldroot"); err != nil {
		return fmt.Errorf("pivot_root into the writable layer: %w", err)
	}
	return unix.Chdir("/")
}

// mountBase makes /newroot the sandbox's root: an overlay of the plan's lower layers (a rootfs,
// an image) with its upper directory in the layer, or for the host template the layer's own
// /newroot, bound onto itself to be a mount of its own.
func (b *rootBuilder) mountBase() error {
	r := b.plan
	if len(r.Lowers) == 0 {
		if err := unix.Mount("/newroot", "/newroot", "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind new root: %w", err)
		}
		return nil
	}
	var dirs []string
	for i, fd := range r.LowerFds {
		lower, err := b.src(fd)
		if err != nil {
			return err
		}
		d := fmt.Sprintf("/l%d", i)
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
		if err := unix.MoveMount(lower, "", unix.AT_FDCWD, d, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("attach root layer %s: %w", r.Lowers[i], err)
		}
		dirs = append(dirs, d)
	}
	o := "lowerdir=" + strings.Join(dirs, ":") + ",upperdir=/upper,workdir=/work,userxattr"
	if err := unix.Mount("overlay", "/newroot", "overlay", unix.MS_NOSUID|unix.MS_NODEV, o); err != nil {
		return fmt.Errorf("mount overlay rootfs on %s: %w", strings.Join(r.Lowers, ":"), err)
	}
	return nil
}

// populate makes the plan's symlinks, writable directories and files in the root.
func (b *rootBuilder) populate() error {
	r := b.plan
	for _, l := range r.Symlinks {
		p, err := newInRoot(l.Path)
		if err != nil {
			return fmt.Errorf("symlink %s: %w", l.Path, err)
		}
		if err := os.Symlink(l.Target, p); err != nil && !os.IsExist(err) {
			return fmt.Errorf("symlink %s: %w", l.Path, err)
		}
	}
	for _, d := range r.Dirs {
		if err := writableDir(d, len(r.Lowers) == 0); err != nil {
			return err
		}
	}
	for _, f := range r.Files {
		p, err := newInRoot(f.Path)
		if err != nil {
			return fmt.Errorf("write %s: %w", f.Path, err)
		}
		if err := os.WriteFile(p, []byte(f.Content), os.FileMode(f.Mode)); err != nil {
			return fmt.Errorf("write %s: %w", f.Path, err)
		}
	}
	return nil
}

// mountBinds attaches the plan's binds in order, and covers with an empty directory where it
// says; the covers become read-only once every bind is made (a bind after a cover makes its
// mount point in it).
func (b *rootBuilder) mountBinds() error {
	var covers []string
	for _, m := range b.plan.Binds {
		if m.Empty {
			p, err := cover(m.Dst)
			if err != nil {
				return err
			}
			if p != "" {
				covers = append(covers, p)
			}
			continue
		}
		from, err := b.src(m.Fd)
		if err != nil {
			return err
		}
		if err := bind(m, from); err != nil {
			return err
		}
	}
	for _, p := range covers {
		if err := remount(p, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC); err != nil {
			return fmt.Errorf("make %s read-only: %w", p, err)
		}
	}
	return nil
}

// readOnlyPaths makes the plan's read-only paths so (after the binds, so that a path inside a
// writable volume can be one).
func (b *rootBuilder) readOnlyPaths() error {
	for _, p := range b.plan.ReadOnly {
		if err := readOnlyPath(p); err != nil {
			return err
		}
	}
	return nil
}

// blockPaths makes the plan's blocked paths inaccessible.
func (b *rootBuilder) blockPaths() error {
	for _, p := range b.plan.Blocked {
		if err := block(p); err != nil {
			return err
		}
	}
	return nil
}

// sealRoot makes a host-template root read-only; only its own mounts (the writable directories,
// read-write binds) stay writable. An overlay root stays writable, copy-on-write into the layer.
func (b *rootBuilder) sealRoot() error {
	if len(b.plan.Lowers) > 0 {
		return nil
	}
	if err := remount("/newroot", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV); err != nil {
		return fmt.Errorf("make root read-only: %w", err)
	}
	return nil
}

// enterRoot is the second pivot: the sandbox root becomes "/", and the layer's root with the
// host under /oldroot is stacked on top of it and detached.
func enterRoot() error {
	if err := unix.Chdir("/newroot"); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root into the sandbox root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the host root: %w", err)
	}
	return unix.Chdir("/")
}

// inRoot is sandbox path p in the root being built, its symlinks resolved inside it.
func inRoot(p string) (string, error) { return fsroot.ResolveIn("/newroot", p) }

// newInRoot is inRoot for an entry about to be made: its parent directory is made first.
func newInRoot(p string) (string, error) {
	dst, err := inRoot(p)
	if err != nil {
		return "", err
	}
	return dst, os.MkdirAll(filepath.Dir(dst), 0o755)
}

// fdReader reads a descriptor init does not own (the config's fds are closed after setup).
type fdReader int

func (f fdReader) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(int(f), p)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func writableDir(d guest.WriteDir, selfBind bool) error {
	p, err := inRoot(d.Path)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		return err
	}
	if err := os.Chmod(p, os.FileMode(d.Mode)|modeBits(d.Mode)); err != nil {
		return err
	}
	if err := os.Lchown(p, d.UID, d.UID); err != nil {
		return err
	}
	if !selfBind {
		return nil
	}
	// A bind of the directory onto itself is its own mount, which stays writable when the root
	// is made read-only; it is still the same tmpfs, under the same cap.
	if err := unix.Mount(p, p, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", d.Path, err)
	}
	return remount(p, unix.MS_NOSUID|unix.MS_NODEV)
}

// modeBits turns the sticky/setgid bits of a numeric mode into os.FileMode bits.
func modeBits(m uint32) os.FileMode {
	var fm os.FileMode
	if m&0o1000 != 0 {
		fm |= os.ModeSticky
	}
	return fm
}

func bind(b guest.BindMount, tree int) error {
	dst, err := inRoot(b.Dst)
	if err != nil {
		return err
	}
	if b.Dir {
		err = os.MkdirAll(dst, 0o755)
	} else if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
		var f *os.File
		if f, err = os.OpenFile(dst, os.O_CREATE|os.O_RDONLY, 0o644); err == nil {
			err = f.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("mount point %s: %w", b.Dst, err)
	}
	// The tree comes read-only (or not), nosuid and nodev from the host.
	if err := unix.MoveMount(tree, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach %s at %s: %w", b.Src, b.Dst, err)
	}
	return nil
}

// remount changes a bind mount's flags, keeping the ones the kernel locked when the mount was
// copied into our user namespace (clearing a locked flag is EPERM).
func remount(p string, flags uintptr) error {
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return err
	}
	const keep = unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC |
		unix.MS_NOATIME | unix.MS_NODIRATIME | unix.MS_RELATIME
	flags |= uintptr(st.Flags) & keep
	return unix.Mount("", p, "", unix.MS_BIND|unix.MS_REMOUNT|flags, "")
}

// procMasks are /proc files that tell about the host's kernel and hardware; they are covered by
// /dev/null although the user namespace already denies most of them.
var procMasks = []string{"kcore", "keys", "timer_list", "sched_debug", "sysrq-trigger", "latency_stats", "kallsyms",
	// The host's, not the sandbox's: its boot parameters, its boot's id, its physical memory map.
	"cmdline", "sys/kernel/random/boot_id", "iomem"}

func mountProc() error {
	if err := os.MkdirAll("/newroot/proc", 0o555); err != nil {
		return err
	}
	if err := unix.Mount("proc", "/newroot/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	for _, m := range procMasks {
		p := "/newroot/proc/" + m
		if _, err := os.Lstat(p); err == nil {
			if err := unix.Mount("/oldroot/dev/null", p, "", unix.MS_BIND, ""); err != nil {
				return fmt.Errorf("mask /proc/%s: %w", m, err)
			}
		}
	}
	return nil
}

// devices are bound from the host; nothing else of the host's /dev is visible.
var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// mountDev builds a minimal /dev on a tiny tmpfs that ends read-only, so that every byte a sandbox
// writes still goes to the capped layer (/dev/shm is a directory of the layer).
func mountDev() error {
	if err := os.MkdirAll("/newroot/dev", 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", "/newroot/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "size=64k,nr_inodes=64,mode=0755"); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	for _, d := range devices {
		p := "/newroot/dev/" + d
		f, err := os.OpenFile(p, os.O_CREATE|os.O_RDONLY, 0o666)
		if err != nil {
			return err
		}
		f.Close()
		if err := unix.Mount("/oldroot/dev/"+d, p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /dev/%s: %w", d, err)
		}
	}
	for _, l := range [][2]string{{"/proc/self/fd", "fd"}, {"/proc/self/fd/0", "stdin"},
		{"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"}, {"pts/ptmx", "ptmx"}} {
		if err := os.Symlink(l[0], "/newroot/dev/"+l[1]); err != nil {
			return err
		}
	}
	for _, d := range []string{"pts", "shm"} {
		if err := os.Mkdir("/newroot/dev/"+d, 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount("devpts", "/newroot/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC,
		"newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("mount /dev/pts: %w", err)
	}
	// /dev/shm: shared memory is written memory, so it lives in the capped layer too.
	if err := os.MkdirAll("/shm", 0o1777); err != nil {
		return err
	}
	if err := os.Chmod("/shm", 0o777|os.ModeSticky); err != nil {
		return err
	}
	if err := unix.Mount("/shm", "/newroot/dev/shm", "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind /dev/shm: %w", err)
	}
	if err := remount("/newroot/dev/shm", unix.MS_NOSUID|unix.MS_NODEV); err != nil {
		return err
	}
	return unix.Mount("", "/newroot/dev", "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NOEXEC, "size=64k,nr_inodes=64,mode=0755")
}

// cover mounts an empty directory (a small tmpfs, writable until the caller remounts it) over
// directory p of the sandbox, and returns where; a p that is not there is left alone ("").
func cover(p string) (string, error) {
	dst, err := inRoot(p)
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(dst); err != nil || !st.IsDir() {
		return "", nil // not there (or out of reach): nothing to hide
	}
	if err := unix.Mount("tmpfs", dst, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=64k,nr_inodes=256,mode=0755"); err != nil {
		return "", fmt.Errorf("cover %s: %w", p, err)
	}
	return dst, nil
}

// readOnlyPath makes sandbox path p read-only (filesystem.readOnly): a bind of it onto itself,
// remounted read-only, so the kernel refuses every write below it. A path that does not exist
// yet is made a directory where the tree is writable; where it cannot be made (a read-only
// part of the root), nothing can be written there anyway.
func readOnlyPath(p string) error {
	dst, err := inRoot(p)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(dst); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dst, 0o755); errors.Is(err, unix.EROFS) {
			return nil
		} else if err != nil {
			return fmt.Errorf("read-only path %s: %w", p, err)
		}
	}
	if err := unix.Mount(dst, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("read-only path %s: %w", p, err)
	}
	return remount(dst, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV)
}

// block makes a path inside the sandbox inaccessible: directories get an empty, read-only tmpfs
// with mode 000, files an empty mode-000 file. A path init cannot reach (not there, or below a
// directory the sandbox's root may not search) is left alone: no command can reach it either.
func block(p string) error {
	dst, err := inRoot(p)
	if err != nil {
		return err
	}
	st, err := os.Stat(dst)
	if err != nil {
		return nil // out of reach
	}
	if st.IsDir() {
		return unix.Mount("tmpfs", dst, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,nr_inodes=1,mode=000")
	}
	empty := "/blocked-" + strings.ReplaceAll(strings.TrimPrefix(p, "/"), "/", "_")
	if err := os.WriteFile(empty, nil, 0); err != nil {
		return err
	}
	if err := unix.Mount(empty, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("block %s: %w", p, err)
	}
	return remount(dst, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC)
}
