package microvm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/guest/vm"
	"github.com/airlockrun/airlock/internal/snapshot"
)

// The image cache is shared by every airlock on the host, and bounded by collection: an image is
// removed once nothing of the host uses it —
//
//   - a VM running on it: the level opens each image a VM gets and takes a shared flock on it
//     before it hands the descriptor to the VMM, and a flock belongs to the open file, which the
//     VMM keeps as long as it runs (whatever happens to the airlock that started it);
//   - an airlock that would start VMs on it: each holds a shared flock on its current images
//     (the host template's, the newest /etc) as long as it lives;
//   - a memory snapshot the VM was saved into: a reference file under .refs/<image>/ names the
//     snapshot's manifest, and holds as long as that file exists (in its memory directory, or
//     in the snapshot store once stored: snapshot.StoredPath);
//
// and it was not used for imageGrace (its time is touched at every use), which spares an image
// an airlock is about to lock, and one an older airlock that takes no locks uses. The collector
// takes an exclusive flock without waiting — any shared one keeps the image — and removes the
// name under it; a user that opened the image meanwhile finds, once it holds its lock, that the
// name no longer names what it locked, and gets the image again (made anew). Collection runs
// when the level starts, after an image was made, and with the host template's recheck.

// imageGrace is how long an image nothing holds is kept after its last use.
const imageGrace = time.Hour

// refsDir holds the snapshots' references to images, one directory per image.
const refsDir = ".refs"

// lockImage opens the image at path and takes a shared lock on it. It fails with fs.ErrNotExist
// when the name no longer names the file locked (a collector removed it meanwhile).
func lockImage(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	for try := 0; ; try++ {
		err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
		if !errors.Is(err, unix.EWOULDBLOCK) || try == 400 {
			break
		}
		time.Sleep(5 * time.Millisecond) // a collector looks at it, for a moment
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	var held, named unix.Stat_t
	if unix.Fstat(int(f.Fd()), &held) != nil || unix.Stat(path, &named) != nil || held.Ino != named.Ino || held.Dev != named.Dev {
		f.Close()
		return nil, fmt.Errorf("%s was collected: %w", path, fs.ErrNotExist)
	}
	touch(path)
	return f, nil
}

// lockImages opens and locks images (Image.File); an image collected meanwhile is got again
// (resolve), a few times.
func lockImages(images []Image, resolve func() ([]Image, error)) ([]Image, error) {
	for try := 0; ; try++ {
		err := func() error {
			for i := range images {
				f, err := lockImage(images[i].Path)
				if err != nil {
					closeImages(images)
					return err
				}
				images[i].File = f
			}
			return nil
		}()
		if err == nil || !errors.Is(err, fs.ErrNotExist) || resolve == nil || try == 2 {
			return images, err
		}
		if images, err = resolve(); err != nil {
			return nil, err
		}
	}
}

// closeImages closes the images' files the level opened for a VMM (Image.File): the VMM holds
// its own copies of the descriptors, and with them the locks.
func closeImages(images []Image) {
	for i := range images {
		if images[i].File != nil {
			images[i].File.Close()
			images[i].File = nil
		}
	}
}

// hold makes img the current image of its kind (prefix) for this process: locked until another
// takes its place or the process ends.
func (r *rootImages) hold(prefix, img string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur := r.held[prefix]; cur != nil && cur.Name() == img {
		return
	}
	f, err := lockImage(img)
	if err != nil {
		return // a VM that uses it locks it itself
	}
	if cur := r.held[prefix]; cur != nil {
		cur.Close()
	}
	r.held[prefix] = f
}

// release lets go of the current images.
func (r *rootImages) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, f := range r.held {
		f.Close()
		delete(r.held, k)
	}
}

// imageRef is a snapshot's reference to an image: the snapshot's manifest where the level wrote
// it, and where the snapshot store keeps it once stored. It holds while either exists.
type imageRef struct {
	Manifest string `json:"manifest"`
	Stored   string `json:"stored"`
}

// refer records that the memory snapshot in mem (whose manifest is written) uses the cached
// images among images.
func (r *rootImages) refer(images []Image, mem string) error {
	manifest := filepath.Join(mem, fileManifest)
	b, err := os.ReadFile(manifest)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	ref := imageRef{Manifest: manifest, Stored: snapshot.StoredPath(mem, sha256Hex(b))}
	data, err := json.Marshal(ref)
	if err != nil {
		return err
	}
	key := sha256.Sum256([]byte(ref.Stored))
	for _, img := range images {
		if img.Serial == vm.SerialEtc || filepath.Dir(img.Path) != r.dir {
			continue // the snapshot has its own copy
		}
		dir := filepath.Join(r.dir, refsDir, filepath.Base(img.Path))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("snapshot: image reference: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, hex.EncodeToString(key[:16])), data, 0o600); err != nil {
			return fmt.Errorf("snapshot: image reference: %w", err)
		}
	}
	return nil
}

// referenced reports whether a snapshot still uses image name; the references of snapshots that
// are gone are removed.
func (r *rootImages) referenced(name string) bool {
	dir := filepath.Join(r.dir, refsDir, name)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	live := false
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		var ref imageRef
		if b, err := os.ReadFile(p); err == nil && json.Unmarshal(b, &ref) == nil && (exists(ref.Manifest) || exists(ref.Stored)) {
			live = true
			continue
		}
		os.Remove(p)
	}
	if !live {
		os.Remove(dir)
	}
	return live
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return p != "" && err == nil
}

// collect removes the images nothing uses (see above), and what builds that died left.
func (r *rootImages) collect() {
	ents, err := os.ReadDir(r.dir)
	if err != nil {
		return
	}
	var gone []string
	for _, e := range ents {
		name := e.Name()
		p := filepath.Join(r.dir, name)
		fi, err := e.Info()
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(name, ".build-") || strings.HasPrefix(name, ".tree-"):
			// A build's output or tree, left by a builder that died (each build is bounded).
			if time.Since(fi.ModTime()) > imageBuildTimeout+time.Minute {
				if os.RemoveAll(p) == nil {
					gone = append(gone, name)
				}
			}
		case strings.HasPrefix(name, ".tpl-") || strings.HasPrefix(name, ".tmp-.tpl-"):
			// A template walk's record (rootimage.go), of no use once older than a recheck, or
			// one a writer that died left half made.
			if time.Since(fi.ModTime()) > templateRecheck+time.Minute {
				_ = os.Remove(p)
			}
		case strings.HasSuffix(name, ".erofs") && !strings.HasPrefix(name, "."):
			if time.Since(fi.ModTime()) < imageGrace || r.referenced(name) {
				continue
			}
			if r.remove(p) {
				gone = append(gone, name)
			}
		}
	}
	if len(gone) > 0 {
		slices.Sort(gone)
		r.log.Info("removed root images nothing uses", "images", gone)
	}
}

// remove removes image p unless someone holds a lock on it.
func (r *rootImages) remove(p string) bool {
	if !removeUnlocked(p) {
		return false
	}
	os.RemoveAll(filepath.Join(r.dir, refsDir, filepath.Base(p)))
	return true
}

// removeUnlocked removes file p unless someone holds a lock on it (lockImage).
func removeUnlocked(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	if flockExNB(f) != nil {
		return false // in use
	}
	return os.Remove(p) == nil
}

// flockExNB takes an exclusive lock on f without waiting (and keeps it until f is closed).
func flockExNB(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) }

// sha256Hex is the hex sha256 of b.
func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
