package node

import (
	"encoding/json"
	"io/fs"
	"path"
	"strings"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
)

// fsOps are the filesystem host functions behind require('fs'). Paths arrive absolute (the
// prelude resolves them against process.cwd()) and every one goes through Config.FS.
var fsOps = map[string]opFunc{
	"stat": opStat, "kind": opKind, "readFile": opReadFile, "writeFile": opWriteFile,
	"readdir": opReaddir, "mkdir": opMkdir, "rm": opRm, "rmdir": opRmdir, "unlink": opUnlink,
	"rename": opRename, "copyFile": opCopyFile, "realpath": opRealpath, "readlink": opReadlink,
	"symlink": opSymlink, "link": opLink, "chmod": opChmod, "utimes": opUtimes,
	"truncate": opTruncate, "open": opOpen, "close": opClose, "read": opRead,
	"fwrite": opFwrite, "fstat": opFstat, "ftruncate": opFtruncate, "fsync": opFsync,
}

// Node's umask: files 0666 and directories 0777 come out 0644 and 0755.
const umask = 0o022

func errnoCode(e experimentalsys.Errno) string {
	switch e {
	case experimentalsys.EACCES:
		return "EACCES"
	case experimentalsys.EAGAIN:
		return "EAGAIN"
	case experimentalsys.EBADF:
		return "EBADF"
	case experimentalsys.EEXIST:
		return "EEXIST"
	case experimentalsys.EINTR:
		return "EINTR"
	case experimentalsys.EINVAL:
		return "EINVAL"
	case experimentalsys.EISDIR:
		return "EISDIR"
	case experimentalsys.ELOOP:
		return "ELOOP"
	case experimentalsys.ENAMETOOLONG:
		return "ENAMETOOLONG"
	case experimentalsys.ENOENT:
		return "ENOENT"
	case experimentalsys.ENOSYS:
		return "ENOSYS"
	case experimentalsys.ENOTDIR:
		return "ENOTDIR"
	case experimentalsys.ENOTEMPTY:
		return "ENOTEMPTY"
	case experimentalsys.ENOTSUP:
		return "ENOTSUP"
	case experimentalsys.EPERM:
		return "EPERM"
	case experimentalsys.EROFS:
		return "EROFS"
	case ENOSPC:
		return "ENOSPC"
	case EXDEV:
		return "EXDEV"
	case errTooLarge:
		return "ERR_FS_FILE_TOO_LARGE"
	}
	return "EIO"
}

// resolve finds the filesystem and mount-relative path for an absolute guest path.
func (v *vm) resolve(p string) (experimentalsys.FS, string, experimentalsys.Errno) {
	if !strings.HasPrefix(p, "/") {
		return nil, "", experimentalsys.EINVAL
	}
	if strings.IndexByte(p, 0) >= 0 {
		return nil, "", experimentalsys.EINVAL
	}
	if v.cfg.FS == nil {
		return nil, "", experimentalsys.ENOENT
	}
	fsys, rel, ok := v.cfg.FS.Resolve(path.Clean(p))
	if !ok || fsys == nil {
		return nil, "", experimentalsys.ENOENT
	}
	return fsys, rel, 0
}

func (v *vm) statPath(p string, follow bool) (sys.Stat_t, experimentalsys.Errno) {
	fsys, rel, e := v.resolve(p)
	if e != 0 {
		return sys.Stat_t{}, e
	}
	if follow {
		return fsys.Stat(rel)
	}
	return fsys.Lstat(rel)
}

// statJSON is the shape the prelude builds fs.Stats from.
type statJSON struct {
	Mode    uint32  `json:"mode"`
	Size    int64   `json:"size"`
	Ino     uint64  `json:"ino"`
	Dev     uint64  `json:"dev"`
	Nlink   uint64  `json:"nlink"`
	AtimeMs float64 `json:"atimeMs"`
	MtimeMs float64 `json:"mtimeMs"`
	CtimeMs float64 `json:"ctimeMs"`
}

