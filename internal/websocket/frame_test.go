package websocket

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"
)

func TestReadHeader(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		want    frameHeader
		wantErr error
	}{
		// The examples of RFC 6455 §5.7.
		{"unmasked text", []byte{0x81, 0x05}, frameHeader{fin: true, op: opText, length: 5}, nil},
		{"masked text", []byte{0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d},
			frameHeader{fin: true, op: opText, masked: true, mask: [4]byte{0x37, 0xfa, 0x21, 0x3d}, length: 5}, nil},
		{"first fragment", []byte{0x01, 0x03}, frameHeader{op: opText, length: 3}, nil},
		{"unmasked ping", []byte{0x89, 0x05}, frameHeader{fin: true, op: opPing, length: 5}, nil},
		{"16-bit length", []byte{0x82, 0x7e, 0x01, 0x00}, frameHeader{fin: true, op: opBinary, length: 256}, nil},
		{"64-bit length", []byte{0x82, 0x7f, 0, 0, 0, 0, 0, 1, 0, 0}, frameHeader{fin: true, op: opBinary, length: 65536}, nil},
		{"largest 64-bit length", []byte{0x82, 0x7f, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
			frameHeader{fin: true, op: opBinary, length: 1<<63 - 1}, nil},

		{"empty input", nil, frameHeader{}, io.EOF},
		{"one byte", []byte{0x81}, frameHeader{}, io.ErrUnexpectedEOF},
		{"truncated 16-bit length", []byte{0x82, 0x7e, 0x01}, frameHeader{}, io.ErrUnexpectedEOF},
		{"truncated mask key", []byte{0x82, 0x81, 0x01}, frameHeader{}, io.ErrUnexpectedEOF},
		{"64-bit length with the top bit set", []byte{0x82, 0x7f, 0x80, 0, 0, 0, 0, 0, 0, 0}, frameHeader{}, ErrProtocol},
		{"RSV1", []byte{0xc1, 0x00}, frameHeader{}, ErrProtocol},
		{"RSV3", []byte{0x91, 0x00}, frameHeader{}, ErrProtocol},
		{"opcode 3", []byte{0x83, 0x00}, frameHeader{}, ErrProtocol},
		{"opcode 0xb", []byte{0x8b, 0x00}, frameHeader{}, ErrProtocol},
		{"fragmented close", []byte{0x08, 0x00}, frameHeader{}, ErrProtocol},
		{"ping of 126 bytes", []byte{0x89, 0x7e, 0x00, 0x7e}, frameHeader{}, ErrProtocol},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readHeader(bytes.NewReader(tt.in))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("readHeader = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestAppendHeader(t *testing.T) {
	tests := []struct {
		name    string
		h       frameHeader
		wantLen int
	}{
		{"empty", frameHeader{fin: true, op: opText}, 2},
		{"125 bytes", frameHeader{fin: true, op: opBinary, length: 125}, 2},
		{"126 bytes", frameHeader{fin: true, op: opBinary, length: 126}, 4},
		{"65535 bytes", frameHeader{op: opText, length: 65535}, 4},
		{"65536 bytes", frameHeader{fin: true, op: opContinuation, length: 65536}, 10},
		{"1 TiB masked", frameHeader{fin: true, op: opBinary, length: 1 << 40, masked: true, mask: [4]byte{1, 2, 3, 4}}, 14},
		{"masked close", frameHeader{fin: true, op: opClose, length: 2, masked: true, mask: [4]byte{9, 8, 7, 6}}, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := appendHeader(nil, tt.h)
			if len(b) != tt.wantLen {
				t.Errorf("header is %d bytes, want %d", len(b), tt.wantLen)
			}
			got, err := readHeader(bytes.NewReader(b))
			if err != nil || got != tt.h {
				t.Errorf("round trip = %+v, %v; want %+v", got, err, tt.h)
			}
		})
	}
}

func TestMaskBytes(t *testing.T) {
	// RFC 6455 §5.7: "Hello" masked with 37 fa 21 3d.
	key := [4]byte{0x37, 0xfa, 0x21, 0x3d}
	masked := []byte{0x7f, 0x9f, 0x4d, 0x51, 0x58}
	tests := []struct {
		name   string
		chunks []int // mask in pieces of these sizes, carrying the key position
	}{
		{"whole", []int{5}},
		{"split unaligned", []int{1, 3, 1}},
		{"split with empty piece", []int{2, 0, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := bytes.Clone(masked)
			pos, off := 0, 0
			for _, n := range tt.chunks {
				pos = maskBytes(key, pos, b[off:off+n])
				off += n
			}
			if string(b) != "Hello" {
				t.Errorf("unmasked = %q, want Hello", b)
			}
		})
	}
}

func TestParseClosePayload(t *testing.T) {
	tests := []struct {
		name       string
		in         []byte
		wantCode   int
		wantReason string
		wantErr    error
	}{
		{"empty", nil, CloseNoStatus, "", nil},
		{"code only", closeFrame(CloseNormal, ""), CloseNormal, "", nil},
		{"code and reason", closeFrame(CloseGoingAway, "shutting down"), CloseGoingAway, "shutting down", nil},
		{"IANA code 1012", closeFrame(1012, ""), 1012, "", nil},
		{"application code", closeFrame(4999, "x"), 4999, "x", nil},
		{"one byte", []byte{0x03}, 0, "", ErrProtocol},
		{"code 0", closeFrame(0, ""), 0, "", ErrProtocol},
		{"code 1004", closeFrame(1004, ""), 0, "", ErrProtocol},
		{"code 1006", closeFrame(1006, ""), 0, "", ErrProtocol},
		{"code 1015", closeFrame(1015, ""), 0, "", ErrProtocol},
		{"code 2999", closeFrame(2999, ""), 0, "", ErrProtocol},
		{"code 5000", closeFrame(5000, ""), 0, "", ErrProtocol},
		{"reason not UTF-8", closeFrame(CloseNormal, "\xc3"), 0, "", ErrInvalidUTF8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, reason, err := parseClosePayload(tt.in)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || code != tt.wantCode || reason != tt.wantReason {
				t.Errorf("got %d %q %v, want %d %q", code, reason, err, tt.wantCode, tt.wantReason)
			}
		})
	}
}

