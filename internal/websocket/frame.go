package websocket

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// Sentinel errors. Errors returned by this package wrap one of them (or are a
// *CloseError), so callers can test with errors.Is.
var (
	// ErrClosed: the connection was closed locally (Close or CloseNow).
	ErrClosed = errors.New("websocket: connection closed")
	// ErrProtocol: the peer broke RFC 6455; the connection was failed with close code 1002.
	ErrProtocol = errors.New("websocket: protocol error")
	// ErrInvalidUTF8: a text message or close reason was not valid UTF-8 (close code 1007).
	ErrInvalidUTF8 = errors.New("websocket: invalid UTF-8")
	// ErrMessageTooBig: a message exceeded the read limit (close code 1009).
	ErrMessageTooBig = errors.New("websocket: message too big")
	// ErrBadHandshake: the opening handshake was refused or malformed.
	ErrBadHandshake = errors.New("websocket: bad handshake")
)

// Close codes from RFC 6455 §7.4.1 that callers are likely to send or see.
const (
	CloseNormal          = 1000 // the purpose of the connection is fulfilled
	CloseGoingAway       = 1001 // server shutdown or browser navigating away
	CloseProtocolError   = 1002 // the peer broke the protocol
	CloseUnsupportedData = 1003 // a message type the endpoint cannot accept
	// CloseNoStatus is reported when the peer's close frame carried no code; it is never sent.
	CloseNoStatus = 1005
	// CloseInvalidData is sent when a text message is not valid UTF-8.
	CloseInvalidData     = 1007
	ClosePolicyViolation = 1008 // a generic "message violates policy"
	CloseMessageTooBig   = 1009 // a message exceeded the receiver's limit
	CloseInternalError   = 1011 // the server hit an unexpected condition
)

// CloseError is returned by ReadMessage once the peer has sent a close frame.
type CloseError struct {
	// Code is the peer's close code, or CloseNoStatus if it sent none.
	Code int
	// Reason is the peer's UTF-8 reason text, possibly empty.
	Reason string
}

// Error implements error.
func (e *CloseError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("websocket: closed by peer with code %d", e.Code)
	}
	return fmt.Sprintf("websocket: closed by peer with code %d: %s", e.Code, e.Reason)
}

// opcode is the 4-bit frame type of RFC 6455 §5.2.
type opcode byte

const (
	opContinuation opcode = 0x0
	opText         opcode = 0x1
	opBinary       opcode = 0x2
	opClose        opcode = 0x8
	opPing         opcode = 0x9
	opPong         opcode = 0xA
)

// isControl reports whether o is a control opcode; they all have the high bit set.
func (o opcode) isControl() bool { return o&0x8 != 0 }

const (
	// maxControlPayload is the payload limit of control frames (RFC 6455 §5.5).
	maxControlPayload = 125
	// maxCloseReason leaves room for the two-byte code in a control frame.
	maxCloseReason = maxControlPayload - 2
	// maxHeaderLen is 2 fixed bytes, an 8-byte length and a 4-byte mask key.
	maxHeaderLen = 14
)

// frameHeader is a decoded frame header.
type frameHeader struct {
	fin    bool
	rsv    byte // the three RSV bits, still in place (mask 0x70)
	op     opcode
	masked bool
	mask   [4]byte
	length int64
}

// protoErr builds an error wrapping ErrProtocol.
func protoErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrProtocol}, args...)...)
}

