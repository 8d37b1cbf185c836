package microvm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/atomicfile"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// The guest's read-only root comes from images: the host template (the host's /usr and the
// operator's paths, /usr/local covered) and the generated /etc are each an erofs image the host
// builds from its own files, offered to the guest as a read-only disk. Not a share: QEMU refuses
// to save a VM while a 9p share is mounted in it (its state lives in QEMU), and a memory snapshot
// is a saved VM. An image is the host's own content laid out by mkfs.erofs; the host never reads
// an image back, nor anything a guest wrote.
//
// The images are kept in a host-wide cache (Config.ImageDir) under a name made of their content:
// a walk of the tree (every entry's path, type, mode, owner, size, times and inode) and the
// format. Only what every host user may read goes in — a file without read permission for
// others, a directory others cannot list and enter, a device or socket is left out — as the VMM,
// an unprivileged uid, could read no more of a share: in the guest, the sandbox's root is the
// owner of host root's files. The host template is walked again at most once a minute when VMs
// are made, and a changed tree gets a new image (about a minute for 5 GB of /usr here); VMs
// running keep theirs.

// imageFormat changes whenever the images' build changes, so that older images are not reused.
const imageFormat = "erofs-v1"

// templateRecheck is how often the host template's tree is walked again to see whether it
// changed.
const templateRecheck = time.Minute

// rootImages is the cache of the guests' root images.
type rootImages struct {
	dir  string
	self string // the airlock binary, re-executed as the builder's jail
	mkfs string // mkfs.erofs
	log  *slog.Logger

	mu       sync.Mutex // guards everything below
	tpl      string     // the host template's current image
	checked  time.Time
	checking bool
	builds   map[string]*imageBuild // the builds under way, by image
	stacks   map[string]string      // an image's layers (their directories, joined) → its image
	held     map[string]*os.File    // the current image of each kind, locked (imagelock.go)
}

// imageBuild is one image being made; done is closed when img or err is set.
type imageBuild struct {
	done chan struct{}
	img  string
	err  error
}

// imageBuildTimeout bounds one build (the host template's is about a minute here).
const imageBuildTimeout = 30 * time.Minute

func newRootImages(dir, self, mkfs string, log *slog.Logger) *rootImages {
	return &rootImages{dir: dir, self: self, mkfs: mkfs, log: log, builds: map[string]*imageBuild{}, stacks: map[string]string{}, held: map[string]*os.File{}}
}

// source is what an image is made of: Mounts bound in order (the host template's, Public: only
// what every host user may read), or Lowers, directories stacked as an overlay, top first (an
// image's layers, whose whiteouts the overlay applies).
type source struct {
	Mounts  []ShareMount
	Lowers  []string
	Public  bool
	Content bool // keyed by its files' contents (walkTree)
}

// walked is what walkTree walks of s.
func (s source) walked() []ShareMount {
	if s.Lowers == nil {
		return s.Mounts
	}
	var m []ShareMount
	for _, l := range s.Lowers {
		m = append(m, ShareMount{Src: l, Dst: "/", Dir: true})
	}
	return m
}

// tree is a walk of a tree of mounts.
type tree struct {
	key     string   // the digest of every entry's facts
	exclude []string // paths (relative to the tree's root) left out: not readable by everyone
	entries int
}

