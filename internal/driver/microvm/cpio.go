package microvm

import (
	"fmt"
	"io"
	"os"
)

// cpioWriter writes a cpio archive in the "newc" format, the one the kernel unpacks as an
// initramfs. Only what an initramfs of airlock's needs: directories and regular files.
type cpioWriter struct {
	w   io.Writer
	ino uint32
	n   int64 // bytes written, for the padding
	err error
}

func (c *cpioWriter) write(b []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(b)
	c.n += int64(n)
	c.err = err
}

func (c *cpioWriter) pad() {
	if r := c.n % 4; r != 0 {
		c.write(make([]byte, 4-r))
	}
}

// header writes one entry's header and name.
func (c *cpioWriter) header(name string, mode uint32, size int64) {
	c.ino++
	nlink := 1
	if mode&0o170000 == 0o040000 {
		nlink = 2
	}
	c.write(fmt.Appendf(nil, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, size, 0, 0, 0, 0, len(name)+1, 0))
	c.write(append([]byte(name), 0))
	c.pad()
}

// Dir adds a directory.
func (c *cpioWriter) Dir(name string, perm uint32) { c.header(name, 0o040000|perm, 0) }

// Bytes adds a regular file with content b.
func (c *cpioWriter) Bytes(name string, perm uint32, b []byte) {
	c.header(name, 0o100000|perm, int64(len(b)))
	c.write(b)
	c.pad()
}

// File adds the host file src as a regular file.
func (c *cpioWriter) File(name string, perm uint32, src string) {
	if c.err != nil {
		return
	}
	f, err := os.Open(src)
	if err != nil {
		c.err = err
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		c.err = err
		return
	}
	c.header(name, 0o100000|perm, fi.Size())
	if c.err != nil {
		return
	}
	n, err := io.Copy(c.w, f)
	c.n += n
	if err == nil && n != fi.Size() {
		err = fmt.Errorf("%s changed while it was archived", src)
	}
	c.err = err
	c.pad()
}

// Close writes the trailer and reports the first error.
func (c *cpioWriter) Close() error {
	c.header("TRAILER!!!", 0, 0)
	return c.err
}
