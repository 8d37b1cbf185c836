package proxy

import (
	"io"
	"net"
	"sync"
	"time"
)

// tunnel copies between the sandbox's connection and upstream, both ways, until both
// directions have ended or one has failed, then closes both. An ended direction is
// half-closed (CloseWrite) so that the other can finish: a client that shuts down its sending
// side still gets its answer. Between two *net.TCPConn, io.Copy moves the bytes with splice(2).
//
// first, when set, runs in the sandbox→upstream direction before anything is copied that way
// (the other direction already flows, for protocols where the server speaks first) and returns
// bytes to send upstream first: what was read from the sandbox to decide. An error from first
// ends the tunnel and is returned.
//
// out counts the bytes sent upstream (first's included), in those sent to the sandbox.
func tunnel(client net.Conn, upstream io.ReadWriteCloser, first func() ([]byte, error)) (out, in int64, err error) {
	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			client.Close()
			upstream.Close()
		})
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		n, err := io.Copy(client, upstream)
		in = n
		if err != nil || !closeWrite(client) {
			closeBoth()
		}
	}()

	out, err = func() (int64, error) {
		var n int64
		if first != nil {
			b, err := first()
			if err != nil {
				return 0, err
			}
			if len(b) > 0 {
				m, werr := upstream.Write(b)
				n += int64(m)
				if werr != nil {
					closeBoth()
					return n, nil
				}
			}
		}
		m, cerr := io.Copy(upstream, client)
		if cerr != nil || !closeWrite(upstream) {
			closeBoth()
		}
		return n + m, nil
	}()
	if err != nil {
		closeBoth()
	}
	<-done
	closeBoth()
	return out, in, err
}

// closeWrite half-closes c if it can, reporting whether it did.
func closeWrite(c any) bool {
	cw, ok := c.(interface{ CloseWrite() error })
	return ok && cw.CloseWrite() == nil
}

// closeGently ends a connection the proxy has refused after writing its answer: half-closing
// and reading what the peer still sends for a moment (at most linger) keeps the kernel from
// answering unread bytes with a reset that could destroy the answer before it is read.
func closeGently(c net.Conn, linger time.Duration) {
	if closeWrite(c) {
		_ = c.SetReadDeadline(time.Now().Add(linger))
		_, _ = io.Copy(io.Discard, io.LimitReader(c, 256<<10)) // what the peer sends, if anything
	}
	c.Close()
}

// reset closes c with a TCP reset, so that the sandbox's connect fails at once.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // failing, the close sends a FIN instead: an EOF, not a refusal
	}
	c.Close()
}
