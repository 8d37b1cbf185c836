package microvm

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The initramfs of every VM is the guest binary as /init (guestbin.go: the guest agent, then
// airlock's init); the guest kernel has everything it needs built in
// (scripts/microvm/guest-kernel.config), so there are no modules to load. It is built from that
// binary at the first VM (4 MB for airlock-guest, 27 MB for airlock; uncompressed: under TCG
// unpacking is cheaper than decompressing) and kept in the state directory under a name made of
// the binary's digest, so a daemon of the same build reuses it and a new build never boots an old
// agent; a daemon holds its own, and those of other builds nobody holds are removed.

// initramfs returns the path of the initramfs for binary self, building it when it is not there
// yet.
func initramfs(stateDir, self string) (string, error) {
	h := sha256.New()
	if err := hashFile(h, self); err != nil {
		return "", err
	}
	name := filepath.Join(stateDir, "initramfs-"+hex.EncodeToString(h.Sum(nil))[:24]+".cpio")
	if _, err := os.Stat(name); err == nil {
		return name, nil
	}
	if err := os.MkdirAll(stateDir, 0o711); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(stateDir, ".initramfs-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	bw := bufio.NewWriterSize(tmp, 1<<20)
	c := &cpioWriter{w: bw}
	for _, d := range []string{"dev", "proc", "sys"} {
		c.Dir(d, 0o755)
	}
	c.File("init", 0o755, self)
	err = c.Close()
	if err == nil {
		err = bw.Flush()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), name)
	}
	if err != nil {
		return "", fmt.Errorf("build the initramfs: %w", err)
	}
	return name, nil
}

// holdInitramfs returns the initramfs for binary self, share-locked (lockImage) for as long as
// the file is kept open: pruneInitramfs removes only what nobody holds.
func holdInitramfs(stateDir, self string) (string, *os.File, error) {
	for try := 0; ; try++ {
		p, err := initramfs(stateDir, self)
		if err != nil {
			return "", nil, err
		}
		f, err := lockImage(p)
		if err == nil || !errors.Is(err, fs.ErrNotExist) || try == 2 {
			return p, f, err
		}
		// Pruned by another airlock between its build and its lock: made again.
	}
}

// pruneInitramfs removes the initramfs files of stateDir other than current that no airlock
// holds (those of earlier builds: a few MB each, under /run), and what a build that died left.
func pruneInitramfs(stateDir, current string, log *slog.Logger) {
	ents, err := os.ReadDir(stateDir)
	if err != nil {
		return
	}
	var gone []string
	for _, e := range ents {
		name, p := e.Name(), filepath.Join(stateDir, e.Name())
		switch {
		case strings.HasPrefix(name, ".initramfs-"):
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > time.Hour {
				_ = os.Remove(p)
			}
		case strings.HasPrefix(name, "initramfs-") && p != current:
			if removeUnlocked(p) {
				gone = append(gone, name)
			}
		}
	}
	if len(gone) > 0 {
		log.Info("removed initramfs files of other airlock builds", "dir", stateDir, "files", gone)
	}
}

func hashFile(h io.Writer, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(h, f)
	return err
}
