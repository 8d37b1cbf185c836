package container

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/fsroot"
	"github.com/airlockrun/airlock/internal/guest"
	"github.com/airlockrun/airlock/internal/hosttemplate"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/snapshot"
)

// A bundle is one sandbox's directory under the level's state directory:
//
//	layer/      tmpfs capped at diskMb: every byte the sandbox can write
//	  root/       the host template's skeleton (mount points), or
//	  upper/ work/  the overlay's upper and work directories over an image's layers
//	  shm/        bound at /dev/shm
//	overlay/    an image's layers under layer/upper (image sandboxes only)
//	rootfs/     the sandbox's root: base (layer/root or overlay) bound read-only, with the host's
//	            system directories, /etc, the writable directories, the user's mounts and
//	            airlock's init bound on top
//	config.json the OCI runtime spec
//
// Everything is mounted on the host side, so both runtimes see the same tree and the host can
// reach it for the files API; the level's state directory is a private mount, so none of it
// propagates elsewhere. Teardown detaches the lot.
type bundle struct {
	dir    string
	layer  string
	rootfs string
	base   string // layer/root or overlay
	// seed, when set, fills the fresh layer from a snapshot before anything is built on it.
	seed func(layer string) error
	// control, when set, is the directory of init's control socket, bound at controlDir
	// (gVisor's init dials it: see host.Launcher.Control).
	control string
}

func newBundle(dir string, dialled bool) *bundle {
	b := &bundle{dir: dir, layer: filepath.Join(dir, "layer"), rootfs: filepath.Join(dir, "rootfs")}
	if dialled {
		b.control = filepath.Join(dir, "ctl")
	}
	return b
}

// controlDir is where init finds the directory of its control socket, and controlSocket the socket.
const (
	controlDir    = "/.airlock/ctl"
	controlSocket = controlDir + "/s"
)

// listenControl makes init's control socket in b, reachable by init's user alone: its directory
// is that user's, mode 0700 (commands run as other users, with no capabilities).
func listenControl(b *bundle, initHostUID int) (*net.UnixListener, error) {
	p := filepath.Join(b.control, filepath.Base(controlSocket))
	if len(p) >= len(unix.RawSockaddrUnix{}.Path) {
		return nil, fmt.Errorf("%s: path too long for a unix socket (a shorter state directory fixes it)", p)
	}
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: p, Net: "unixpacket"})
	if err != nil {
		return nil, err
	}
	l.SetUnlinkOnClose(false)
	if err := os.Lchown(p, initHostUID, initHostUID); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// writable are the directories of the writable layer every sandbox gets besides its home.
var writable = []string{"/tmp", "/workspace"}

