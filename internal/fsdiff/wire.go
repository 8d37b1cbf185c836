package fsdiff

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
)

// A tree's wire form carries a scan made where the host cannot read the layer itself (a VM's
// guest agent scans the disk only its guest mounts) to the host that compares it: WriteTree
// writes it, ReadTree reads it back. The reader trusts nothing it reads: a hostile writer can
// make it allocate no more than MaxTreeBytes of paths and MaxEntries entries, and a tree no scan
// would make (a path that is not clean and absolute, out of order, or said twice) is refused.
//
// The form: treeMagic; then per entry, in path order, 'e', the path's length (uvarint), the
// path and the entry's fields (big-endian, entryBytes); then 'z', a flags byte (1: partial) and
// the number of entries (uvarint), which must be the end of the stream.

// MaxTreeBytes bounds a tree's wire form. A scan of MaxEntries entries at the paths people use
// fits many times over; WriteTree leaves out the paths past it (in path order) and says Partial,
// and ReadTree refuses a longer stream.
const MaxTreeBytes = 32 << 20

// maxTreeBytes is MaxTreeBytes, lowered by tests.
var maxTreeBytes = MaxTreeBytes

const (
	treeMagic = "airlock-fsdiff-tree-1\n"
	// maxPathBytes is longer than any path a scan records (maxDepth+1 names of 255 bytes).
	maxPathBytes = 1 << 17
	// entryBytes is an entry's fixed fields: mode, uid, gid, size, mtime, ctime, inode, flags.
	entryBytes = 4 + 4 + 4 + 8 + 8 + 8 + 8 + 1
	// trailerBytes is the most the trailer takes.
	trailerBytes = 2 + binary.MaxVarintLen64
)

const (
	recEntry = 'e'
	recEnd   = 'z'
)

// Entry flags.
const (
	flagDeleted = 1 << iota
	flagOpaque
)

// WriteTree writes t to w in its wire form, within MaxTreeBytes.
func WriteTree(w io.Writer, t Tree) error {
	paths := make([]string, 0, len(t.Entries))
	for p := range t.Entries {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	bw := bufio.NewWriterSize(w, 64<<10)
	// A bufio.Writer keeps its first error, which Flush returns.
	_, _ = bw.WriteString(treeMagic)
	left := maxTreeBytes - len(treeMagic) - trailerBytes
	partial, n := t.Partial, 0
	var rec [1 + binary.MaxVarintLen64 + entryBytes]byte
	for _, p := range paths {
		if len(p) > maxPathBytes {
			partial = true
			continue
		}
		size := 1 + uvarintLen(uint64(len(p))) + len(p) + entryBytes
		if size > left {
			partial = true // this and every later path
			break
		}
		left -= size
		n++
		rec[0] = recEntry
		k := 1 + binary.PutUvarint(rec[1:], uint64(len(p)))
		_, _ = bw.Write(rec[:k])
		_, _ = bw.WriteString(p)
		_, _ = bw.Write(putEntry(rec[:0], t.Entries[p]))
	}
	rec[0], rec[1] = recEnd, 0
	if partial {
		rec[1] = 1
	}
	k := 2 + binary.PutUvarint(rec[2:], uint64(n))
	_, _ = bw.Write(rec[:k])
	return bw.Flush()
}

func uvarintLen(v uint64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], v)
}

func putEntry(b []byte, e Entry) []byte {
	b = binary.BigEndian.AppendUint32(b, e.Mode)
	b = binary.BigEndian.AppendUint32(b, e.UID)
	b = binary.BigEndian.AppendUint32(b, e.GID)
	b = binary.BigEndian.AppendUint64(b, uint64(e.Size))
	b = binary.BigEndian.AppendUint64(b, uint64(e.MtimeNs))
	b = binary.BigEndian.AppendUint64(b, uint64(e.CtimeNs))
	b = binary.BigEndian.AppendUint64(b, e.Ino)
	var f byte
	if e.Deleted {
		f |= flagDeleted
	}
	if e.Opaque {
		f |= flagOpaque
	}
	return append(b, f)
}

// ErrBadTree is a tree's wire form that ReadTree refuses.
var ErrBadTree = errors.New("not a scan's tree")

