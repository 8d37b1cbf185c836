package proxy

import (
	"io"
	"net"
	"testing"
)

// BenchmarkThroughputCONNECT moves 64 MiB per iteration to a sink on loopback, directly and
// through a CONNECT tunnel, and reports MB/s for each.
func BenchmarkThroughputCONNECT(b *testing.B) {
	const size = 64 << 20
	sink := sinkServer(b)
	buf := make([]byte, 1<<20)
	send := func(b *testing.B, c net.Conn) {
		for sent := 0; sent < size; sent += len(buf) {
			if _, err := c.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
			b.Fatal(err)
		}
		if ack, err := io.ReadAll(c); err != nil || string(ack) != "ok" {
			b.Fatalf("sink answered %q, %v", ack, err)
		}
		c.Close()
	}
	b.Run("direct", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			c, err := net.Dial("tcp", sink)
			if err != nil {
				b.Fatal(err)
			}
			send(b, c)
		}
	})
	b.Run("connect", func(b *testing.B) {
		e := newEnv(b, restricted("allowed.test:9000"))
		e.route("127.0.0.1:9000", sink)
		b.SetBytes(size)
		n := 0
		for b.Loop() {
			c, resp := dialConnect(b, e.explicit, "allowed.test:9000")
			if resp.StatusCode != 200 {
				b.Fatalf("CONNECT: %s", resp.Status)
			}
			send(b, c.(*bufConn).Conn)
			n++
		}
		for _, ev := range e.sb.take(b, n) {
			if !ev.Allow || ev.BytesOut != size {
				b.Errorf("event %+v", ev)
			}
		}
	})
}

// sinkServer reads each connection to its end, then answers "ok".
func sinkServer(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 1<<20)
				for {
					if _, err := c.Read(buf); err != nil {
						break
					}
				}
				_, _ = io.WriteString(c, "ok") // the sender checks the answer
			}()
		}
	}()
	b.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}
