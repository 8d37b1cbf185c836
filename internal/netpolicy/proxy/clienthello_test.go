package proxy

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
)

// goHello returns the ClientHello records Go's TLS client sends for serverName ("": none).
func goHello(t testing.TB, serverName string) []byte {
	t.Helper()
	client, server := net.Pipe()
	cfg := &tls.Config{ServerName: serverName, InsecureSkipVerify: serverName == "", NextProtos: []string{"h2", "http/1.1"}}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = tls.Client(client, cfg).Handshake() // it fails: this end only reads the ClientHello
	}()
	raw, _, err := readClientHello(server)
	server.Close()
	client.Close()
	wg.Wait()
	if err != nil {
		t.Fatalf("capturing a ClientHello: %v", err)
	}
	return raw
}

// helloMsg builds a ClientHello handshake message with the given extensions (nil: none).
func helloMsg(exts ...[]byte) []byte {
	body := []byte{0x03, 0x03}
	body = append(body, make([]byte, 32)...) // random
	body = append(body, 0)                   // session id
	body = append(body, 0, 2, 0x13, 0x01)    // cipher suites
	body = append(body, 1, 0)                // compression methods
	if exts != nil {
		all := bytes.Join(exts, nil)
		body = append(body, byte(len(all)>>8), byte(len(all)))
		body = append(body, all...)
	}
	return append([]byte{handshakeHello, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}, body...)
}

// ext builds one extension.
func ext(typ int, data []byte) []byte {
	return append([]byte{byte(typ >> 8), byte(typ), byte(len(data) >> 8), byte(len(data))}, data...)
}

// sniExt builds a server_name extension naming hosts.
func sniExt(hosts ...string) []byte {
	var list []byte
	for _, h := range hosts {
		list = append(list, serverNameHost, byte(len(h)>>8), byte(len(h)))
		list = append(list, h...)
	}
	return ext(extServerName, append([]byte{byte(len(list) >> 8), byte(len(list))}, list...))
}

// splitRecords wraps msg in handshake records of at most size bytes each.
func splitRecords(msg []byte, size int) [][]byte {
	var recs [][]byte
	for len(msg) > 0 {
		n := min(size, len(msg))
		recs = append(recs, append([]byte{recordHandshake, 3, 1, byte(n >> 8), byte(n)}, msg[:n]...))
		msg = msg[n:]
	}
	return recs
}

func records(msg []byte, size int) []byte { return bytes.Join(splitRecords(msg, size), nil) }

// unwrap returns the handshake bytes of records.
func unwrap(raw []byte) []byte {
	var msg []byte
	for len(raw) >= 5 {
		n := int(raw[3])<<8 | int(raw[4])
		msg = append(msg, raw[5:5+n]...)
		raw = raw[5+n:]
	}
	return msg
}

