package microvm

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// The initramfs of every VM is the airlock binary as /init (the guest agent, then airlock's init:
// internal/guest/vm) and the kernel modules the guest loads, listed in lib/modules/order. It is
// built from this very binary at the first VM (about 25 MB, uncompressed: under TCG unpacking is
// cheaper than decompressing) and kept in the state directory under a name made of the binary's
// and the modules' digests, so a daemon of the same build reuses it and a new build never boots
// an old agent.

// initramfs returns the path of the initramfs for binary self and the modules of kernelDir,
// building it when it is not there yet.
func initramfs(stateDir, self, kernelDir string) (string, error) {
	modDir := filepath.Join(kernelDir, "modules")
	order, err := os.ReadFile(filepath.Join(modDir, "order"))
	if err != nil {
		return "", fmt.Errorf("guest kernel modules: %w", err)
	}
	mods := strings.Fields(string(order))
	h := sha256.New()
	for _, f := range append([]string{self}, pathsIn(modDir, mods)...) {
		if err := hashFile(h, f); err != nil {
			return "", err
		}
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
	for _, d := range []string{"dev", "proc", "sys", "lib", "lib/modules"} {
		c.Dir(d, 0o755)
	}
	c.File("init", 0o755, self)
	for i, m := range mods {
		c.File("lib/modules/"+filepath.Base(m), 0o644, pathsIn(modDir, mods)[i])
	}
	c.Bytes("lib/modules/order", 0o644, order)
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

func pathsIn(dir string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = filepath.Join(dir, filepath.Base(n))
	}
	return out
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
