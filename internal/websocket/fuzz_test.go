package websocket

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"unicode/utf8"
)

// fuzzReadLimit keeps fuzzed messages small; hostile lengths must be refused
// against it before any allocation.
const fuzzReadLimit = 1 << 12

// frame builds one wire frame for the seed corpus, masking it if key is set.
func frame(b0 byte, key []byte, payload []byte) []byte {
	h := frameHeader{fin: b0&0x80 != 0, rsv: b0 & 0x70, op: opcode(b0 & 0x0f), length: int64(len(payload))}
	if key != nil {
		h.masked = true
		copy(h.mask[:], key)
	}
	b := appendHeader(nil, h)
	p := bytes.Clone(payload)
	if key != nil {
		maskBytes(h.mask, 0, p)
	}
	return append(b, p...)
}

// FuzzReadMessage feeds arbitrary bytes to the reader of a server or client
// Conn. It must never panic, and every message it returns must respect the
// read limit and, if text, be valid UTF-8; errors must be sticky.
func FuzzReadMessage(f *testing.F) {
	// seeds builds well-formed and broken inputs; key is nil for frames a
	// server sends and a mask key for frames a client sends.
	seeds := func(key []byte) [][]byte {
		return [][]byte{
			frame(0x81, key, []byte("hello")),
			bytes.Join([][]byte{frame(0x01, key, []byte("he")), frame(0x89, key, []byte("p")), frame(0x80, key, []byte("llo"))}, nil),
			frame(0x82, key, bytes.Repeat([]byte{7}, 300)),
			frame(0x82, key, bytes.Repeat([]byte{7}, 70000)),
			frame(0x88, key, closeFrame(CloseNormal, "bye")),
			frame(0x88, key, []byte{3}),
			frame(0x81, key, []byte{0xff}),
			frame(0xc1, key, []byte("rsv")),
			// Hostile lengths: 2^63-1, and just under 1 MiB with one byte of data.
			{0x82, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4},
			{0x82, 0x7f, 0, 0, 0, 0, 0, 0x0f, 0xff, 0xff, 'x'},
			{0x89, 0xfe, 0x00, 0x7e},
		}
	}
	for _, s := range seeds([]byte{1, 2, 3, 4}) {
		f.Add(s, false)
	}
	for _, s := range seeds(nil) {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, client bool) {
		c := newFakeConn(data, client)
		c.SetReadLimit(fuzzReadLimit)
		for range 1000 { // the input is finite; this only guards against a loop bug
			typ, p, err := c.ReadMessage()
			if err != nil {
				if _, _, again := c.ReadMessage(); !errors.Is(again, err) && again.Error() != err.Error() {
					t.Fatalf("error not sticky: %v then %v", err, again)
				}
				return
			}
			if len(p) > fuzzReadLimit {
				t.Fatalf("message of %d bytes exceeds the %d-byte limit", len(p), fuzzReadLimit)
			}
			if typ == Text && !utf8.Valid(p) {
				t.Fatalf("invalid UTF-8 text message %q", p)
			}
			if typ != Text && typ != Binary {
				t.Fatalf("message type %d", typ)
			}
		}
		t.Fatal("reader did not stop at the end of the input")
	})
}

// FuzzReadHeader checks that any header readHeader accepts survives a round
// trip through appendHeader, and that accepted headers obey the RFC's rules.
func FuzzReadHeader(f *testing.F) {
	f.Add([]byte{0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d})
	f.Add([]byte{0x82, 0x7e, 0x01, 0x00})
	f.Add(binary.BigEndian.AppendUint64([]byte{0x82, 0x7f}, 1<<40))
	f.Add([]byte{0x89, 0x7e, 0x00, 0x7e})
	f.Add([]byte{0xf0, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := readHeader(bytes.NewReader(data))
		if err != nil {
			return
		}
		if h.rsv != 0 || h.length < 0 || (h.op.isControl() && (!h.fin || h.length > maxControlPayload)) {
			t.Fatalf("accepted invalid header %+v", h)
		}
		again, err := readHeader(bytes.NewReader(appendHeader(nil, h)))
		if err != nil || again != h {
			t.Fatalf("round trip of %+v = %+v, %v", h, again, err)
		}
	})
}