// posixMode turns a Go FileMode into st_mode bits.
func posixMode(m fs.FileMode) uint32 {
	bits := uint32(m.Perm())
	switch {
	case m&fs.ModeDir != 0:
		bits |= 0o040000
	case m&fs.ModeSymlink != 0:
		bits |= 0o120000
	case m&fs.ModeNamedPipe != 0:
		bits |= 0o010000
	case m&fs.ModeSocket != 0:
		bits |= 0o140000
	case m&fs.ModeCharDevice != 0:
		bits |= 0o020000
	case m&fs.ModeDevice != 0:
		bits |= 0o060000
	default:
		bits |= 0o100000
	}
	if m&fs.ModeSetuid != 0 {
		bits |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		bits |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		bits |= 0o1000
	}
	return bits
}

func (v *vm) statResult(st sys.Stat_t) uint32 {
	b, _ := json.Marshal(statJSON{
		Mode: posixMode(st.Mode), Size: st.Size, Ino: st.Ino, Dev: st.Dev, Nlink: st.Nlink,
		AtimeMs: float64(st.Atim) / 1e6, MtimeMs: float64(st.Mtim) / 1e6, CtimeMs: float64(st.Ctim) / 1e6,
	})
	return v.str(string(b))
}

// stat(path, follow) returns the stat JSON.
func opStat(v *vm, args []uint32) uint32 {
	st, e := v.statPath(v.argStr(args, 0), v.argBool(args, 1))
	if e != 0 {
		return v.failErrno(e)
	}
	return v.statResult(st)
}

// kind(path) is 0 (absent), 1 (file), 2 (directory) or 3 (other), following symlinks; it
// never throws. require() probes with it.
func opKind(v *vm, args []uint32) uint32 {
	st, e := v.statPath(v.argStr(args, 0), true)
	switch {
	case e != 0:
		return v.g.newNumber(0)
	case st.Mode.IsDir():
		return v.g.newNumber(2)
	case st.Mode.IsRegular():
		return v.g.newNumber(1)
	}
	return v.g.newNumber(3)
}

