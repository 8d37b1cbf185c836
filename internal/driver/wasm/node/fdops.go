package node

import (
	"io/fs"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
)

// Descriptor operations behind fs.openSync, readSync, writeSync and closeSync.

// openFile is an fs.openSync descriptor.
type openFile struct {
	f      experimentalsys.File
	append bool
}

// open(path, flags, mode) returns a descriptor for readSync/writeSync/closeSync.
func opOpen(v *vm, args []uint32) uint32 {
	flags, ok := v.argFlags(args, 1, "r")
	if !ok {
		return v.fail("EINVAL")
	}
	fsys, rel, e := v.resolve(v.argStr(args, 0))
	if e != 0 {
		return v.failErrno(e)
	}
	if len(v.files) >= 1024 {
		return v.fail("EMFILE")
	}
	f, e := fsys.OpenFile(rel, flags, v.argMode(args, 2, 0o666))
	if e != 0 {
		return v.failErrno(e)
	}
	fd := v.nextFD
	v.nextFD++
	v.files[fd] = &openFile{f: f, append: flags&experimentalsys.O_APPEND != 0}
	return v.g.newNumber(float64(fd))
}

func (v *vm) file(fd int) (*openFile, bool) {
	f, ok := v.files[fd]
	return f, ok
}

func opClose(v *vm, args []uint32) uint32 {
	fd := v.argInt(args, 0)
	if fd >= 0 && fd <= 2 {
		return v.undef()
	}
	f, ok := v.file(fd)
	if !ok {
		return v.fail("EBADF")
	}
	delete(v.files, fd)
	if e := f.f.Close(); e != 0 {
		return v.failErrno(e)
	}
	return v.undef()
}

// read(fd, length, position) returns up to length bytes (position < 0: the current offset).
func opRead(v *vm, args []uint32) uint32 {
	fd, n, pos := v.argInt(args, 0), v.argInt(args, 1), v.argNum(args, 2)
	if n < 0 || n > 64<<20 {
		return v.fail("EINVAL")
	}
	if fd == 0 {
		return opReadStdin(v, nil) // whole stdin; the prelude slices
	}
	f, ok := v.file(fd)
	if !ok {
		return v.fail("EBADF")
	}
	buf := make([]byte, n)
	var got int
	var e experimentalsys.Errno
	if pos >= 0 {
		got, e = f.f.Pread(buf, int64(pos))
	} else {
		got, e = f.f.Read(buf)
	}
	if e != 0 {
		return v.failErrno(e)
	}
	return v.g.newArrayBuffer(buf[:got])
}

// fwrite(fd, data, position) returns the number of bytes written.
func opFwrite(v *vm, args []uint32) uint32 {
	data, ok := v.argBytes(args, 1)
	if !ok {
		return v.fail("EINVAL")
	}
	pos := -1.0
	if len(args) > 2 && v.g.must(fIsNumber, uint64(args[2])) != 0 {
		pos = v.argNum(args, 2)
	}
	return v.fdWrite(v.argInt(args, 0), data, pos)
}

func (v *vm) fdWrite(fd int, data []byte, pos float64) uint32 {
	switch fd {
	case 1:
		v.stdout.write(data)
		return v.g.newNumber(float64(len(data)))
	case 2:
		v.stderr.write(data)
		return v.g.newNumber(float64(len(data)))
	}
	f, ok := v.file(fd)
	if !ok {
		return v.fail("EBADF")
	}
	var e experimentalsys.Errno
	if pos >= 0 && !f.append {
		_, e = f.f.Pwrite(data, int64(pos))
	} else {
		e = writeAll(f.f, data)
	}
	if e != 0 {
		return v.failErrno(e)
	}
	return v.g.newNumber(float64(len(data)))
}

func opFstat(v *vm, args []uint32) uint32 {
	fd := v.argInt(args, 0)
	if fd >= 0 && fd <= 2 {
		return v.statResult(sys.Stat_t{Mode: fs.ModeCharDevice | fs.ModeDevice | 0o620})
	}
	f, ok := v.file(fd)
	if !ok {
		return v.fail("EBADF")
	}
	st, e := f.f.Stat()
	if e != 0 {
		return v.failErrno(e)
	}
	return v.statResult(st)
}

func opFtruncate(v *vm, args []uint32) uint32 {
	f, ok := v.file(v.argInt(args, 0))
	if !ok {
		return v.fail("EBADF")
	}
	if e := f.f.Truncate(int64(v.argNum(args, 1))); e != 0 {
		return v.failErrno(e)
	}
	return v.undef()
}

func opFsync(v *vm, args []uint32) uint32 {
	fd := v.argInt(args, 0)
	if fd >= 0 && fd <= 2 {
		v.flush()
		return v.undef()
	}
	f, ok := v.file(fd)
	if !ok {
		return v.fail("EBADF")
	}
	if e := f.f.Sync(); e != 0 && e != experimentalsys.ENOSYS {
		return v.failErrno(e)
	}
	return v.undef()
}

// closeFiles closes descriptors the script left open.
func (v *vm) closeFiles() {
	for fd, f := range v.files {
		f.f.Close()
		delete(v.files, fd)
	}
}
