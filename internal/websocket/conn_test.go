package websocket

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// checkErr compares err with want: a *CloseError by code and reason, anything
// else with errors.Is.
func checkErr(t *testing.T, err, want error) {
	t.Helper()
	if wantCE, ok := errors.AsType[*CloseError](want); ok {
		ce, ok := errors.AsType[*CloseError](err)
		if !ok || *ce != *wantCE {
			t.Errorf("error = %v, want %v", err, want)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Errorf("error = %v, want %v", err, want)
	}
}

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		typ  MessageType
		data string
	}{
		{"empty text", Text, ""},
		{"short text", Text, "hello"},
		{"multibyte text", Text, strings.Repeat("héllo wörld ✓ ", 100)},
		{"binary with zeros", Binary, "\x00\x01\xff\x00"},
		{"125 bytes, largest 7-bit length", Binary, strings.Repeat("a", 125)},
		{"126 bytes, smallest 16-bit length", Binary, strings.Repeat("b", 126)},
		{"65535 bytes, largest 16-bit length", Text, strings.Repeat("c", 65535)},
		{"65536 bytes, smallest 64-bit length", Binary, strings.Repeat("d", 65536)},
		{"70 KiB", Binary, strings.Repeat("0123456789", 7*1024)},
	}
	url := startServer(t, func(c *Conn) { _ = echo(c) })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, url)
			if err := c.WriteMessage(tt.typ, []byte(tt.data)); err != nil {
				t.Fatalf("WriteMessage: %v", err)
			}
			typ, got, err := c.ReadMessage()
			if err != nil {
				t.Fatalf("ReadMessage: %v", err)
			}
			if typ != tt.typ || string(got) != tt.data {
				t.Errorf("got %v %d bytes, want %v %d bytes", typ, len(got), tt.typ, len(tt.data))
			}
			if err := c.Close(CloseNormal, ""); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}