// walkTree walks the tree mounts make when bound in order at their Dst (see assembleShare):
// a later mount covers what an earlier one has at its Dst. public leaves out what not every
// host user may read (the host template's); an image's or a template's tree is taken whole.
// content keys the tree by its files' contents instead of their times and inodes (a small tree
// generated again and again the same, the /etc of the sandboxes).
func walkTree(mounts []ShareMount, public, content bool) (tree, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s %v %v\n", imageFormat, public, content)
	var t tree
	later := func(i int, p string) bool {
		for _, m := range mounts[i+1:] {
			if m.Dst == p {
				return true
			}
		}
		return false
	}
	for i, m := range mounts {
		if m.Empty {
			fmt.Fprintf(h, "%s empty\n", m.Dst)
			continue
		}
		err := filepath.WalkDir(m.Src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel := filepath.Join(m.Dst, strings.TrimPrefix(p, m.Src))
			if p != m.Src && later(i, rel) {
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok {
				return fmt.Errorf("%s: no stat", p)
			}
			t.entries++
			if content {
				sum, err := contentOf(p, st)
				if err != nil {
					return err
				}
				fmt.Fprintf(h, "%s\x00%o\x00%d\x00%d\x00%d\x00%s\n", rel, st.Mode, st.Uid, st.Gid, st.Size, sum)
			} else {
				fmt.Fprintf(h, "%s\x00%o\x00%d\x00%d\x00%d\x00%d.%d\x00%d.%d\x00%d\x00%d\n", rel, st.Mode, st.Uid, st.Gid, st.Size,
					st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec, st.Ino, st.Dev)
			}
			if public && !everyones(st) {
				if rel == "/" {
					return fmt.Errorf("%s is not readable by every host user", m.Src)
				}
				t.exclude = append(t.exclude, strings.TrimPrefix(rel, "/"))
				if d.IsDir() {
					return fs.SkipDir
				}
			}
			return nil
		})
		if err != nil {
			return tree{}, fmt.Errorf("walk %s: %w", m.Src, err)
		}
	}
	t.key = hex.EncodeToString(h.Sum(nil))
	return t, nil
}

// contentOf is what an entry holds, for a tree keyed by content: a file's digest, a symlink's
// target.
func contentOf(p string, st *syscall.Stat_t) (string, error) {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		f, err := os.Open(p)
		if err != nil {
			return "", err
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return "", err
		}
		return hex.EncodeToString(h.Sum(nil)), nil
	case unix.S_IFLNK:
		return os.Readlink(p)
	}
	return "", nil
}

// everyones reports whether every host user may read the entry st: a file others may read, a
// directory they may list and enter, a symlink.
func everyones(st *syscall.Stat_t) bool {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return st.Mode&0o004 != 0
	case unix.S_IFDIR:
		return st.Mode&0o005 == 0o005
	case unix.S_IFLNK:
		return true
	}
	return false
}

// template returns the image of the host template whose mounts are mounts: the current one, and
// now and then (templateRecheck) a look, in the background, at whether the tree changed.
func (r *rootImages) template(ctx context.Context, mounts []ShareMount) (string, error) {
	src := source{Mounts: mounts, Public: true}
	r.mu.Lock()
	adopted := false
	if r.tpl == "" {
		// Another airlock process (a daemon, a run) may have walked this template lately.
		if img, at := r.lastChecked(mounts); img != "" {
			r.tpl, r.checked, adopted = img, at, true
		}
	}
	if r.tpl != "" {
		img := r.tpl
		if time.Since(r.checked) > templateRecheck && !r.checking {
			r.checking = true
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), imageBuildTimeout)
				defer cancel()
				img, err := r.build(ctx, "tpl", src)
				r.mu.Lock()
				defer r.mu.Unlock()
				r.checking, r.checked = false, time.Now()
				if err != nil {
					r.log.Warn("could not check the host template's image; VMs keep the last one", "image", r.tpl, "err", err)
					return
				}
				r.tpl = img
				r.recordChecked(mounts, img, r.checked)
				go func() {
					r.hold("tpl", img)
					r.collect()
				}()
			}()
		}
		r.mu.Unlock()
		if adopted {
			r.hold("tpl", img)
		}
		if _, err := os.Stat(img); err == nil {
			touch(img)
			return img, nil
		}
		// Collected (by an airlock that did not see this one's lock): made again.
	} else {
		r.mu.Unlock()
	}
	img, err := r.build(ctx, "tpl", src)
	if err != nil {
		return "", err
	}
	r.hold("tpl", img)
	r.mu.Lock()
	r.tpl, r.checked = img, time.Now()
	r.recordChecked(mounts, img, r.checked)
	r.mu.Unlock()
	return img, nil
}

// checkRecord is what one airlock process tells the others of its last walk of a host template
// (a file in the image directory per template, named by its mounts): which image the tree was,
// and when. A process that finds a record of less than templateRecheck ago takes its image
// without a walk of its own (about 1.5 s for this host's /usr), as a daemon does between its own
// rechecks: a one-shot `airlock run` beside a daemon does not walk the host's /usr each time.
type checkRecord struct {
	Image   string    `json:"image"`
	Checked time.Time `json:"checked"`
}

