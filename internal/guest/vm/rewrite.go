package vm

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/guest"
)

// rewrite gives init's configuration its mount sources. On the other levels the host sends
// detached mount trees of the host paths the plan binds; no descriptor of the host crosses into
// a VM, so the plan names paths of the guest instead — in the host template's image
// (TemplateDir), the generated /etc's (EtcDir), the shares of the operator's volumes (ShareDir,
// WritableDir) — and the agent clones each, as the guest's root, and sends the clones in their
// place.
// configured is told the configuration (the files API learns the sandbox's user from it).
func rewrite(b []byte, fds []int, configured func(*guest.Config)) ([]byte, []int, error) {
	var m guest.Message
	if err := json.Unmarshal(b, &m); err != nil || m.Kind != guest.MsgConfig || m.Config == nil {
		return b, fds, nil
	}
	configured(m.Config)
	binds := m.Config.Root.Binds
	for i := range binds {
		if binds[i].Empty {
			continue
		}
		if !guestSource(binds[i].Src) {
			return b, fds, fmt.Errorf("mount source %s is not one the agent offers", binds[i].Src)
		}
		tree, err := unix.OpenTree(unix.AT_FDCWD, binds[i].Src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
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
	r := &m.Config.Root
	r.LowerFds = nil
	for _, l := range r.Lowers {
		if !guestSource(l) {
			return b, fds, fmt.Errorf("root layer %s is not one the agent offers", l)
		}
		tree, err := unix.OpenTree(unix.AT_FDCWD, l, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return b, fds, fmt.Errorf("root layer %s: %w", l, err)
		}
		r.LowerFds = append(r.LowerFds, len(fds))
		fds = append(fds, tree)
	}
	if m.Config.LayerDevice != "" {
		m.Config.LayerDevice = LayerDevice
	}
	out, err := json.Marshal(&m)
	if err != nil {
		return b, fds, err
	}
	return out, fds, nil
}

// guestSource reports whether p lies in one of the trees the agent mounted for init's binds.
func guestSource(p string) bool {
	if p != filepath.Clean(p) {
		return false
	}
	for _, dir := range []string{TemplateDir, EtcDir, RootImageDir, ShareDir, WritableDir} {
		if p == dir || strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}