// TestServerReadsFrames drives an echo server with hand-made frames and checks
// what it answers and how its ReadMessage ends.
func TestServerReadsFrames(t *testing.T) {
	bye := rawFrame{b0: 0x88, payload: closeFrame(CloseNormal, "bye")}
	byeEcho := wantFrame{op: 0x8, code: CloseNormal}
	byeErr := &CloseError{Code: CloseNormal, Reason: "bye"}
	long := strings.Repeat("x", 70000)
	tests := []struct {
		name    string
		limit   int64
		frames  []rawFrame
		want    []wantFrame
		wantErr error
	}{
		{"text", 0, []rawFrame{{b0: 0x81, payload: []byte("hello")}, bye},
			[]wantFrame{{op: 0x1, payload: "hello"}, byeEcho}, byeErr},
		{"binary", 0, []rawFrame{{b0: 0x82, payload: []byte{0, 1, 2}}, bye},
			[]wantFrame{{op: 0x2, payload: "\x00\x01\x02"}, byeEcho}, byeErr},
		{"64-bit length", 0, []rawFrame{{b0: 0x82, payload: []byte(long)}, bye},
			[]wantFrame{{op: 0x2, payload: long}, byeEcho}, byeErr},
		{"fragments with a ping between", 0, []rawFrame{
			{b0: 0x01, payload: []byte("hel")}, {b0: 0x89, payload: []byte("p")},
			{b0: 0x00, payload: []byte("l")}, {b0: 0x80, payload: []byte("o")}, bye},
			[]wantFrame{{op: 0xa, payload: "p"}, {op: 0x1, payload: "hello"}, byeEcho}, byeErr},
		{"rune split across fragments", 0, []rawFrame{
			{b0: 0x01, payload: []byte("\xc3")}, {b0: 0x80, payload: []byte("\xa9")}, bye},
			[]wantFrame{{op: 0x1, payload: "é"}, byeEcho}, byeErr},
		{"empty fragments", 0, []rawFrame{{b0: 0x02}, {b0: 0x00}, {b0: 0x80}, bye},
			[]wantFrame{{op: 0x2}, byeEcho}, byeErr},
		{"pong ignored", 0, []rawFrame{{b0: 0x8a, payload: []byte("x")}, {b0: 0x81, payload: []byte("a")}, bye},
			[]wantFrame{{op: 0x1, payload: "a"}, byeEcho}, byeErr},
		{"message at the read limit", 100, []rawFrame{{b0: 0x82, payload: bytes.Repeat([]byte("z"), 100)}, bye},
			[]wantFrame{{op: 0x2, payload: strings.Repeat("z", 100)}, byeEcho}, byeErr},
		{"empty close", 0, []rawFrame{{b0: 0x88}},
			[]wantFrame{{op: 0x8}}, &CloseError{Code: CloseNoStatus}},
		{"application close code", 0, []rawFrame{{b0: 0x88, payload: closeFrame(4000, "app")}},
			[]wantFrame{{op: 0x8, code: 4000}}, &CloseError{Code: 4000, Reason: "app"}},

		{"unmasked frame", 0, []rawFrame{{b0: 0x81, payload: []byte("hi"), badMask: true}},
			[]wantFrame{{op: 0x8, code: CloseProtocolError}}, ErrProtocol},
		{"RSV1 without extension", 0, []rawFrame{{b0: 0xc1, payload: []byte("hi")}},
			[]wantFrame{{op: 0x8, code: CloseProtocolError}}, ErrProtocol},
		{"reserved opcode", 0, []rawFrame{{b0: 0x83}},
			[]wantFrame{{op: 0x8, code: CloseProtocolError}}, ErrProtocol},
		{"continuation first", 0, []rawFrame{{b0: 0x80, payload: []byte("x")}},
			[]wantFrame{{op: 0x8, code: CloseProtocolError}}, ErrProtocol},
		{"new message inside a fragmented one", 0, []rawFrame{{b0: 0x01, payload: []byte("a")}, {b0: 0x81, payload: []byte("b")}},
			[]wantFrame{{op: 0x8, code: CloseProtocolError}}, ErrProtocol},
		{"fragmented ping", 0, []rawFrame{{b0: 0x09, payload: []byte("p")}},
			[]wantFrame{{op: 0x8, code: CloseProtocolError}}, ErrProtocol},
		{"ping over 125 bytes", 0, []rawFrame{{b0: 0x89, payload: bytes.Repeat([]byte("p"), 126)}},
			[]wantFrame{{op: 0x8, code: CloseProtocolError}}, ErrProtocol},
		{"invalid UTF-8", 0, []rawFrame{{b0: 0x81, payload: []byte("ok\xff")}},
			[]wantFrame{{op: 0x8, code: CloseInvalidData}}, ErrInvalidUTF8},
		{"invalid UTF-8 across fragments", 0, []rawFrame{{b0: 0x01, payload: []byte("\xc3")}, {b0: 0x80, payload: []byte("(")}},
			[]wantFrame{{op: 0x8, code: CloseInvalidData}}, ErrInvalidUTF8},
		{"close with a 1-byte payload", 0, []rawFrame{{b0: 0x88, payload: []byte{0x03}}},
			[]wantFrame{{op: 0x8, code: CloseProtocolError}}, ErrProtocol},
		{"close code 1005 on the wire", 0, []rawFrame{{b0: 0x88, payload: closeFrame(CloseNoStatus, "")}},
			[]wantFrame{{op: 0x8, code: CloseProtocolError}}, ErrProtocol},
		{"close code 999", 0, []rawFrame{{b0: 0x88, payload: closeFrame(999, "")}},
			[]wantFrame{{op: 0x8, code: CloseProtocolError}}, ErrProtocol},
		{"close reason not UTF-8", 0, []rawFrame{{b0: 0x88, payload: closeFrame(CloseNormal, "\xff")}},
			[]wantFrame{{op: 0x8, code: CloseInvalidData}}, ErrInvalidUTF8},
		{"frame over the read limit", 100, []rawFrame{{b0: 0x82, payload: bytes.Repeat([]byte("z"), 101)}},
			[]wantFrame{{op: 0x8, code: CloseMessageTooBig}}, ErrMessageTooBig},
		{"fragments over the read limit", 100, []rawFrame{
			{b0: 0x02, payload: bytes.Repeat([]byte("z"), 60)}, {b0: 0x80, payload: bytes.Repeat([]byte("z"), 60)}},
			[]wantFrame{{op: 0x8, code: CloseMessageTooBig}}, ErrMessageTooBig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errc := make(chan error, 1)
			url := startServer(t, func(c *Conn) {
				c.SetReadLimit(tt.limit)
				errc <- echo(c)
			})
			p := dialRaw(t, url)
			for _, f := range tt.frames {
				p.write(f)
			}
			p.expect(tt.want)
			// After the close frames, the server must close (or shut down) its side.
			if _, _, _, err := p.read(); !errors.Is(err, io.EOF) {
				t.Errorf("read after close = %v, want EOF", err)
			}
			p.conn.Close()
			select {
			case err := <-errc:
				checkErr(t, err, tt.wantErr)
			case <-time.After(5 * time.Second):
				t.Fatal("server did not finish")
			}
		})
	}
}