func (r *rootImages) recordPath(mounts []ShareMount) string {
	b, _ := json.Marshal(mounts)
	sum := sha256.Sum256(b)
	return filepath.Join(r.dir, ".tpl-"+hex.EncodeToString(sum[:12])+".checked")
}

// lastChecked is the image of the template of mounts and when it was walked, if another process
// recorded a walk of less than templateRecheck ago whose image is still there; else "".
func (r *rootImages) lastChecked(mounts []ShareMount) (string, time.Time) {
	b, err := os.ReadFile(r.recordPath(mounts))
	if err != nil {
		return "", time.Time{}
	}
	var rec checkRecord
	if json.Unmarshal(b, &rec) != nil || time.Since(rec.Checked) >= templateRecheck || time.Since(rec.Checked) < 0 ||
		filepath.Dir(rec.Image) != r.dir || !strings.HasSuffix(rec.Image, ".erofs") {
		return "", time.Time{}
	}
	if _, err := os.Stat(rec.Image); err != nil {
		return "", time.Time{}
	}
	return rec.Image, rec.Checked
}

// recordChecked records a walk of the template of mounts (checkRecord). Best effort.
func (r *rootImages) recordChecked(mounts []ShareMount, img string, at time.Time) {
	b, err := json.Marshal(checkRecord{Image: img, Checked: at})
	if err != nil {
		return
	}
	_ = atomicfile.WriteFile(r.recordPath(mounts), b, 0o644)
}

// directory returns the image of directory src (the generated /etc), held as the current one
// of its kind.
func (r *rootImages) directory(ctx context.Context, prefix, src string) (string, error) {
	img, err := r.build(ctx, prefix, source{Mounts: []ShareMount{{Src: src, Dst: "/", Dir: true}}, Public: true, Content: true})
	if err == nil {
		r.hold(prefix, img)
	}
	return img, err
}

// layers returns the image of directories stacked, top first: an image's layers (which the
// store never changes: their image is remembered) or an operator's template directory (walked
// every time).
func (r *rootImages) layers(ctx context.Context, lowers []string) (string, error) {
	key := strings.Join(lowers, "\x00")
	r.mu.Lock()
	img, ok := r.stacks[key]
	r.mu.Unlock()
	if ok && len(lowers) > 1 {
		if _, err := os.Stat(img); err == nil {
			touch(img)
			return img, nil
		}
	}
	img, err := r.build(ctx, "root", source{Lowers: lowers})
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	r.stacks[key] = img
	r.mu.Unlock()
	return img, nil
}

// touch marks an image used now, so that the collection of old images spares it.
func touch(p string) {
	now := time.Now()
	_ = os.Chtimes(p, now, now)
}

// build returns the image of src, named prefix-<key>.erofs, making it unless it is there. The
// making goes on when ctx ends (the next VM finds the image), and one build serves every caller
// that wants the same image.
func (r *rootImages) build(ctx context.Context, prefix string, src source) (string, error) {
	t, err := walkTree(src.walked(), src.Public, src.Content)
	if err != nil {
		return "", err
	}
	name := filepath.Join(r.dir, prefix+"-"+t.key[:32]+".erofs")
	if _, err := os.Stat(name); err == nil {
		touch(name)
		return name, nil
	}
	r.mu.Lock()
	b := r.builds[name]
	if b == nil {
		b = &imageBuild{done: make(chan struct{})}
		r.builds[name] = b
		go func() {
			bctx, cancel := context.WithTimeout(context.Background(), imageBuildTimeout)
			defer cancel()
			b.img, b.err = r.make(bctx, name, src, t)
			r.mu.Lock()
			delete(r.builds, name)
			r.mu.Unlock()
			close(b.done)
		}()
	}
	r.mu.Unlock()
	select {
	case <-b.done:
		return b.img, b.err
	case <-ctx.Done():
		return "", fmt.Errorf("%s is still being made (a later VM will find it): %w", filepath.Base(name), ctx.Err())
	}
}

