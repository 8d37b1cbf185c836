package proxy

import (
	"errors"
	"fmt"
	"io"
)

// MaxClientHello caps the bytes (records and their headers) read to find a ClientHello.
// Real ones are 200 bytes to 2 KiB (a post-quantum key share included).
const MaxClientHello = 16 << 10

const (
	recordHandshake   = 0x16
	handshakeHello    = 0x01
	extServerName     = 0x0000
	serverNameHost    = 0x00
	maxRecordFragment = 1 << 14
)

var errNotTLS = errors.New("not a TLS handshake")

// readClientHello reads TLS records from r until they hold a whole ClientHello (which may be
// split across records and reads) and returns every byte read, to replay upstream, and the
// server name it asks for ("" when it has none). It reads no byte past the record that
// completes the ClientHello.
func readClientHello(r io.Reader) (raw []byte, sni string, err error) {
	var msg []byte // the handshake message so far, record headers removed
	for {
		if len(raw)+5 > MaxClientHello {
			return raw, "", fmt.Errorf("ClientHello longer than %d bytes", MaxClientHello)
		}
		raw = append(raw, make([]byte, 5)...)
		hdr := raw[len(raw)-5:]
		if m, err := io.ReadFull(r, hdr); err != nil {
			return raw[:len(raw)-5+m], "", fmt.Errorf("reading a TLS record: %w", err)
		}
		if hdr[0] != recordHandshake || hdr[1] != 3 {
			return raw, "", errNotTLS
		}
		n := int(hdr[3])<<8 | int(hdr[4])
		if n == 0 || n > maxRecordFragment {
			return raw, "", fmt.Errorf("TLS record of %d bytes", n)
		}
		if len(raw)+n > MaxClientHello {
			return raw, "", fmt.Errorf("ClientHello longer than %d bytes", MaxClientHello)
		}
		raw = append(raw, make([]byte, n)...)
		frag := raw[len(raw)-n:]
		if m, err := io.ReadFull(r, frag); err != nil {
			return raw[:len(raw)-n+m], "", fmt.Errorf("reading a TLS record: %w", err)
		}
		msg = append(msg, frag...)
		if len(msg) < 4 {
			continue
		}
		if msg[0] != handshakeHello {
			return raw, "", fmt.Errorf("first handshake message is of type %d, not ClientHello", msg[0])
		}
		if want := 4 + (int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3])); len(msg) >= want {
			sni, err := parseClientHello(msg[:want])
			return raw, sni, err
		}
	}
}

// parseClientHello returns the server name of a ClientHello handshake message (its 4-byte
// header included), "" when it has none. It is strict where leniency would let the proxy and
// the server read different names: duplicate extensions, several host names and trailing
// bytes are errors.
func parseClientHello(msg []byte) (string, error) {
	s := cursor(msg)
	typ, ok1 := s.u8()
	n, ok2 := s.u24()
	if !ok1 || !ok2 || typ != handshakeHello || n != len(s) {
		return "", errors.New("malformed ClientHello header")
	}
	if _, ok := s.bytes(2 + 32); !ok { // legacy_version, random
		return "", errors.New("ClientHello truncated")
	}
	sid, ok1 := s.vec8()
	suites, ok2 := s.vec16()
	comp, ok3 := s.vec8()
	if !ok1 || !ok2 || !ok3 || len(sid) > 32 || len(suites) == 0 || len(suites)%2 != 0 || len(comp) == 0 {
		return "", errors.New("malformed ClientHello")
	}
	if len(s) == 0 {
		return "", nil // no extensions
	}
	exts, ok := s.vec16()
	if !ok || len(s) != 0 {
		return "", errors.New("malformed ClientHello extensions")
	}
	seen := map[int]bool{}
	sni := ""
	for len(exts) > 0 {
		typ, ok1 := exts.u16()
		data, ok2 := exts.vec16()
		if !ok1 || !ok2 {
			return "", errors.New("malformed ClientHello extension")
		}
		if seen[typ] {
			return "", fmt.Errorf("duplicate ClientHello extension %d", typ)
		}
		seen[typ] = true
		if typ != extServerName {
			continue
		}
		name, err := parseServerName(data)
		if err != nil {
			return "", err
		}
		sni = name
	}
	return sni, nil
}

// parseServerName parses the server_name extension's data (RFC 6066 §3).
func parseServerName(data cursor) (string, error) {
	list, ok := data.vec16()
	if !ok || len(data) != 0 || len(list) == 0 {
		return "", errors.New("malformed server_name extension")
	}
	name := ""
	for len(list) > 0 {
		typ, ok1 := list.u8()
		b, ok2 := list.vec16()
		if !ok1 || !ok2 {
			return "", errors.New("malformed server_name extension")
		}
		if typ != serverNameHost {
			continue
		}
		if name != "" {
			return "", errors.New("server_name extension with several host names")
		}
		if len(b) == 0 || len(b) > 255 {
			return "", errors.New("server name empty or too long")
		}
		for _, c := range b {
			if c <= 0x20 || c >= 0x7f {
				return "", fmt.Errorf("server name with byte %#x", c)
			}
		}
		name = string(b)
	}
	return name, nil
}

// cursor reads big-endian TLS fields; each method consumes what it returns and reports
// whether the bytes were there.
type cursor []byte

func (c *cursor) bytes(n int) (cursor, bool) {
	if n < 0 || len(*c) < n {
		return nil, false
	}
	b := (*c)[:n]
	*c = (*c)[n:]
	return b, true
}

func (c *cursor) uint(n int) (int, bool) {
	b, ok := c.bytes(n)
	v := 0
	for _, x := range b {
		v = v<<8 | int(x)
	}
	return v, ok
}

func (c *cursor) u8() (int, bool)  { return c.uint(1) }
func (c *cursor) u16() (int, bool) { return c.uint(2) }
func (c *cursor) u24() (int, bool) { return c.uint(3) }

func (c *cursor) vec(lenBytes int) (cursor, bool) {
	n, ok := c.uint(lenBytes)
	if !ok {
		return nil, false
	}
	return c.bytes(n)
}

func (c *cursor) vec8() (cursor, bool)  { return c.vec(1) }
func (c *cursor) vec16() (cursor, bool) { return c.vec(2) }