// TestClientReadsFrames drives a Dial client with a hand-made server.
func TestClientReadsFrames(t *testing.T) {
	long := strings.Repeat("y", 70000)
	tests := []struct {
		name     string
		frames   []rawFrame  // the server sends these
		want     []wantFrame // and then expects these from the client
		wantMsgs []string
		wantErr  error
	}{
		{"text then EOF", []rawFrame{{b0: 0x81, payload: []byte("hi")}}, nil,
			[]string{"hi"}, io.ErrUnexpectedEOF},
		{"64-bit length", []rawFrame{{b0: 0x82, payload: []byte(long)}}, nil,
			[]string{long}, io.ErrUnexpectedEOF},
		{"ping answered with a masked pong", []rawFrame{{b0: 0x89, payload: []byte("p")}, {b0: 0x81, payload: []byte("x")}},
			[]wantFrame{{op: 0xa, payload: "p"}}, []string{"x"}, io.ErrUnexpectedEOF},
		{"server close echoed", []rawFrame{{b0: 0x88, payload: closeFrame(CloseGoingAway, "going")}},
			[]wantFrame{{op: 0x8, code: CloseGoingAway}}, nil, &CloseError{Code: CloseGoingAway, Reason: "going"}},
		{"masked server frame", []rawFrame{{b0: 0x81, payload: []byte("hi"), badMask: true}},
			[]wantFrame{{op: 0x8, code: CloseProtocolError}}, nil, ErrProtocol},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := startRawServer(t, func(p *rawPeer) {
				for _, f := range tt.frames {
					p.write(f)
				}
				p.expect(tt.want)
			})
			c := dial(t, url)
			var msgs []string
			for {
				_, m, err := c.ReadMessage()
				if err != nil {
					checkErr(t, err, tt.wantErr)
					break
				}
				msgs = append(msgs, string(m))
			}
			if fmt.Sprint(msgs) != fmt.Sprint(tt.wantMsgs) {
				t.Errorf("messages = %.60q, want %.60q", msgs, tt.wantMsgs)
			}
		})
	}
}

func TestClientReadLimit(t *testing.T) {
	serverErr := make(chan error, 1)
	url := startServer(t, func(c *Conn) {
		_ = c.WriteMessage(Binary, make([]byte, 2000))
		_, _, err := c.ReadMessage()
		serverErr <- err
	})
	c := dial(t, url)
	c.SetReadLimit(1000)
	_, _, err := c.ReadMessage()
	checkErr(t, err, ErrMessageTooBig)
	checkErr(t, <-serverErr, &CloseError{Code: CloseMessageTooBig, Reason: "message too big"})
}

