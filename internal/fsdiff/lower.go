package fsdiff

import (
	"os"
	"path"
	"slices"

	"golang.org/x/sys/unix"
)

// lower answers what an overlay's lower directories (top first) show at a sandbox path, the way
// overlayfs merges them: the topmost layer that has a name decides; a whiteout (character device
// 0:0) hides the name in every layer below, and so does a non-directory over a directory; an
// opaque directory hides what the layers below have under it. The layers are read-only image
// layers, read on the host by path: each ancestor is checked to be a directory first, so no
// symlink in them is followed.
type lower struct {
	roots []string
	// dirs caches, per sandbox directory, the layers' directories that make it up, top first.
	dirs map[string][]string
	// visits counts walk's entries, which stop at MaxEntries (partial).
	visits  int
	partial bool
}

func newLower(roots []string) *lower {
	return &lower{roots: roots, dirs: map[string][]string{"/": roots}}
}

// layers returns the layers' directories that make up sandbox directory d, top first; none when
// the image has no directory d.
func (l *lower) layers(d string) []string {
	if ds, ok := l.dirs[d]; ok {
		return ds
	}
	var ds []string
	for _, p := range l.layers(path.Dir(d)) {
		x := p + "/" + path.Base(d)
		var st unix.Stat_t
		if unix.Lstat(x, &st) != nil {
			continue // not in this layer: the next one may have it
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			break // a whiteout or a file hides the layers below
		}
		ds = append(ds, x)
		if opaquePath(x) {
			break
		}
	}
	l.dirs[d] = ds
	return ds
}

// stat returns the image's entry at sandbox path p, false when it has none.
func (l *lower) stat(p string) (unix.Stat_t, bool) {
	for _, d := range l.layers(path.Dir(p)) {
		var st unix.Stat_t
		if unix.Lstat(d+"/"+path.Base(p), &st) != nil {
			continue
		}
		return st, !whiteout(st.Mode, st.Rdev)
	}
	return unix.Stat_t{}, false
}

// visible reports whether the sandbox saw the image's p through the layer t.
func (l *lower) visible(t Tree, p string) bool {
	_, ok := l.stat(p)
	return ok && !hidden(t, p)
}

// mode is the image's mode at p.
func (l *lower) mode(p string) uint32 {
	st, _ := l.stat(p)
	return st.Mode
}

// walk calls fn with every path the image has under sandbox directory d, parents first.
func (l *lower) walk(d string, fn func(p string)) {
	seen := map[string]bool{}
	var names []string
	for _, x := range l.layers(d) {
		f, err := os.Open(x)
		if err != nil {
			continue
		}
		ns, _ := f.Readdirnames(-1)
		f.Close()
		for _, n := range ns {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	slices.Sort(names)
	for _, n := range names {
		if l.visits >= maxEntries {
			l.partial = true
			return
		}
		l.visits++
		p := join(d, n)
		st, ok := l.stat(p)
		if !ok {
			continue
		}
		fn(p)
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			l.walk(p, fn)
		}
	}
}

// opaquePath reports whether directory x of a layer is opaque.
func opaquePath(x string) bool {
	return opaque(func(a string, v []byte) (int, error) { return unix.Lgetxattr(x, a, v) })
}