// make makes image name of src, whose walk was t.
func (r *rootImages) make(ctx context.Context, name string, src source, t tree) (string, error) {
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return "", err
	}
	// One builder per image, across airlock processes.
	lock, err := os.OpenFile(filepath.Join(r.dir, ".lock-"+filepath.Base(name)), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", err
	}
	defer os.Remove(lock.Name())
	if _, err := os.Stat(name); err == nil {
		touch(name)
		return name, nil
	}
	t0 := time.Now()
	tmp := filepath.Join(r.dir, ".build-"+filepath.Base(name))
	defer os.Remove(tmp)
	if err := r.makeImage(ctx, tmp, src, t.exclude); err != nil {
		return "", err
	}
	// A tree that changed meanwhile may have brought in what is not everyone's to read.
	again, err := walkTree(src.walked(), src.Public, src.Content)
	if err != nil {
		return "", err
	}
	if again.key != t.key {
		return "", errors.New("the files changed while their image was made; the next VM tries again")
	}
	// Root's alone: an image of an OCI image or a template holds what only root may read there;
	// the VMM gets it as a descriptor (qemu.go).
	if err := os.Chmod(tmp, 0o400); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, name); err != nil {
		return "", err
	}
	var size int64
	if fi, err := os.Stat(name); err == nil {
		size = fi.Size()
	}
	r.log.Info("built a root image for VMs", "image", name, "entries", t.entries, "leftOut", len(t.exclude), "bytes", size, "took", time.Since(t0))
	go r.collect()
	return name, nil
}

// makeImage writes the image of src to out: straight from a single directory, or in a jail of
// its own (airlock re-executed in new namespaces, the tree assembled in its mount namespace:
// the mounts bound, or the lowers stacked as a read-only overlay).
func (r *rootImages) makeImage(ctx context.Context, out string, src source, exclude []string) error {
	args := []string{r.mkfs, "--quiet", "--preserve-mtime", "-x-1"}
	for _, e := range exclude {
		args = append(args, "--exclude-path="+e)
	}
	single := ""
	switch {
	case len(src.Lowers) == 1:
		single = src.Lowers[0]
	case src.Lowers == nil && len(src.Mounts) == 1 && src.Mounts[0].Dst == "/":
		single = src.Mounts[0].Src
	}
	if single != "" {
		args = append(args, out, single)
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("mkfs.erofs: %w: %s", err, b)
		}
		return nil
	}
	root, err := os.MkdirTemp(r.dir, ".tree-")
	if err != nil {
		return err
	}
	defer os.Remove(root)
	args = append(args, out, root)
	jc := jailConfig{Args: args, Share: root, Build: true}
	if src.Lowers != nil {
		jc.Lowers = src.Lowers
	} else {
		jc.Mounts = src.Mounts
	}
	spec, err := json.Marshal(jc)
	if err != nil {
		return err
	}
	goR, goW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer goR.Close()
	var outBuf strings.Builder
	cmd := exec.CommandContext(ctx, r.self)
	cmd.Args = []string{jailArg0, string(spec)}
	cmd.Env = []string{}
	cmd.Stdout, cmd.Stderr = &outBuf, &outBuf
	cmd.ExtraFiles = []*os.File{goR}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWNET,
		Pdeathsig:  syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		goW.Close()
		return fmt.Errorf("start the image builder: %w", err)
	}
	_, _ = goW.Write([]byte{1})
	goW.Close()
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("mkfs.erofs: %w: %s", err, strings.TrimSpace(outBuf.String()))
	}
	return nil
}

// WarmImages makes the host template's image now, unless it is there: the first VM on the host
// template waits for it otherwise (about a minute for 6 GB of /usr here).
func (d *Driver) WarmImages(ctx context.Context) error {
	if d.roots == nil || d.roots.mkfs == "" {
		return fmt.Errorf("microvm level: no mkfs.erofs: %w", errdefs.ErrUnavailable)
	}
	p, err := d.plan(sandbox.Spec{}, nil)
	if err != nil {
		return err
	}
	_, err = d.images(ctx, p)
	return err
}