// assemble builds the root filesystem on the host. lowers are an image's layer directories, top
// first; none means the host template t.
func (b *bundle) assemble(spec sandbox.Spec, t hosttemplate.Template, lowers []string, nameFiles map[string]string, initPath string, hostID func(int) int) error {
	if err := os.MkdirAll(b.layer, 0o711); err != nil {
		return err
	}
	opts := fmt.Sprintf("size=%d,mode=0755", spec.Resources.DiskMB<<20)
	if err := unix.Mount("tmpfs", b.layer, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount writable layer (%s): %w", opts, err)
	}
	if b.seed != nil {
		if err := b.seed(b.layer); err != nil {
			return fmt.Errorf("restore the snapshot's layer: %w", err)
		}
	}
	if err := os.MkdirAll(filepath.Join(b.layer, "shm"), 0o1777); err != nil {
		return err
	}
	os.Chmod(filepath.Join(b.layer, "shm"), 0o777|os.ModeSticky)
	if len(lowers) == 0 {
		b.base = filepath.Join(b.layer, "root")
		if err := skeleton(b.base, t); err != nil {
			return err
		}
	} else {
		b.base = filepath.Join(b.dir, "overlay")
		for _, d := range []string{b.base, b.layer + "/upper", b.layer + "/work"} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		o := "lowerdir=" + strings.Join(lowers, ":") + ",upperdir=" + b.layer + "/upper,workdir=" + b.layer + "/work"
		if err := unix.Mount("overlay", b.base, "overlay", unix.MS_NOSUID|unix.MS_NODEV, o); err != nil {
			return fmt.Errorf("mount image layers: %w", err)
		}
		for p, content := range nameFiles {
			dst, err := fsroot.ResolveIn(b.base, p)
			if err != nil {
				return err
			}
			os.MkdirAll(filepath.Dir(dst), 0o755)
			os.Remove(dst) // a symlink (resolv.conf → ../run/...) is replaced, never followed
			if err := os.WriteFile(dst, []byte(content), 0o644); err != nil {
				return fmt.Errorf("write %s: %w", p, err)
			}
		}
		for _, d := range []string{"/proc", "/dev/shm", "/dev/pts", "/etc"} {
			if p, err := fsroot.ResolveIn(b.base, d); err == nil {
				os.MkdirAll(p, 0o755)
			}
		}
	}
	uid := 0
	home := "/root"
	if spec.User != sandbox.UserRoot {
		uid, home = sandbox.AgentUID, "/home/agent"
	}
	dirs := append(append([]string{}, writable...), home)
	if !slices.Contains(dirs, spec.Workdir) {
		dirs = append(dirs, spec.Workdir)
	}
	for i, p := range spec.Filesystem.ReadWrite {
		if bound, err := writablePath(fmt.Sprintf("filesystem.readWrite[%d]", i), p, spec, t, len(lowers) == 0); err != nil {
			return err
		} else if !bound && !slices.Contains(dirs, p) {
			dirs = append(dirs, p)
		}
	}
	for _, d := range dirs {
		p, err := fsroot.ResolveIn(b.base, d)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(p, 0o755); err != nil {
			return fmt.Errorf("writable directory %s: %w", d, err)
		}
		if d == "/tmp" {
			os.Chmod(p, 0o777|os.ModeSticky)
			os.Lchown(p, hostID(0), hostID(0))
		} else {
			os.Lchown(p, hostID(uid), hostID(uid))
		}
	}
	initDir, err := fsroot.ResolveIn(b.base, "/.airlock")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(initDir, 0o755); err != nil {
		return err
	}
	if err := touch(filepath.Join(initDir, "airlock-init")); err != nil {
		return err
	}
	if b.control != "" {
		if err := os.MkdirAll(filepath.Join(initDir, filepath.Base(controlDir)), 0o755); err != nil {
			return err
		}
		if err := os.Mkdir(b.control, 0o700); err != nil {
			return err
		}
		if err := os.Lchown(b.control, hostID(guest.InitUID), hostID(guest.InitUID)); err != nil {
			return err
		}
	}

	// The root: base, read-only; then what goes on top of it.
	if err := os.MkdirAll(b.rootfs, 0o755); err != nil {
		return err
	}
	if err := bindRO(b.base, b.rootfs, true); err != nil {
		return fmt.Errorf("bind root: %w", err)
	}
	if len(lowers) == 0 {
		for _, d := range t.Dirs {
			if err := bindAt(b.rootfs, d, d, true); err != nil {
				return err
			}
		}
		if err := b.hostPaths(t); err != nil {
			return err
		}
		if err := bindAt(b.rootfs, t.Etc, "/etc", true); err != nil {
			return err
		}
	}
	for _, d := range dirs {
		src, _ := fsroot.ResolveIn(b.base, d)
		if err := bindAt(b.rootfs, src, d, false); err != nil {
			return err
		}
	}
	if err := bindAt(b.rootfs, initPath, "/.airlock/airlock-init", true); err != nil {
		return err
	}
	if b.control != "" {
		if err := bindAt(b.rootfs, b.control, controlDir, false); err != nil {
			return err
		}
	}
	for i, m := range spec.Binds {
		if err := b.userMount(fmt.Sprintf("binds[%d]", i), m); err != nil {
			return err
		}
	}
	for _, p := range spec.Filesystem.ReadOnly {
		if err := b.readOnly(p); err != nil {
			return err
		}
	}
	for _, p := range spec.Filesystem.Blocked {
		if err := b.block(p); err != nil {
			return err
		}
	}
	return nil
}

// hostPaths covers the template's hidden directories with an empty one, binds the operator's
// paths over them (or elsewhere, their mount points made in the base), and makes the covers
// read-only.
func (b *bundle) hostPaths(t hosttemplate.Template) error {
	var covers []string
	for _, h := range t.Hidden {
		p, err := fsroot.ResolveIn(b.rootfs, h)
		if err != nil {
			return err
		}
		if st, err := os.Stat(p); err != nil || !st.IsDir() {
			continue
		}
		if err := unix.Mount("tmpfs", p, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=64k,nr_inodes=256,mode=0755"); err != nil {
			return fmt.Errorf("cover %s: %w", h, err)
		}
		covers = append(covers, p)
	}
	for _, hp := range t.Paths {
		under := slices.ContainsFunc(t.Hidden, func(h string) bool { return strings.HasPrefix(hp.Dst, h+"/") })
		base := b.base // a mount point outside the covers is made below the read-only root
		if under {
			base = b.rootfs
		}
		if err := mountPoint(base, hp.Dst, hp.Src); err != nil {
			return fmt.Errorf("hostTemplate.paths: mount point %s: %w", hp.Dst, err)
		}
		if err := bindAt(b.rootfs, hp.Src, hp.Dst, true); err != nil {
			return err
		}
	}
	for _, p := range covers {
		if err := unix.Mount("", p, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=64k,nr_inodes=256,mode=0755"); err != nil {
			return fmt.Errorf("make %s read-only: %w", p, err)
		}
	}
	return nil
}

