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
// first; none means the host template t. hostID maps a sandbox uid to the host's.
func (b *bundle) assemble(spec sandbox.Spec, t hosttemplate.Template, lowers []string, nameFiles map[string]string, initPath string, hostID func(int) int) error {
	image := len(lowers) > 0
	if err := b.mountLayer(spec.Resources.DiskMB); err != nil {
		return err
	}
	if image {
		if err := b.imageBase(lowers, nameFiles); err != nil {
			return err
		}
	} else if err := b.templateBase(t); err != nil {
		return err
	}
	dirs, err := writableDirs(spec, t, !image)
	if err != nil {
		return err
	}
	if err := b.makeWritable(dirs, sandboxUID(spec), hostID); err != nil {
		return err
	}
	if err := b.makeInitDir(hostID); err != nil {
		return err
	}
	return b.mountRoot(spec, t, !image, dirs, initPath)
}

// mountLayer mounts the writable layer, a tmpfs of diskMb, fills it from the snapshot being
// restored (b.seed), and makes its shm directory.
func (b *bundle) mountLayer(diskMB int64) error {
	if err := os.MkdirAll(b.layer, 0o711); err != nil {
		return fmt.Errorf("writable layer: %w", err)
	}
	opts := fmt.Sprintf("size=%d,mode=0755", diskMB<<20)
	if err := unix.Mount("tmpfs", b.layer, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount writable layer (%s): %w", opts, err)
	}
	if b.seed != nil {
		if err := b.seed(b.layer); err != nil {
			return fmt.Errorf("restore the snapshot's layer: %w", err)
		}
	}
	if err := mkdirMode(filepath.Join(b.layer, "shm"), 0o777|os.ModeSticky); err != nil {
		return fmt.Errorf("writable layer: %w", err)
	}
	return nil
}

// templateBase makes the base a skeleton of the host template's mount points in the layer.
func (b *bundle) templateBase(t hosttemplate.Template) error {
	b.base = filepath.Join(b.layer, "root")
	return skeleton(b.base, t)
}

// imageBase makes the base an overlay of the image's layers under the writable layer, with the
// files airlock names the sandbox by (nameFiles: /etc/hostname, /etc/hosts, ...) and the mount
// points the runtime needs.
func (b *bundle) imageBase(lowers []string, nameFiles map[string]string) error {
	b.base = filepath.Join(b.dir, "overlay")
	for _, d := range []string{b.base, b.layer + "/upper", b.layer + "/work"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("image overlay: %w", err)
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
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
		// A symlink (resolv.conf → ../run/...) is replaced, never followed.
		if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("write %s: %w", p, err)
		}
		if err := os.WriteFile(dst, []byte(content), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
	}
	for _, d := range []string{"/proc", "/dev/shm", "/dev/pts", "/etc"} {
		p, err := fsroot.ResolveIn(b.base, d)
		if err != nil {
			return fmt.Errorf("mount point %s: %w", d, err)
		}
		if err := os.MkdirAll(p, 0o755); err != nil {
			return fmt.Errorf("mount point %s: %w", d, err)
		}
	}
	return nil
}

// sandboxUID is the uid the sandbox's commands run as.
func sandboxUID(spec sandbox.Spec) int {
	if spec.User == sandbox.UserRoot {
		return 0
	}
	return sandbox.AgentUID
}

// writableDirs are the sandbox paths of the writable layer: /tmp, /workspace, the user's home,
// the workdir and filesystem.readWrite (except those inside a writable bind, writable already).
// hostTemplate says the root is the host template's, whose directories are read-only.
func writableDirs(spec sandbox.Spec, t hosttemplate.Template, hostTemplate bool) ([]string, error) {
	home := "/home/agent"
	if spec.User == sandbox.UserRoot {
		home = "/root"
	}
	dirs := append(append([]string{}, writable...), home)
	if !slices.Contains(dirs, spec.Workdir) {
		dirs = append(dirs, spec.Workdir)
	}
	for i, p := range spec.Filesystem.ReadWrite {
		bound, err := writablePath(fmt.Sprintf("filesystem.readWrite[%d]", i), p, spec, t, hostTemplate)
		if err != nil {
			return nil, err
		}
		if !bound && !slices.Contains(dirs, p) {
			dirs = append(dirs, p)
		}
	}
	return dirs, nil
}

// makeWritable makes the writable directories in the base, owned by the sandbox's user (uid);
// /tmp is root's, world-writable and sticky.
func (b *bundle) makeWritable(dirs []string, uid int, hostID func(int) int) error {
	for _, d := range dirs {
		p, err := fsroot.ResolveIn(b.base, d)
		if err != nil {
			return err
		}
		if d == "/tmp" {
			err = mkdirOwned(p, 0o777|os.ModeSticky, hostID(0))
		} else {
			err = mkdirOwned(p, 0, hostID(uid))
		}
		if err != nil {
			return fmt.Errorf("writable directory %s: %w", d, err)
		}
	}
	return nil
}

// makeInitDir makes /.airlock in the base, with the mount point of airlock's init and, for a
// runtime whose init dials the host, the directory of its control socket, init's alone.
func (b *bundle) makeInitDir(hostID func(int) int) error {
	initDir, err := fsroot.ResolveIn(b.base, "/.airlock")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(initDir, 0o755); err != nil {
		return fmt.Errorf("init directory: %w", err)
	}
	if err := touch(filepath.Join(initDir, "airlock-init")); err != nil {
		return fmt.Errorf("init mount point: %w", err)
	}
	if b.control == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Join(initDir, filepath.Base(controlDir)), 0o755); err != nil {
		return fmt.Errorf("control mount point: %w", err)
	}
	if err := os.Mkdir(b.control, 0o700); err != nil {
		return fmt.Errorf("control directory: %w", err)
	}
	if err := os.Lchown(b.control, hostID(guest.InitUID), hostID(guest.InitUID)); err != nil {
		return fmt.Errorf("control directory: %w", err)
	}
	return nil
}

// mountRoot makes the sandbox's root at b.rootfs: the base, read-only; for the host template its
// system directories, the operator's paths and /etc; the writable directories; airlock's init and
// its control directory; the user's mounts; then the read-only and blocked paths on top.
func (b *bundle) mountRoot(spec sandbox.Spec, t hosttemplate.Template, hostTemplate bool, dirs []string, initPath string) error {
	if err := os.MkdirAll(b.rootfs, 0o755); err != nil {
		return fmt.Errorf("root: %w", err)
	}
	if err := bindRO(b.base, b.rootfs, true); err != nil {
		return fmt.Errorf("bind root: %w", err)
	}
	if hostTemplate {
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
		src, err := fsroot.ResolveIn(b.base, d)
		if err != nil {
			return err
		}
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

// mkdirMode makes directory p (and its parents) and gives it mode, which the umask may have
// narrowed (or which p had otherwise). Its errors name the host path.
func mkdirMode(p string, mode os.FileMode) error {
	if err := os.MkdirAll(p, 0o755); err != nil {
		return err
	}
	return os.Chmod(p, mode)
}

// mkdirOwned makes directory p (and its parents), gives it mode unless it is 0 (0755 then, or
// what p had), and makes it host uid's (and its group's). Its errors name the host path.
func mkdirOwned(p string, mode os.FileMode, uid int) error {
	if mode == 0 {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
	} else if err := mkdirMode(p, mode); err != nil {
		return err
	}
	return os.Lchown(p, uid, uid)
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
			// The writable directories are binds of the base's; one not made leaves dst missing,
			// which the MkdirAll below makes or reports.
			_ = os.MkdirAll(base, 0o755)
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
