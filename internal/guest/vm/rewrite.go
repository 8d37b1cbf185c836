package vm

import (
	"encoding/json"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/guest"
)

// rewrite gives init's configuration its mount sources. On the other levels the host sends
// detached mount trees of the host paths the plan binds; no descriptor of the host crosses into
// a VM, so the host shares those paths read-only (ShareDir), and the agent clones each from
// there (the operator's read-write volumes from the writable share, WritableDir), as the guest's
// root, and sends the clones in their place.
func rewrite(b []byte, fds []int) ([]byte, []int, error) {
	var m guest.Message
	if err := json.Unmarshal(b, &m); err != nil || m.Kind != guest.MsgConfig || m.Config == nil {
		return b, fds, nil
	}
	binds := m.Config.Root.Binds
	for i := range binds {
		if binds[i].Empty {
			continue
		}
		from := ShareDir
		if !binds[i].ReadOnly {
			from = WritableDir
		}
		tree, err := unix.OpenTree(unix.AT_FDCWD, from+binds[i].Src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return b, fds, fmt.Errorf("mount source %s: %w", binds[i].Src, err)
		}
		attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
		if binds[i].ReadOnly {
			attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
		}
		if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
			unix.Close(tree)
			return b, fds, fmt.Errorf("mount source %s: %w", binds[i].Src, err)
		}
		binds[i].Fd = len(fds)
		fds = append(fds, tree)
	}
	out, err := json.Marshal(&m)
	if err != nil {
		return b, fds, err
	}
	return out, fds, nil
}