// fakeConn is a net.Conn that reads a fixed input and discards writes, to run
// a Conn's reader without a network.
type fakeConn struct{ r io.Reader }

func (f fakeConn) Read(p []byte) (int, error)       { return f.r.Read(p) }
func (f fakeConn) Write(p []byte) (int, error)      { return len(p), nil }
func (f fakeConn) Close() error                     { return nil }
func (f fakeConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (f fakeConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (f fakeConn) SetDeadline(time.Time) error      { return nil }
func (f fakeConn) SetReadDeadline(time.Time) error  { return nil }
func (f fakeConn) SetWriteDeadline(time.Time) error { return nil }

// newFakeConn returns a Conn reading input, as a client or a server.
func newFakeConn(input []byte, client bool) *Conn {
	fc := fakeConn{r: bytes.NewReader(input)}
	return newConn(fc, bufio.NewReader(fc), bufio.NewWriter(fc), client)
}

// TestHostileLength checks that a header claiming a huge payload costs memory
// for the data that arrives, not for the claim.
func TestHostileLength(t *testing.T) {
	tests := []struct {
		name    string
		header  []byte
		wantErr error
	}{
		{"2^63-1 bytes", []byte{0x82, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, ErrMessageTooBig},
		{"exactly the 1 MiB limit", []byte{0x82, 0xff, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0}, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeConn(append(tt.header, "only a few bytes"...), false)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, _, err := c.ReadMessage()
			runtime.ReadMemStats(&after)
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("error = %v, want %v", err, tt.wantErr)
			}
			// The bound is far below the 1 MiB claimed, with room for the race
			// detector, which can double allocations.
			if n := after.TotalAlloc - before.TotalAlloc; n > 4*maxPrealloc {
				t.Errorf("allocated %d bytes for a %d-byte input", n, len(tt.header)+16)
			}
		})
	}
}
