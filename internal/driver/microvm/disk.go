package microvm

import (
	"fmt"
	"os"
	"os/exec"
)

// makeDisk makes the writable layer's disk: a sparse raw image of size MiB with an empty ext4
// file system, owned by uid (the VMM's). No journal (the layer dies with the VM) and no
// reserved blocks (the sandbox gets all of it); the guest mounts it with noinit_itable, so the
// untouched inode tables of the sparse file cost neither disk nor guest CPU.
func makeDisk(path string, sizeMB int64, uid, gid int) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(sizeMB << 20)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// -T default: 4 KiB blocks and an inode per 16 KiB at every size (mkfs's "small" type would
	// take 1 KiB blocks and 8% of a small disk for inodes).
	out, err := exec.Command("mkfs.ext4", "-q", "-F", "-T", "default", "-m", "0", "-O", "^has_journal",
		"-E", "lazy_itable_init=1,nodiscard,root_owner=0:0", "-L", "airlock", path).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mkfs.ext4: %w: %s", err, out)
	}
	return os.Chown(path, uid, gid)
}
