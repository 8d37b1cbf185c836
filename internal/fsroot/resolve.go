package fsroot

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ResolveIn returns root+p with every symlink along p resolved as if root were "/", so that a
// root filesystem's absolute symlinks cannot point a mount at the host. The last component may
// not exist yet.
//
// Unlike Root's methods it resolves in user space, one readlink at a time, so it is for a tree
// nothing else changes meanwhile: a root filesystem being assembled (airlock's init building its
// sandbox's root before anything runs there; the container level's bundle on the host).
func ResolveIn(root, p string) (string, error) {
	cur := root
	parts := strings.Split(strings.TrimPrefix(filepath.Clean("/"+p), "/"), "/")
	for links := 0; len(parts) > 0; {
		part := parts[0]
		parts = parts[1:]
		if part == "" || part == "." {
			continue
		}
		if part == ".." {
			if cur != root {
				cur = filepath.Dir(cur)
			}
			continue
		}
		next := cur + "/" + part
		target, err := os.Readlink(next)
		if err != nil {
			cur = next // not a symlink, or does not exist yet
			continue
		}
		if links++; links > 40 {
			return "", fmt.Errorf("resolve %s: too many symlinks", p)
		}
		if filepath.IsAbs(target) {
			cur = root
		}
		parts = append(strings.Split(strings.TrimPrefix(target, "/"), "/"), parts...)
	}
	return cur, nil
}