// skeleton makes the host template's mount points and merged-/usr links in dir.
func skeleton(dir string, t hosttemplate.Template) error {
	for _, d := range append(append([]string{}, t.Dirs...), "/etc", "/proc", "/dev/shm", "/dev/pts") {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	for p, target := range t.Symlinks {
		if err := os.Symlink(target, filepath.Join(dir, p)); err != nil && !os.IsExist(err) {
			return err
		}
	}
	return nil
}

// writablePath refuses a readWrite path that a read-only mount covers (the host template's
// directories and /etc, read-only binds), and reports one inside a writable bind, which is
// writable already.
func writablePath(field, p string, spec sandbox.Spec, t hosttemplate.Template, hostTemplate bool) (bound bool, err error) {
	under := func(dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	if hostTemplate {
		for _, d := range append(append([]string{}, t.Dirs...), "/etc") {
			if under(d) {
				return false, errdefs.Invalid(field, "%s is inside the host template's %s, which is read-only", p, d)
			}
		}
	}
	if under("/.airlock") {
		return false, errdefs.Invalid(field, "%s is airlock's", p)
	}
	for _, m := range spec.Binds {
		if !under(m.Path) {
			continue
		}
		if m.ReadOnly {
			return false, errdefs.Invalid(field, "%s is inside %s, which is read-only", p, m.Path)
		}
		bound = true
	}
	return bound, nil
}

// userMount binds a host path of the operator's (airlock run --ro/--rw, or a volume the daemon
// granted) into the sandbox.
func (b *bundle) userMount(field string, m sandbox.Bind) error {
	src, err := filepath.EvalSymlinks(m.Host)
	if err != nil {
		return errdefs.Invalid(field, "host path %q: %v", m.Host, err)
	}
	if m.Path == "/.airlock" || strings.HasPrefix(m.Path, "/.airlock/") {
		return errdefs.Invalid(field, "cannot mount over /.airlock")
	}
	// The mount point is made in the base, under the read-only bind.
	if err := mountPoint(b.base, m.Path, src); err != nil {
		return errdefs.Invalid(field, "mount point %s: %v", m.Path, err)
	}
	return bindAt(b.rootfs, src, m.Path, m.ReadOnly)
}

// readOnly makes sandbox path p read-only (filesystem.readOnly): a bind of it onto itself,
// read-only. A path that does not exist yet is made a directory where the tree is writable
// (the layer's directories, a writable volume); where it cannot be made, nothing can be written
// there anyway.
func (b *bundle) readOnly(p string) error {
	dst, err := fsroot.ResolveIn(b.rootfs, p)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(dst); errors.Is(err, fs.ErrNotExist) {
		if base, err := fsroot.ResolveIn(b.base, p); err == nil {
			os.MkdirAll(base, 0o755) // the writable directories are binds of the base's
		}
		if _, err := os.Lstat(dst); errors.Is(err, fs.ErrNotExist) {
			if err := os.MkdirAll(dst, 0o755); errors.Is(err, unix.EROFS) {
				return nil
			} else if err != nil {
				return fmt.Errorf("read-only path %s: %w", p, err)
			}
		}
	}
	if err := bindRO(dst, dst, true); err != nil {
		return fmt.Errorf("read-only path %s: %w", p, err)
	}
	return nil
}

// block makes path p of the sandbox inaccessible: an empty mode-000 tmpfs on a directory, an
// empty mode-000 file on a file.
func (b *bundle) block(p string) error {
	dst, err := fsroot.ResolveIn(b.rootfs, p)
	if err != nil {
		return err
	}
	st, err := os.Stat(dst)
	if err != nil {
		return nil // nothing there to block
	}
	if st.IsDir() {
		return unix.Mount("tmpfs", dst, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,nr_inodes=1,mode=000")
	}
	empty := filepath.Join(b.layer, "blocked-"+strings.ReplaceAll(strings.TrimPrefix(p, "/"), "/", "_"))
	if err := os.WriteFile(empty, nil, 0); err != nil {
		return err
	}
	return bindRO(empty, dst, true)
}

// bindAt binds host path src at sandbox path dst of root (whose mount point must exist in the
// base below it, or is made when root's mount allows).
func bindAt(root, src, dst string, ro bool) error {
	p, err := fsroot.ResolveIn(root, dst)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(p); err != nil {
		return fmt.Errorf("mount point %s: %w", dst, err)
	}
	if err := bindRO(src, p, ro); err != nil {
		return fmt.Errorf("bind %s at %s: %w", src, dst, err)
	}
	return nil
}

// bindRO binds src at dst, nosuid and nodev, read-only if ro.
func bindRO(src, dst string, ro bool) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_NOSUID | unix.MS_NODEV)
	if ro {
		flags |= unix.MS_RDONLY
	}
	return unix.Mount("", dst, "", flags, "")
}

// mountPoint makes a directory (for a directory src) or an empty file at sandbox path p of base.
func mountPoint(base, p, src string) error {
	dst, err := fsroot.ResolveIn(base, p)
	if err != nil {
		return err
	}
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	if st.IsDir() {
		return os.MkdirAll(dst, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return touch(dst)
}

func touch(p string) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// LayerLayout is what of a bundle's writable layer a snapshot holds: the host template's
// skeleton with the writable directories in it, an image overlay's upper directory, and
// /dev/shm. The overlay's work directory is overlayfs's own.
var LayerLayout = snapshot.Layout{
	Top: []string{"root", "upper", "shm"},
	At:  map[string]string{"root": "/", "upper": "/", "shm": "/dev/shm"},
}