// readHeader reads and validates one frame header. Violations wrap ErrProtocol;
// I/O errors are returned as is (io.EOF only if no byte was read). Checks that
// need only the first two bytes run before the rest is read, so a bad frame
// fails without waiting for more input.
func readHeader(r io.Reader) (frameHeader, error) {
	var h frameHeader
	var b [8]byte
	if _, err := io.ReadFull(r, b[:2]); err != nil {
		return h, err
	}
	h.fin = b[0]&0x80 != 0
	h.rsv = b[0] & 0x70
	h.op = opcode(b[0] & 0x0f)
	h.masked = b[1]&0x80 != 0
	n := int64(b[1] & 0x7f)

	if h.rsv != 0 {
		// RSV bits are for extensions, and we never negotiate any.
		return h, protoErr("reserved bits 0x%02x set without an extension", h.rsv)
	}
	switch h.op {
	case opContinuation, opText, opBinary, opClose, opPing, opPong:
	default:
		return h, protoErr("unknown opcode 0x%x", byte(h.op))
	}
	if h.op.isControl() {
		if !h.fin {
			return h, protoErr("fragmented control frame")
		}
		if n > maxControlPayload {
			return h, protoErr("control frame longer than %d bytes", maxControlPayload)
		}
	}

	switch n {
	case 126:
		if _, err := io.ReadFull(r, b[:2]); err != nil {
			return h, noEOF(err)
		}
		n = int64(binary.BigEndian.Uint16(b[:2]))
	case 127:
		if _, err := io.ReadFull(r, b[:8]); err != nil {
			return h, noEOF(err)
		}
		v := binary.BigEndian.Uint64(b[:8])
		if v>>63 != 0 {
			return h, protoErr("64-bit payload length has its most significant bit set")
		}
		n = int64(v)
	}
	h.length = n
	if h.masked {
		if _, err := io.ReadFull(r, h.mask[:]); err != nil {
			return h, noEOF(err)
		}
	}
	return h, nil
}

// noEOF turns io.EOF into io.ErrUnexpectedEOF: past a frame's first byte, the
// stream may not end.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// appendHeader appends the wire form of h, using the shortest length encoding.
func appendHeader(b []byte, h frameHeader) []byte {
	b0 := h.rsv&0x70 | byte(h.op)&0x0f
	if h.fin {
		b0 |= 0x80
	}
	var b1 byte
	if h.masked {
		b1 = 0x80
	}
	switch {
	case h.length <= 125:
		b = append(b, b0, b1|byte(h.length))
	case h.length <= 0xffff:
		b = append(b, b0, b1|126)
		b = binary.BigEndian.AppendUint16(b, uint16(h.length))
	default:
		b = append(b, b0, b1|127)
		b = binary.BigEndian.AppendUint64(b, uint64(h.length))
	}
	if h.masked {
		b = append(b, h.mask[:]...)
	}
	return b
}

// maskBytes XORs b with key, starting at key position pos, and returns the
// position for the next byte. Masking and unmasking are the same operation.
func maskBytes(key [4]byte, pos int, b []byte) int {
	for i := range b {
		b[i] ^= key[(pos+i)&3]
	}
	return (pos + len(b)) & 3
}

// validCloseCode reports whether code may appear in a close frame: the RFC's
// defined codes (1004–1006 and 1015 are for local reporting only), the IANA
// registered 1012–1014, and the ranges for libraries and applications.
func validCloseCode(code int) bool {
	switch {
	case code >= 1000 && code <= 1003, code >= 1007 && code <= 1014:
		return true
	default:
		return code >= 3000 && code <= 4999
	}
}

// parseClosePayload decodes a close frame's body (RFC 6455 §5.5.1).
func parseClosePayload(p []byte) (code int, reason string, err error) {
	switch {
	case len(p) == 0:
		return CloseNoStatus, "", nil
	case len(p) == 1:
		return 0, "", protoErr("close frame with a 1-byte payload")
	}
	code = int(binary.BigEndian.Uint16(p))
	if !validCloseCode(code) {
		return 0, "", protoErr("invalid close code %d", code)
	}
	if !utf8.Valid(p[2:]) {
		return 0, "", fmt.Errorf("%w in close reason", ErrInvalidUTF8)
	}
	return code, string(p[2:]), nil
}

// closeCodeFor picks the close code with which to fail the connection for err.
func closeCodeFor(err error) int {
	switch {
	case errors.Is(err, ErrMessageTooBig):
		return CloseMessageTooBig
	case errors.Is(err, ErrInvalidUTF8):
		return CloseInvalidData
	default:
		return CloseProtocolError
	}
}
