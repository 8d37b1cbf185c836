package microvm

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// The initramfs of every VM is the airlock binary as /init (the guest agent, then airlock's init:
// internal/guest/vm); the guest kernel has everything it needs built in
// (scripts/microvm/guest-kernel.config), so there are no modules to load. It is built from this
// very binary at the first VM (about 38 MB, uncompressed: under TCG unpacking is cheaper than
// decompressing) and kept in the state directory under a name made of the binary's digest, so a
// daemon of the same build reuses it and a new build never boots an old agent.

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

func hashFile(h io.Writer, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(h, f)
	return err
}
