package fsdiff

import (
	"path"
	"slices"
)

// MaxPaths is how many paths each list of Changes holds at most; the counts are always complete.
// One exec that writes a million files must not make an audit event of a million paths.
const MaxPaths = 1000

// Changes are the files an exec created, modified and deleted, as sorted sandbox paths.
type Changes struct {
	Created  []string `json:"created"`
	Modified []string `json:"modified"`
	Deleted  []string `json:"deleted"`
	// NCreated, NModified and NDeleted are the full counts, of which the lists hold the first
	// MaxPaths in path order.
	NCreated  int `json:"nCreated"`
	NModified int `json:"nModified"`
	NDeleted  int `json:"nDeleted"`
	// Truncated says a list holds fewer paths than its count.
	Truncated bool `json:"truncated,omitempty"`
	// Partial says a scan (or the walk of the image under an opaque directory) stopped at its
	// bound: changes beyond it are missing, and paths near it may be listed wrongly.
	Partial bool `json:"partial,omitempty"`
}

// Empty reports whether c records no change.
func (c Changes) Empty() bool { return c.NCreated+c.NModified+c.NDeleted == 0 }

// Compare tells what changed from the scan before to the scan after, from the layer alone: a path
// new to the layer is created (an image file copied up is too: CompareOver knows better), one
// gone from it or whited out is deleted.
func Compare(before, after Tree) Changes {
	return CompareOver(before, after, nil)
}

// CompareOver is Compare for a layer that is an overlay's upper directory over lowers, the
// image's layer directories (top first) as the host reads them, seen at the sandbox's root: a path
// new to the layer that the image had is modified (copied up, or replaced), a directory merely
// copied up is no change, and an opaque directory new to the layer deletes what the image had
// under it.
func CompareOver(before, after Tree, lowers []string) Changes {
	var cr, mo, de []string
	var lw *lower
	if len(lowers) > 0 {
		lw = newLower(lowers)
	}
	for p, a := range after.Entries {
		b, inBefore := before.Entries[p]
		switch {
		case a.Deleted:
			if (inBefore && !b.Deleted) || (!inBefore && (lw == nil || lw.visible(before, p))) {
				de = append(de, p)
			}
		case inBefore && !b.Deleted:
			if changed(b, a) {
				mo = append(mo, p)
			}
		case inBefore: // was a whiteout
			cr = append(cr, p)
		case lw != nil && lw.visible(before, p):
			// New to the layer, there in the image: copied up, or replaced.
			if !a.IsDir() || a.Opaque || lw.mode(p) != a.Mode {
				mo = append(mo, p)
			}
		default:
			cr = append(cr, p)
		}
		if lw != nil && a.Opaque && !(inBefore && b.Opaque) && lw.visible(before, p) {
			// What the image had under p is hidden now, where the layer did not have it already.
			lw.walk(p, func(q string) {
				if _, ok := after.Entries[q]; ok {
					return
				}
				if _, ok := before.Entries[q]; ok || hidden(before, q) {
					return
				}
				de = append(de, q)
			})
		}
	}
	for p, b := range before.Entries {
		if _, ok := after.Entries[p]; ok {
			continue
		}
		switch {
		case !b.Deleted:
			de = append(de, p)
		case !hidden(after, p) && (lw == nil || lw.visible(Tree{}, p)):
			// A whiteout gone without an opaque directory above it: the image's file shows again.
			cr = append(cr, p)
		}
	}
	c := Changes{Partial: before.Partial || after.Partial || (lw != nil && lw.partial)}
	c.Created, c.NCreated = capped(cr, &c.Truncated)
	c.Modified, c.NModified = capped(mo, &c.Truncated)
	c.Deleted, c.NDeleted = capped(de, &c.Truncated)
	return c
}

// changed reports whether an entry present in both scans changed. A directory changes with its
// mode, owner or opacity, or when it was replaced (inode); its times and size move with its
// children, which are changes of their own.
func changed(b, a Entry) bool {
	if b.Mode != a.Mode || b.UID != a.UID || b.GID != a.GID || b.Ino != a.Ino {
		return true
	}
	if a.IsDir() {
		return b.Opaque != a.Opaque
	}
	return b.Size != a.Size || b.MtimeNs != a.MtimeNs || b.CtimeNs != a.CtimeNs
}

// hidden reports whether an ancestor of p in t is a whiteout or an opaque directory, so that the
// image's p does not show through t.
func hidden(t Tree, p string) bool {
	for d := path.Dir(p); d != "/" && d != "."; d = path.Dir(d) {
		if e, ok := t.Entries[d]; ok && (e.Deleted || e.Opaque) {
			return true
		}
	}
	return false
}

// capped sorts paths and returns the first MaxPaths of them and their count, setting *truncated
// when some were left out.
func capped(paths []string, truncated *bool) ([]string, int) {
	slices.Sort(paths)
	n := len(paths)
	if n > MaxPaths {
		*truncated = true
		paths = slices.Clip(paths[:MaxPaths])
	}
	if paths == nil {
		paths = []string{}
	}
	return paths, n
}
