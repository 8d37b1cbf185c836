package snapshot

import (
	"path"
	"slices"
	"strings"
)

// SandboxPath returns the path at which the sandbox sees rel, a path relative to the layer's
// directory ("upper/etc/passwd" → "/etc/passwd"), and false for a path that is not under one of
// the layout's Top entries with a sandbox path (the level's own: an overlay's work directory,
// mount points of setup). It does not look at the layer.
func (l Layout) SandboxPath(rel string) (string, bool) {
	top, rest, _ := strings.Cut(path.Clean(rel), "/")
	at, ok := l.At[top]
	if !ok || !slices.Contains(l.Top, top) {
		return "", false
	}
	return path.Join(at, rest), true
}
