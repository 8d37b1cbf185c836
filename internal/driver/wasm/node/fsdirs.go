package node

import (
	"encoding/json"
	"io/fs"
	"path"
	"reflect"
	"sort"
	"strings"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// Directory, link and rename operations behind require('fs').

type dirent struct {
	name string
	kind int // 1 file, 2 dir, 3 symlink, 4 other
}

func (v *vm) list(p string) ([]dirent, experimentalsys.Errno) {
	fsys, rel, e := v.resolve(p)
	if e != 0 {
		return nil, e
	}
	f, e := fsys.OpenFile(rel, experimentalsys.O_RDONLY|experimentalsys.O_DIRECTORY, 0)
	if e != 0 {
		return nil, e
	}
	defer f.Close()
	ents, e := f.Readdir(-1)
	if e != 0 {
		return nil, e
	}
	out := make([]dirent, 0, len(ents))
	for _, d := range ents {
		if d.Name == "." || d.Name == ".." {
			continue
		}
		k := 4
		switch {
		case d.Type.IsDir():
			k = 2
		case d.Type&fs.ModeSymlink != 0:
			k = 3
		case d.Type.IsRegular():
			k = 1
		}
		out = append(out, dirent{d.Name, k})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, 0
}

// readdir(path) returns JSON [[name, kind], ...] sorted by name; kind as in dirent.
func opReaddir(v *vm, args []uint32) uint32 {
	ents, e := v.list(v.argStr(args, 0))
	if e != 0 {
		return v.failErrno(e)
	}
	out := make([][2]any, len(ents))
	for i, d := range ents {
		out[i] = [2]any{d.name, d.kind}
	}
	b, _ := json.Marshal(out)
	return v.str(string(b))
}

// mkdir(path, recursive, mode) returns, when recursive, the first directory created.
func opMkdir(v *vm, args []uint32) uint32 {
	p := path.Clean(v.argStr(args, 0))
	mode := v.argMode(args, 2, 0o777)
	if !v.argBool(args, 1) {
		fsys, rel, e := v.resolve(p)
		if e != 0 {
			return v.failErrno(e)
		}
		if e := fsys.Mkdir(rel, mode); e != 0 {
			return v.failErrno(e)
		}
		return v.undef()
	}
	first := ""
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	cur := ""
	for _, part := range parts {
		if part == "" {
			continue
		}
		cur += "/" + part
		st, e := v.statPath(cur, true)
		if e == 0 {
			if !st.Mode.IsDir() {
				return v.failErrno(experimentalsys.ENOTDIR)
			}
			continue
		}
		if e != experimentalsys.ENOENT {
			return v.failErrno(e)
		}
		fsys, rel, e := v.resolve(cur)
		if e != 0 {
			return v.failErrno(e)
		}
		if e := fsys.Mkdir(rel, mode); e != 0 && e != experimentalsys.EEXIST {
			return v.failErrno(e)
		}
		if first == "" {
			first = cur
		}
	}
	if first == "" {
		return v.undef()
	}
	return v.str(first)
}

// removeAll removes p and, for a directory, everything under it (without following symlinks).
func (v *vm) removeAll(p string) experimentalsys.Errno {
	st, e := v.statPath(p, false)
	if e != 0 {
		return e
	}
	fsys, rel, e := v.resolve(p)
	if e != 0 {
		return e
	}
	if !st.Mode.IsDir() {
		return fsys.Unlink(rel)
	}
	ents, e := v.list(p)
	if e != 0 {
		return e
	}
	for _, d := range ents {
		if e := v.removeAll(path.Join(p, d.name)); e != 0 && e != experimentalsys.ENOENT {
			return e
		}
	}
	return fsys.Rmdir(rel)
}

// rm(path, recursive, force) is fs.rmSync.
func opRm(v *vm, args []uint32) uint32 {
	p := path.Clean(v.argStr(args, 0))
	recursive, force := v.argBool(args, 1), v.argBool(args, 2)
	st, e := v.statPath(p, false)
	if e != 0 {
		if e == experimentalsys.ENOENT && force {
			return v.undef()
		}
		return v.failErrno(e)
	}
	if st.Mode.IsDir() && !recursive {
		return v.fail("ERR_FS_EISDIR")
	}
	if e := v.removeAll(p); e != 0 && !(e == experimentalsys.ENOENT && force) {
		return v.failErrno(e)
	}
	return v.undef()
}

// rmdir(path, recursive) is fs.rmdirSync.
func opRmdir(v *vm, args []uint32) uint32 {
	p := v.argStr(args, 0)
	if v.argBool(args, 1) {
		if e := v.removeAll(p); e != 0 {
			return v.failErrno(e)
		}
		return v.undef()
	}
	fsys, rel, e := v.resolve(p)
	if e != 0 {
		return v.failErrno(e)
	}
	if e := fsys.Rmdir(rel); e != 0 {
		return v.failErrno(e)
	}
	return v.undef()
}

func opUnlink(v *vm, args []uint32) uint32 {
	p := v.argStr(args, 0)
	if st, e := v.statPath(p, false); e == 0 && st.Mode.IsDir() {
		return v.failErrno(experimentalsys.EISDIR)
	}
	fsys, rel, e := v.resolve(p)
	if e != 0 {
		return v.failErrno(e)
	}
	if e := fsys.Unlink(rel); e != 0 {
		return v.failErrno(e)
	}
	return v.undef()
}

// sameFS reports whether two resolutions landed on the same filesystem, without panicking on
// filesystems whose dynamic type is not comparable.
func sameFS(a, b experimentalsys.FS) bool {
	if reflect.TypeOf(a) != reflect.TypeOf(b) || !reflect.TypeOf(a).Comparable() {
		return false
	}
	return a == b
}

// twoPaths resolves a source and destination on one filesystem (EXDEV otherwise).
func (v *vm) twoPaths(args []uint32) (experimentalsys.FS, string, string, experimentalsys.Errno) {
	fa, ra, e := v.resolve(v.argStr(args, 0))
	if e != 0 {
		return nil, "", "", e
	}
	fb, rb, e := v.resolve(v.argStr(args, 1))
	if e != 0 {
		return nil, "", "", e
	}
	if !sameFS(fa, fb) {
		return nil, "", "", EXDEV
	}
	return fa, ra, rb, 0
}

func opRename(v *vm, args []uint32) uint32 {
	fsys, from, to, e := v.twoPaths(args)
	if e != 0 {
		return v.failErrno(e)
	}
	if e := fsys.Rename(from, to); e != 0 {
		return v.failErrno(e)
	}
	return v.undef()
}

func opLink(v *vm, args []uint32) uint32 {
	fsys, from, to, e := v.twoPaths(args)
	if e != 0 {
		return v.failErrno(e)
	}
	if e := fsys.Link(from, to); e != 0 {
		return v.failErrno(e)
	}
	return v.undef()
}

// copyFile(from, to, exclusive) copies contents and permission bits, across mounts too.
func opCopyFile(v *vm, args []uint32) uint32 {
	src, dst := v.argStr(args, 0), v.argStr(args, 1)
	st, e := v.statPath(src, true)
	if e != 0 {
		return v.failErrno(e)
	}
	if st.Mode.IsDir() {
		return v.failErrno(experimentalsys.EISDIR)
	}
	data, e := v.readAll(src)
	if e != 0 {
		return v.failErrno(e)
	}
	fsys, rel, e := v.resolve(dst)
	if e != 0 {
		return v.failErrno(e)
	}
	flags := experimentalsys.O_WRONLY | experimentalsys.O_CREAT | experimentalsys.O_TRUNC
	if v.argBool(args, 2) {
		flags |= experimentalsys.O_EXCL
	}
	if e := writeFileAt(fsys, rel, flags, st.Mode.Perm(), data); e != 0 {
		return v.failErrno(e)
	}
	return v.undef()
}

// realpath(path) resolves symlinks component by component, within the guest namespace.
func opRealpath(v *vm, args []uint32) uint32 {
	p, e := v.realpath(path.Clean(v.argStr(args, 0)))
	if e != 0 {
		return v.failErrno(e)
	}
	return v.str(p)
}

func (v *vm) realpath(p string) (string, experimentalsys.Errno) {
	done := "/"
	todo := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for hops := 0; len(todo) > 0; {
		part := todo[0]
		todo = todo[1:]
		if part == "" || part == "." {
			continue
		}
		if part == ".." {
			done = path.Dir(done)
			continue
		}
		next := path.Join(done, part)
		st, e := v.statPath(next, false)
		if e != 0 {
			return "", e
		}
		if st.Mode&fs.ModeSymlink == 0 {
			done = next
			continue
		}
		if hops++; hops > 40 {
			return "", experimentalsys.ELOOP
		}
		fsys, rel, e := v.resolve(next)
		if e != 0 {
			return "", e
		}
		target, e := fsys.Readlink(rel)
		if e != 0 {
			return "", e
		}
		if strings.HasPrefix(target, "/") {
			done = "/"
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return done, 0
}

func opReadlink(v *vm, args []uint32) uint32 {
	fsys, rel, e := v.resolve(v.argStr(args, 0))
	if e != 0 {
		return v.failErrno(e)
	}
	t, e := fsys.Readlink(rel)
	if e != 0 {
		return v.failErrno(e)
	}
	return v.str(t)
}

// symlink(target, path): the target is stored as given.
func opSymlink(v *vm, args []uint32) uint32 {
	fsys, rel, e := v.resolve(v.argStr(args, 1))
	if e != 0 {
		return v.failErrno(e)
	}
	if e := fsys.Symlink(v.argStr(args, 0), rel); e != 0 {
		return v.failErrno(e)
	}
	return v.undef()
}

func opChmod(v *vm, args []uint32) uint32 {
	fsys, rel, e := v.resolve(v.argStr(args, 0))
	if e != 0 {
		return v.failErrno(e)
	}
	if e := fsys.Chmod(rel, fs.FileMode(v.argInt(args, 1)&0o7777)); e != 0 {
		return v.failErrno(e)
	}
	return v.undef()
}

// utimes(path, atimeMs, mtimeMs).
func opUtimes(v *vm, args []uint32) uint32 {
	fsys, rel, e := v.resolve(v.argStr(args, 0))
	if e != 0 {
		return v.failErrno(e)
	}
	at, mt := int64(v.argNum(args, 1)*1e6), int64(v.argNum(args, 2)*1e6)
	if e := fsys.Utimens(rel, at, mt); e != 0 {
		return v.failErrno(e)
	}
	return v.undef()
}

func opTruncate(v *vm, args []uint32) uint32 {
	fsys, rel, e := v.resolve(v.argStr(args, 0))
	if e != 0 {
		return v.failErrno(e)
	}
	f, e := fsys.OpenFile(rel, experimentalsys.O_WRONLY, 0)
	if e != 0 {
		return v.failErrno(e)
	}
	defer f.Close()
	if e := f.Truncate(int64(v.argNum(args, 1))); e != 0 {
		return v.failErrno(e)
	}
	return v.undef()
}
