package websocket

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// testKey is the sample Sec-WebSocket-Key of RFC 6455 §1.3.
const testKey = "dGhlIHNhbXBsZSBub25jZQ=="

// startServer serves WebSocket connections with handler and returns the
// server's ws:// URL. Cleanup closes the server and waits for the handlers,
// which net/http stops tracking once a connection is hijacked.
func startServer(t *testing.T, handler func(*Conn)) string {
	t.Helper()
	var wg sync.WaitGroup
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wg.Add(1)
		defer wg.Done()
		c, err := Accept(w, r)
		if err != nil {
			t.Errorf("Accept: %v", err)
			return
		}
		defer func() { _ = c.CloseNow() }()
		handler(c)
	}))
	t.Cleanup(func() {
		ts.Close()
		wg.Wait()
	})
	return "ws" + strings.TrimPrefix(ts.URL, "http")
}

// echo sends every message back until ReadMessage fails, and returns that error.
func echo(c *Conn) error {
	for {
		typ, p, err := c.ReadMessage()
		if err != nil {
			return err
		}
		if err := c.WriteMessage(typ, p); err != nil {
			return err
		}
	}
}

// dial connects a Conn client to url and closes it at cleanup.
func dial(t *testing.T, url string) *Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := Dial(ctx, url, nil, nil)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	return c
}

// rawFrame is a frame a raw peer writes. b0 is the first header byte: FIN,
// RSV bits and opcode, so tests can send anything, including invalid frames.
type rawFrame struct {
	b0      byte
	payload []byte
	badMask bool // break the masking rule of the sender's role
}

// wantFrame is a frame a raw peer expects to read; for a close frame only the
// code is compared (code 0: an empty close payload).
type wantFrame struct {
	op      byte
	payload string
	code    int
}

// rawPeer speaks the frame layer by hand, independently of the package's
// encoder, to test a Conn against exact bytes. It may run in a server
// goroutine, so it reports failures with Errorf, never Fatal.
type rawPeer struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
	mask bool // client role: mask the frames it writes
}

// dialRaw performs the opening handshake by hand and returns a raw client.
func dialRaw(t *testing.T, wsURL string) *rawPeer {
	t.Helper()
	host := strings.TrimPrefix(wsURL, "ws://")
	nc, err := net.DialTimeout("tcp", host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	req := "GET / HTTP/1.1\r\nHost: " + host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: " + testKey + "\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := io.WriteString(nc, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(nc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake status = %d, want 101", resp.StatusCode)
	}
	if got, want := resp.Header.Get("Sec-WebSocket-Accept"), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="; got != want {
		t.Fatalf("Sec-WebSocket-Accept = %q, want %q", got, want)
	}
	return &rawPeer{t: t, conn: nc, br: br, mask: true}
}

// write sends f, masked with a fixed key if the peer is a client.
func (p *rawPeer) write(f rawFrame) {
	p.t.Helper()
	masked := p.mask != f.badMask
	var b []byte
	b1 := byte(0)
	if masked {
		b1 = 0x80
	}
	switch n := len(f.payload); {
	case n <= 125:
		b = append(b, f.b0, b1|byte(n))
	case n <= 0xffff:
		b = append(b, f.b0, b1|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, f.b0, b1|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	key := [4]byte{0xde, 0xad, 0xbe, 0xef}
	if masked {
		b = append(b, key[:]...)
	}
	for i, c := range f.payload {
		if masked {
			c ^= key[i%4]
		}
		b = append(b, c)
	}
	if _, err := p.conn.Write(b); err != nil {
		p.t.Errorf("write frame: %v", err)
	}
}

// read reads one frame, unmasking it if needed; it reports whether the
// frame was masked.
func (p *rawPeer) read() (op byte, payload []byte, masked bool, err error) {
	var h [2]byte
	if _, err := io.ReadFull(p.br, h[:]); err != nil {
		return 0, nil, false, err
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(p.br, b[:]); err != nil {
			return 0, nil, false, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(p.br, b[:]); err != nil {
			return 0, nil, false, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	masked = h[1]&0x80 != 0
	var key [4]byte
	if masked {
		if _, err := io.ReadFull(p.br, key[:]); err != nil {
			return 0, nil, false, err
		}
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(p.br, payload); err != nil {
		return 0, nil, false, err
	}
	for i := range payload {
		payload[i] ^= key[i%4]
	}
	return h[0], payload, masked, nil
}

// expect reads frames and compares them with want.
func (p *rawPeer) expect(want []wantFrame) {
	p.t.Helper()
	for i, w := range want {
		b0, payload, masked, err := p.read()
		if err != nil {
			p.t.Errorf("frame %d: %v", i, err)
			return
		}
		if masked == p.mask {
			p.t.Errorf("frame %d: masked = %v, want %v", i, masked, !p.mask)
		}
		if b0 != 0x80|w.op {
			p.t.Errorf("frame %d: first byte = %#x, want %#x", i, b0, 0x80|w.op)
			return
		}
		if w.op == 0x8 {
			code := 0
			if len(payload) >= 2 {
				code = int(binary.BigEndian.Uint16(payload))
			}
			if code != w.code {
				p.t.Errorf("frame %d: close code = %d, want %d (payload %q)", i, code, w.code, payload)
			}
			continue
		}
		if string(payload) != w.payload {
			p.t.Errorf("frame %d: payload = %.40q, want %.40q", i, payload, w.payload)
		}
	}
}

// startRawServer answers the opening handshake by hand and gives the
// connection to fn as a raw server peer; the connection closes when fn returns.
func startRawServer(t *testing.T, fn func(p *rawPeer)) string {
	t.Helper()
	var wg sync.WaitGroup
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wg.Add(1)
		defer wg.Done()
		nc, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("Hijack: %v", err)
			return
		}
		defer nc.Close()
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = io.WriteString(nc, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
			"Sec-WebSocket-Accept: "+acceptKey(r.Header.Get("Sec-WebSocket-Key"))+"\r\n\r\n")
		if err != nil {
			t.Errorf("write handshake: %v", err)
			return
		}
		fn(&rawPeer{t: t, conn: nc, br: brw.Reader})
	}))
	t.Cleanup(func() {
		ts.Close()
		wg.Wait()
	})
	return "ws" + strings.TrimPrefix(ts.URL, "http")
}

// closeFrame builds a close payload.
func closeFrame(code int, reason string) []byte {
	return append(binary.BigEndian.AppendUint16(nil, uint16(code)), reason...)
}
