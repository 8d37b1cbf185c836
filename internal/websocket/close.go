package websocket

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
	"unicode/utf8"
)

// fail fails the connection (RFC 6455 §7.1.7) because of err: it sends a close
// frame with the matching code and closes the connection. It returns err.
func (c *Conn) fail(err error) error {
	code := closeCodeFor(err)
	_ = c.writeClose(code, closeReasonFor(code))
	// Closing a TCP socket with unread input makes the kernel send a reset,
	// which can destroy our close frame in the peer's receive buffer. So shut
	// down our side (a peer waiting for the server to close then closes too),
	// and read and drop the rest, briefly, until the peer has closed.
	if cw, ok := c.conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = c.conn.SetReadDeadline(time.Now().Add(closeTimeout))
	_, _ = io.Copy(io.Discard, c.br)
	_ = c.CloseNow()
	return err
}

// closeReasonFor is the short reason sent with a close frame we fail with.
func closeReasonFor(code int) string {
	switch code {
	case CloseMessageTooBig:
		return "message too big"
	case CloseInvalidData:
		return "invalid UTF-8"
	default:
		return "protocol error"
	}
}

// writeClose sends a close frame with code and reason, or an empty one if code
// is 0. It returns ErrClosed if a close frame was already sent.
func (c *Conn) writeClose(code int, reason string) error {
	// A writer blocked on a peer that stopped reading would hold writeMu
	// forever; the deadline releases it, and nothing is written after close.
	_ = c.conn.SetWriteDeadline(time.Now().Add(closeTimeout))
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if c.closeSent {
		return ErrClosed
	}
	c.closeSent = true
	var p []byte
	if code != 0 {
		p = binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(reason)), uint16(code))
		p = append(p, reason...)
	}
	return c.writeFrameLocked(opClose, p)
}

// Close starts the close handshake with code and reason (at most 123 bytes of
// UTF-8), waits up to a second for the peer's close frame, and closes the
// connection. Data messages that arrive meanwhile are dropped unless a
// concurrent ReadMessage is running. Close is safe to call more than once and
// concurrently with the reader and writers.
func (c *Conn) Close(code int, reason string) error {
	if !validCloseCode(code) {
		_ = c.CloseNow()
		return fmt.Errorf("websocket: invalid close code %d", code)
	}
	if len(reason) > maxCloseReason || !utf8.ValidString(reason) {
		_ = c.CloseNow()
		return fmt.Errorf("websocket: close reason must be UTF-8 of at most %d bytes", maxCloseReason)
	}
	err := c.writeClose(code, reason)
	if err == nil {
		c.awaitPeerClose()
	}
	cerr := c.CloseNow()
	if err != nil && !errors.Is(err, ErrClosed) {
		return err
	}
	return cerr
}

// awaitPeerClose waits, at most closeTimeout, for the peer's close frame,
// reading it itself unless a ReadMessage is under way.
func (c *Conn) awaitPeerClose() {
	timer := time.NewTimer(closeTimeout)
	defer timer.Stop()
	select {
	case c.readSem <- struct{}{}:
		defer func() { <-c.readSem }()
		if c.readErr == nil {
			_ = c.conn.SetReadDeadline(time.Now().Add(closeTimeout))
			_ = c.discardUntilClose()
			c.readErr = ErrClosed
		}
	case <-c.closeReceived:
	case <-timer.C:
	}
}

// discardUntilClose reads and drops frames until the peer's close frame or an
// error. The caller holds readSem.
func (c *Conn) discardUntilClose() error {
	for {
		h, err := c.nextHeader()
		if err != nil {
			return err
		}
		if h.op.isControl() {
			if err := c.handleControl(h); err != nil {
				return err
			}
			continue
		}
		if _, err := io.CopyN(io.Discard, c.br, h.length); err != nil {
			return c.ioError(noEOF(err))
		}
	}
}

// CloseNow closes the underlying connection without a close handshake. Later
// calls do nothing and return nil.
func (c *Conn) CloseNow() error {
	var err error
	c.closeOnce.Do(func() {
		close(c.done)
		err = c.conn.Close()
	})
	return err
}
