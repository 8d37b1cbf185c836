package microvm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/snapshot"
)

// A sparse file saved as its extents: guest RAM's memfd and the writable disk, whose untouched
// pages and blocks are holes (memory.go).

// writeExtents writes the allocated extents of f (a sparse raw disk image, or guest RAM's memfd)
// to w: for each, its offset and length (big-endian uint64s) then its bytes. The size of what
// they are laid into again is the manifest's.
func writeExtents(w io.Writer, f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	bw := bufio.NewWriterSize(w, 1<<20)
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	seek := func(off int64, whence int) (n int64, err error) {
		if cerr := rc.Control(func(fd uintptr) { n, err = unix.Seek(int(fd), off, whence) }); cerr != nil {
			return 0, cerr
		}
		return n, err
	}
	for off := int64(0); off < size; {
		data, err := seek(off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // no data past off
		}
		if err != nil {
			return fmt.Errorf("extents: %w", err)
		}
		hole, err := seek(data, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("extents: %w", err)
		}
		var hdr [16]byte
		binary.BigEndian.PutUint64(hdr[:8], uint64(data))
		binary.BigEndian.PutUint64(hdr[8:], uint64(hole-data))
		if _, err := bw.Write(hdr[:]); err != nil {
			return err
		}
		if _, err := io.Copy(bw, io.NewSectionReader(f, data, hole-data)); err != nil {
			return err
		}
		off = hole
	}
	return bw.Flush()
}

// layExtents lays the extents r carries (writeExtents) into dst, of size bytes, whose holes are
// zeros already.
func layExtents(r io.Reader, dst io.WriterAt, size int64) error {
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		var hdr [16]byte
		if _, err := io.ReadFull(br, hdr[:]); err == io.EOF {
			return nil
		} else if err != nil {
			if errors.Is(err, snapshot.ErrCorrupt) {
				return err
			}
			return fmt.Errorf("memory snapshot: extents: %w: %w", err, snapshot.ErrCorrupt)
		}
		off, n := int64(binary.BigEndian.Uint64(hdr[:8])), int64(binary.BigEndian.Uint64(hdr[8:]))
		if off < 0 || n < 0 || off+n > size || off+n < off {
			return fmt.Errorf("memory snapshot: an extent beyond its %d bytes: %w", size, snapshot.ErrCorrupt)
		}
		if m, err := io.Copy(io.NewOffsetWriter(dst, off), io.LimitReader(br, n)); err != nil {
			return err
		} else if m != n {
			return fmt.Errorf("memory snapshot: extents: %w: %w", io.ErrUnexpectedEOF, snapshot.ErrCorrupt)
		}
	}
}

// fdWriterAt writes at offsets of a descriptor that is not this process's to close (the jail's
// guest RAM, which QEMU inherits).
type fdWriterAt int

func (fd fdWriterAt) WriteAt(b []byte, off int64) (int, error) {
	n := 0
	for n < len(b) {
		k, err := unix.Pwrite(int(fd), b[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		n += k
	}
	return n, nil
}