// TestConcurrentWriters runs several writers against one reader on the other
// end; run with -race. Every message must arrive whole.
func TestConcurrentWriters(t *testing.T) {
	const writers, perWriter = 8, 40
	message := func(w, i int) string {
		// Sizes cross the 125/65535 length boundaries and the client's 4 KiB mask chunks.
		size := (w*7919 + i*104729) % 70000
		return fmt.Sprintf("%d/%d/", w, i) + strings.Repeat(string(rune('a'+w)), size)
	}
	writeAll := func(c *Conn) error {
		var wg sync.WaitGroup
		errs := make(chan error, writers+1)
		for w := range writers {
			wg.Go(func() {
				for i := range perWriter {
					if err := c.WriteMessage(Text, []byte(message(w, i))); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Go(func() { // control frames interleave with data frames too
			for range perWriter {
				if err := c.Ping([]byte("keepalive")); err != nil {
					errs <- err
					return
				}
			}
		})
		wg.Wait()
		close(errs)
		return <-errs
	}
	readAll := func(c *Conn) error {
		want := make(map[string]bool)
		for w := range writers {
			for i := range perWriter {
				want[message(w, i)] = true
			}
		}
		for len(want) > 0 {
			_, m, err := c.ReadMessage()
			if err != nil {
				return fmt.Errorf("%d messages missing: %w", len(want), err)
			}
			if !want[string(m)] {
				return fmt.Errorf("unexpected or corrupt message %.20q (%d bytes)", m, len(m))
			}
			delete(want, string(m))
		}
		return nil
	}
	tests := []struct {
		name          string
		serverWriters bool
	}{
		{"client writers, masked", false},
		{"server writers, unmasked", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errc := make(chan error, 1)
			url := startServer(t, func(c *Conn) {
				if tt.serverWriters {
					go func() { errc <- writeAll(c) }()
				} else {
					errc <- readAll(c)
				}
				// Keep reading so pings are answered, until the client closes.
				for {
					if _, _, err := c.ReadMessage(); err != nil {
						return
					}
				}
			})
			c := dial(t, url)
			if tt.serverWriters {
				if err := readAll(c); err != nil {
					t.Error(err)
				}
			} else {
				readErr := make(chan error, 1)
				go func() { // consume the pongs
					for {
						if _, _, err := c.ReadMessage(); err != nil {
							readErr <- err
							return
						}
					}
				}()
				if err := writeAll(c); err != nil {
					t.Error(err)
				}
				defer func() { _ = <-readErr }() // the reader's end, once the connection closes
			}
			if err := <-errc; err != nil {
				t.Error(err)
			}
			if err := c.Close(CloseNormal, ""); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}

// TestWriteTimeout: a peer that stops reading fails the writer once the write timeout passes,
// instead of holding it forever; a peer that reads is not bothered by it.
func TestWriteTimeout(t *testing.T) {
	for _, c := range []struct {
		name    string
		reads   bool
		wantErr bool
	}{
		{"peer reads", true, false},
		{"peer stops reading", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			done := make(chan error, 1)
			url := startServer(t, func(conn *Conn) {
				conn.SetWriteTimeout(200 * time.Millisecond)
				msg := make([]byte, 64<<10)
				// 64 MiB in all: far more than the sockets' buffers hold.
				for range 1024 {
					if err := conn.WriteMessage(Binary, msg); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			})
			client := dial(t, url)
			client.SetReadLimit(1 << 20)
			if c.reads {
				go func() {
					for {
						if _, _, err := client.ReadMessage(); err != nil {
							return
						}
					}
				}()
			}
			select {
			case err := <-done:
				if (err != nil) != c.wantErr {
					t.Errorf("writer: %v, want an error: %v", err, c.wantErr)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the writer is still blocked after 20 s")
			}
		})
	}
}