func TestReadClientHello(t *testing.T) {
	goWithSNI := goHello(t, "allowed.test")
	tests := []struct {
		name  string
		in    []byte
		sni   string
		error string // "": no error
	}{
		{name: "go", in: goWithSNI, sni: "allowed.test"},
		{name: "go without SNI", in: goHello(t, ""), sni: ""},
		{name: "go in 7-byte records", in: records(unwrap(goWithSNI), 7), sni: "allowed.test"},
		{name: "header split from body", in: records(unwrap(goWithSNI), 3), sni: "allowed.test"},
		{name: "case kept", in: records(helloMsg(sniExt("Example.COM")), 1<<14), sni: "Example.COM"},
		{name: "no extensions", in: records(helloMsg(), 1<<14), sni: ""},
		{name: "other extensions", in: records(helloMsg(ext(0x0010, []byte{0, 3, 2, 'h', '2'})), 100), sni: ""},
		{name: "only a non-host name", in: records(helloMsg(ext(extServerName, []byte{0, 4, 1, 0, 1, 'x'})), 100), sni: ""},
		{name: "two host names", in: records(helloMsg(sniExt("a.test", "b.test")), 100), error: "several host names"},
		{name: "duplicate extension", in: records(helloMsg(sniExt("a.test"), sniExt("b.test")), 100), error: "duplicate"},
		{name: "empty name list", in: records(helloMsg(ext(extServerName, []byte{0, 0})), 100), error: "malformed server_name"},
		{name: "empty extension", in: records(helloMsg(ext(extServerName, nil)), 100), error: "malformed server_name"},
		{name: "empty name", in: records(helloMsg(sniExt("")), 100), error: "empty"},
		{name: "name with NUL", in: records(helloMsg(sniExt("a.test\x00.evil")), 100), error: "byte 0x0"},
		{name: "name with space", in: records(helloMsg(sniExt("a test")), 100), error: "byte 0x20"},
		{name: "truncated", in: goWithSNI[:len(goWithSNI)-10], error: "unexpected EOF"},
		{name: "empty", in: nil, error: "EOF"},
		{name: "application data", in: []byte{0x17, 3, 3, 0, 1, 0}, error: "not a TLS handshake"},
		{name: "plain HTTP", in: []byte("GET / HTTP/1.1\r\n\r\n"), error: "not a TLS handshake"},
		{name: "SSL 2", in: []byte{0x80, 0x2e, 0x01, 0x03, 0x01}, error: "not a TLS handshake"},
		{name: "server hello", in: records(append([]byte{2}, helloMsg()[1:]...), 100), error: "not ClientHello"},
		{name: "zero-length record", in: []byte{0x16, 3, 1, 0, 0}, error: "record of 0 bytes"},
		{name: "oversized record", in: []byte{0x16, 3, 1, 0x40, 0x01}, error: "record of 16385 bytes"},
		{name: "too large", in: records(helloMsg(ext(0x0015, make([]byte, 17000))), 1<<14), error: "longer than"},
		{name: "many tiny records", in: records(helloMsg(ext(0x0015, make([]byte, 3000))), 1), error: "longer than"},
		{name: "trailing bytes", in: records(lenFixed(append(helloMsg(sniExt("a.test")), 0)), 100), error: "malformed ClientHello extensions"},
		{name: "extension overruns", in: records(lenFixed(append(helloMsg(), 0, 4, 0, 0, 0, 9)), 100), error: "malformed ClientHello extension"},
		{name: "another message after it", in: records(append(helloMsg(sniExt("a.test")), 20, 0, 0, 0), 100), sni: "a.test"},
		{name: "no cipher suites", in: records(lenFixed([]byte{1, 0, 0, 0, 3, 3}, make([]byte, 32), []byte{0, 0, 0, 1, 0}), 100), error: "malformed ClientHello"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append(bytes.Clone(tt.in), "NEXT"...)
			r := bytes.NewReader(in)
			raw, sni, err := readClientHello(r)
			if tt.error != "" {
				if err == nil || !strings.Contains(err.Error(), tt.error) {
					t.Fatalf("error %v, want %q", err, tt.error)
				}
				return
			}
			if err != nil || sni != tt.sni {
				t.Fatalf("got %q, %v; want %q", sni, err, tt.sni)
			}
			if !bytes.Equal(raw, tt.in) {
				t.Errorf("raw is %d bytes, want the %d of the records", len(raw), len(tt.in))
			}
			if rest, _ := io.ReadAll(r); string(rest) != "NEXT" {
				t.Errorf("read past the ClientHello: left %q", rest)
			}
		})
	}
}

func TestParseClientHelloLength(t *testing.T) {
	msg := helloMsg(sniExt("a.test"))
	if sni, err := parseClientHello(msg); err != nil || sni != "a.test" {
		t.Fatalf("got %q, %v", sni, err)
	}
	for _, m := range [][]byte{append(bytes.Clone(msg), 0), msg[:len(msg)-1], msg[:3]} {
		if _, err := parseClientHello(m); err == nil {
			t.Errorf("no error for a message of %d bytes whose header says %d", len(m), len(msg))
		}
	}
}

// lenFixed joins parts into a handshake message and sets its length field.
func lenFixed(parts ...[]byte) []byte {
	m := bytes.Join(parts, nil)
	n := len(m) - 4
	m[1], m[2], m[3] = byte(n>>16), byte(n>>8), byte(n)
	return m
}

func FuzzClientHello(f *testing.F) {
	f.Add(goHello(f, "allowed.test"))
	f.Add(goHello(f, ""))
	f.Add(records(unwrap(goHello(f, "a.example")), 9))
	f.Add(records(helloMsg(sniExt("a.test", "b.test")), 20))
	f.Add(records(helloMsg(), 100))
	f.Add([]byte{0x16, 3, 1, 0, 4, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		raw, sni, err := readClientHello(bytes.NewReader(data))
		if len(raw) > MaxClientHello || !bytes.HasPrefix(data, raw) {
			t.Fatalf("raw: %d bytes, not a prefix of the input", len(raw))
		}
		if err != nil && sni != "" {
			t.Fatalf("a name (%q) with an error", sni)
		}
		for _, c := range []byte(sni) {
			if c <= 0x20 || c >= 0x7f {
				t.Fatalf("name %q", sni)
			}
		}
		if len(data) >= 4 {
			_, _ = parseClientHello(data) // it must not panic; any answer will do
		}
	})
}