// ReadTree reads a tree that WriteTree wrote, to the end of r. It reads at most MaxTreeBytes
// and MaxEntries entries, and refuses (ErrBadTree) a stream that is not a whole tree: cut
// short, too long, or holding a path no scan records.
func ReadTree(r io.Reader) (Tree, error) {
	br := bufio.NewReaderSize(&capReader{r: r, left: int64(maxTreeBytes)}, 64<<10)
	bad := func(format string, a ...any) (Tree, error) {
		return Tree{}, fmt.Errorf("%w: %s", ErrBadTree, fmt.Sprintf(format, a...))
	}
	short := func(what string, err error) (Tree, error) {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return bad("it ends early, in %s", what)
		}
		return Tree{}, fmt.Errorf("read a tree: %s: %w", what, err)
	}
	magic := make([]byte, len(treeMagic))
	if _, err := io.ReadFull(br, magic); err != nil {
		return short("its header", err)
	}
	if string(magic) != treeMagic {
		return bad("its header is %q", magic)
	}
	t := Tree{Entries: map[string]Entry{}}
	prev := ""
	var fields [entryBytes]byte
	for {
		kind, err := br.ReadByte()
		if err != nil {
			return short("a record", err)
		}
		switch kind {
		case recEntry:
		case recEnd:
			flags, err := br.ReadByte()
			if err != nil {
				return short("its trailer", err)
			}
			n, err := binary.ReadUvarint(br)
			if err != nil {
				return short("its trailer", err)
			}
			if flags&^1 != 0 || n != uint64(len(t.Entries)) {
				return bad("its trailer says %d entries (flags %#x), it has %d", n, flags, len(t.Entries))
			}
			if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
				if err != nil {
					return short("its end", err)
				}
				return bad("data follows its end")
			}
			t.Partial = flags&1 != 0
			return t, nil
		default:
			return bad("a record of kind %#x", kind)
		}
		if len(t.Entries) >= maxEntries {
			return bad("more than %d entries", maxEntries)
		}
		n, err := binary.ReadUvarint(br)
		if err != nil {
			return short("a path's length", err)
		}
		if n == 0 || n > maxPathBytes {
			return bad("a path of %d bytes", n)
		}
		pb := make([]byte, n)
		if _, err := io.ReadFull(br, pb); err != nil {
			return short("a path", err)
		}
		p := string(pb)
		if p == "/" || p[0] != '/' || path.Clean(p) != p || strings.IndexByte(p, 0) >= 0 {
			return bad("the path %q", p)
		}
		if p <= prev {
			return bad("the path %q after %q (out of order, or twice)", p, prev)
		}
		prev = p
		if _, err := io.ReadFull(br, fields[:]); err != nil {
			return short("an entry", err)
		}
		e, ok := entryFrom(fields[:])
		if !ok {
			return bad("the flags of %q", p)
		}
		t.Entries[p] = e
	}
}

func entryFrom(b []byte) (Entry, bool) {
	be := binary.BigEndian
	f := b[44]
	e := Entry{
		Mode: be.Uint32(b[0:]), UID: be.Uint32(b[4:]), GID: be.Uint32(b[8:]),
		Size: int64(be.Uint64(b[12:])), MtimeNs: int64(be.Uint64(b[20:])), CtimeNs: int64(be.Uint64(b[28:])),
		Ino: be.Uint64(b[36:]), Deleted: f&flagDeleted != 0, Opaque: f&flagOpaque != 0,
	}
	return e, f&^(flagDeleted|flagOpaque) == 0
}

// capReader reads r until left bytes were read, then fails.
type capReader struct {
	r    io.Reader
	left int64
}

func (c *capReader) Read(b []byte) (int, error) {
	if c.left <= 0 {
		// One byte more than the cap tells a stream that ends at it from a longer one.
		var one [1]byte
		if n, err := c.r.Read(one[:]); n == 0 {
			return 0, err
		}
		return 0, fmt.Errorf("%w: longer than %d bytes", ErrBadTree, maxTreeBytes)
	}
	if int64(len(b)) > c.left {
		b = b[:c.left]
	}
	n, err := c.r.Read(b)
	c.left -= int64(n)
	return n, err
}