func (v *vm) readAll(p string) ([]byte, experimentalsys.Errno) {
	fsys, rel, e := v.resolve(p)
	if e != 0 {
		return nil, e
	}
	f, e := fsys.OpenFile(rel, experimentalsys.O_RDONLY, 0)
	if e != 0 {
		return nil, e
	}
	defer f.Close()
	if dir, _ := f.IsDir(); dir {
		return nil, experimentalsys.EISDIR
	}
	limit := v.maxRead()
	size := 0
	if st, e := f.Stat(); e == 0 && st.Size > 0 {
		if st.Size > limit {
			return nil, errTooLarge
		}
		size = int(st.Size)
	}
	buf := make([]byte, 0, size+1)
	for {
		if int64(len(buf)) > limit {
			return nil, errTooLarge
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, e := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if e != 0 {
			return nil, e
		}
		if n == 0 {
			return buf, 0
		}
	}
}

// errTooLarge is reported as node's ERR_FS_FILE_TOO_LARGE: the file could not fit in the guest.
const errTooLarge experimentalsys.Errno = 0x1100

// maxRead is the most a single read may bring into the guest: what its memory could hold, and
// never more than node's 2 GiB. It keeps a huge file from being buffered on the host first.
func (v *vm) maxRead() int64 {
	limit := int64(v.r.maxPages) * 65536
	if v.cfg.MemoryLimit > 0 && v.cfg.MemoryLimit < limit {
		limit = v.cfg.MemoryLimit
	}
	return min(limit, 2<<30)
}

// readFile(path, asText) returns the contents as a string (UTF-8) or an ArrayBuffer.
func opReadFile(v *vm, args []uint32) uint32 {
	b, e := v.readAll(v.argStr(args, 0))
	if e != 0 {
		return v.failErrno(e)
	}
	if v.argBool(args, 1) {
		return v.str(validUTF8(b))
	}
	return v.g.newArrayBuffer(b)
}

// openFlags parses node's flag strings ('r', 'w', 'a+', 'wx', ...) or numeric O_* (Linux
// values, as fs.constants has them).
func openFlags(flag string, num float64, isNum bool) (experimentalsys.Oflag, bool) {
	if isNum {
		n := int(num)
		var f experimentalsys.Oflag
		switch n & 3 {
		case 0:
			f = experimentalsys.O_RDONLY
		case 1:
			f = experimentalsys.O_WRONLY
		default:
			f = experimentalsys.O_RDWR
		}
		if n&0o100 != 0 {
			f |= experimentalsys.O_CREAT
		}
		if n&0o200 != 0 {
			f |= experimentalsys.O_EXCL
		}
		if n&0o1000 != 0 {
			f |= experimentalsys.O_TRUNC
		}
		if n&0o2000 != 0 {
			f |= experimentalsys.O_APPEND
		}
		return f, true
	}
	f := strings.ReplaceAll(strings.ReplaceAll(flag, "s", ""), "x", "")
	excl := strings.Contains(flag, "x")
	var o experimentalsys.Oflag
	switch f {
	case "r":
		o = experimentalsys.O_RDONLY
	case "r+":
		o = experimentalsys.O_RDWR
	case "w":
		o = experimentalsys.O_WRONLY | experimentalsys.O_CREAT | experimentalsys.O_TRUNC
	case "w+":
		o = experimentalsys.O_RDWR | experimentalsys.O_CREAT | experimentalsys.O_TRUNC
	case "a":
		o = experimentalsys.O_WRONLY | experimentalsys.O_CREAT | experimentalsys.O_APPEND
	case "a+":
		o = experimentalsys.O_RDWR | experimentalsys.O_CREAT | experimentalsys.O_APPEND
	default:
		return 0, false
	}
	if excl {
		o |= experimentalsys.O_EXCL
	}
	return o, true
}

func (v *vm) argFlags(args []uint32, i int, def string) (experimentalsys.Oflag, bool) {
	if i >= len(args) || v.g.must(fIsNumber, uint64(args[i])) == 0 {
		flag := def
		if i < len(args) && v.g.isString(args[i]) {
			flag = v.argStr(args, i)
		}
		return openFlags(flag, 0, false)
	}
	return openFlags("", v.argNum(args, i), true)
}

func (v *vm) argMode(args []uint32, i int, def fs.FileMode) fs.FileMode {
	if i >= len(args) || v.g.must(fIsNumber, uint64(args[i])) == 0 {
		return def &^ umask
	}
	return fs.FileMode(v.argInt(args, i)&0o7777) &^ umask
}

// writeFile(path, data, flag, mode) writes a string (UTF-8) or an ArrayBuffer.
func opWriteFile(v *vm, args []uint32) uint32 {
	data, ok := v.argBytes(args, 1)
	if !ok {
		return v.fail("EINVAL")
	}
	flags, ok := v.argFlags(args, 2, "w")
	if !ok {
		return v.fail("EINVAL")
	}
	fsys, rel, e := v.resolve(v.argStr(args, 0))
	if e != 0 {
		return v.failErrno(e)
	}
	if e := writeFileAt(fsys, rel, flags, v.argMode(args, 3, 0o666), data); e != 0 {
		return v.failErrno(e)
	}
	return v.undef()
}

// writeFileAt opens rel in fsys with flags and perm, writes data and closes it.
func writeFileAt(fsys experimentalsys.FS, rel string, flags experimentalsys.Oflag, perm fs.FileMode, data []byte) experimentalsys.Errno {
	f, e := fsys.OpenFile(rel, flags, perm)
	if e != 0 {
		return e
	}
	if e := writeAll(f, data); e != 0 {
		f.Close()
		return e
	}
	return f.Close()
}

func writeAll(f experimentalsys.File, b []byte) experimentalsys.Errno {
	for len(b) > 0 {
		n, e := f.Write(b)
		if e != 0 {
			return e
		}
		if n == 0 {
			return experimentalsys.EIO
		}
		b = b[n:]
	}
	return 0
}
