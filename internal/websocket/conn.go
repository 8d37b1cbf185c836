// Package websocket is a small RFC 6455 WebSocket implementation on the standard
// library alone, shared by the daemon's streaming endpoints and the Go SDK.
//
// It negotiates no extensions or subprotocols. Messages are read whole (up to
// a limit, see SetReadLimit) and written as single frames. Control frames are
// handled inside ReadMessage, so a connection must have a reader for pings to
// be answered and for the peer's close to be seen. For context cancellation,
// pair a connection with context.AfterFunc(ctx, func() { c.CloseNow() }).
package websocket

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// MessageType is the type of a data message.
type MessageType int

// Data message types; the values are the frame opcodes.
const (
	Text   MessageType = 1
	Binary MessageType = 2
)

const (
	// defaultReadLimit caps a message unless SetReadLimit says otherwise.
	defaultReadLimit = 1 << 20
	// closeTimeout bounds how long closing waits on the peer, so a silent or
	// stalled peer cannot hold up shutdown.
	closeTimeout = time.Second
	// maxPrealloc bounds the buffer grown up front for a frame: the length in
	// the header is the peer's claim, not data we have.
	maxPrealloc = 64 << 10
)

// Conn is a WebSocket connection. One goroutine may read while any number write.
type Conn struct {
	conn   net.Conn
	client bool // client side: masks its frames and expects unmasked ones

	// readSem is a one-slot semaphore held by whoever reads frames: ReadMessage,
	// or Close while it waits for the peer's close frame. It is a channel, not a
	// mutex, so Close can stop waiting when a reader holds it.
	readSem   chan struct{}
	br        *bufio.Reader // guarded by readSem
	readErr   error         // guarded by readSem; once set, every read returns it
	readLimit atomic.Int64

	writeTimeout atomic.Int64 // a time.Duration; 0: none (SetWriteTimeout)

	// writeMu guards bw, writeErr, closeSent, hdrBuf and maskBuf: frames of
	// concurrent writers must not interleave.
	writeMu   sync.Mutex
	bw        *bufio.Writer
	writeErr  error // sticky: a failed write may have left half a frame
	closeSent bool
	hdrBuf    [maxHeaderLen]byte
	maskBuf   []byte // scratch for masking, so callers' data stays untouched

	closeRecvOnce sync.Once
	closeReceived chan struct{} // closed when the peer's close frame is read
	closeOnce     sync.Once
	done          chan struct{} // closed by CloseNow
}

// newConn wraps an upgraded connection. br and bw must read from and write to nc.
func newConn(nc net.Conn, br *bufio.Reader, bw *bufio.Writer, client bool) *Conn {
	c := &Conn{
		conn:          nc,
		client:        client,
		readSem:       make(chan struct{}, 1),
		br:            br,
		bw:            bw,
		closeReceived: make(chan struct{}),
		done:          make(chan struct{}),
	}
	c.readLimit.Store(defaultReadLimit)
	return c
}

// SetReadLimit caps the size of a message, after reassembly, to n bytes
// (default 1 MiB). A bigger message fails the connection with close code 1009.
// A non-positive n restores the default.
func (c *Conn) SetReadLimit(n int64) {
	if n <= 0 {
		n = defaultReadLimit
	}
	c.readLimit.Store(n)
}

// SetWriteTimeout bounds every later message (WriteMessage, Ping): it must be written within
// d, or the write fails and the connection is unusable for writing. A peer that stops reading
// cannot hold a writer forever. Zero (the default) means no bound; SetWriteDeadline is then
// the caller's.
func (c *Conn) SetWriteTimeout(d time.Duration) { c.writeTimeout.Store(int64(d)) }

// SetReadDeadline sets the deadline of reads on the underlying connection. A
// read that times out leaves the connection unusable for reading.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.conn.SetReadDeadline(t) }

// SetWriteDeadline sets the deadline of writes on the underlying connection.
// A write that times out leaves the connection unusable for writing.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.conn.SetWriteDeadline(t) }

// SetDeadline sets both the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error { return c.conn.SetDeadline(t) }

// RemoteAddr returns the peer's network address.
func (c *Conn) RemoteAddr() net.Addr { return c.conn.RemoteAddr() }

// ReadMessage returns the next complete data message, reassembling fragments.
// It answers pings with pongs and completes a close handshake started by the
// peer, after which it returns a *CloseError with the peer's code and reason.
// Any error is final: later calls return it again. The returned slice is the
// caller's. Not safe for concurrent readers.
func (c *Conn) ReadMessage() (MessageType, []byte, error) {
	c.readSem <- struct{}{}
	defer func() { <-c.readSem }()
	if c.readErr != nil {
		return 0, nil, c.readErr
	}
	t, p, err := c.readMessage()
	if err != nil {
		c.readErr = err
		return 0, nil, err
	}
	return t, p, nil
}

// readMessage reads frames until a data message is complete. The caller holds readSem.
func (c *Conn) readMessage() (MessageType, []byte, error) {
	var (
		typ MessageType // 0 until the first frame of the message
		buf bytes.Buffer
	)
	limit := c.readLimit.Load()
	for {
		h, err := c.nextHeader()
		if err != nil {
			return 0, nil, err
		}
		if h.op.isControl() {
			// Control frames may arrive between the fragments of a message.
			if err := c.handleControl(h); err != nil {
				return 0, nil, err
			}
			continue
		}
		switch {
		case h.op == opContinuation && typ == 0:
			return 0, nil, c.fail(protoErr("continuation frame outside a fragmented message"))
		case h.op != opContinuation && typ != 0:
			return 0, nil, c.fail(protoErr("new message started before the previous one ended"))
		case h.op != opContinuation:
			typ = MessageType(h.op)
		}
		// Check before reading so a hostile length costs nothing.
		if h.length > limit-int64(buf.Len()) {
			return 0, nil, c.fail(fmt.Errorf("%w: more than the read limit of %d bytes", ErrMessageTooBig, limit))
		}
		start := buf.Len()
		buf.Grow(int(min(h.length, maxPrealloc)))
		if _, err := io.CopyN(&buf, c.br, h.length); err != nil {
			return 0, nil, c.ioError(noEOF(err))
		}
		if h.masked {
			maskBytes(h.mask, 0, buf.Bytes()[start:])
		}
		if h.fin {
			break
		}
	}
	p := buf.Bytes()
	if typ == Text && !utf8.Valid(p) {
		return 0, nil, c.fail(fmt.Errorf("%w in text message", ErrInvalidUTF8))
	}
	return typ, p, nil
}

// nextHeader reads a frame header and checks its masking, failing the
// connection on a protocol violation. The caller holds readSem.
func (c *Conn) nextHeader() (frameHeader, error) {
	h, err := readHeader(c.br)
	switch {
	case errors.Is(err, ErrProtocol):
		return h, c.fail(err)
	case err != nil:
		return h, c.ioError(err)
	case c.client && h.masked:
		return h, c.fail(protoErr("masked frame from server"))
	case !c.client && !h.masked:
		return h, c.fail(protoErr("unmasked frame from client"))
	}
	return h, nil
}

// handleControl reads the payload of a control frame and acts on it. For a
// close frame it completes the handshake and returns the *CloseError.
func (c *Conn) handleControl(h frameHeader) error {
	var buf [maxControlPayload]byte
	p := buf[:h.length] // readHeader guarantees length <= 125
	if _, err := io.ReadFull(c.br, p); err != nil {
		return c.ioError(noEOF(err))
	}
	if h.masked {
		maskBytes(h.mask, 0, p)
	}
	switch h.op {
	case opPing:
		c.writeMu.Lock()
		defer c.writeMu.Unlock()
		if !c.closeSent {
			// A failed pong is not a read error; the sticky writeErr reports it
			// to the next writer.
			_ = c.writeFrameLocked(opPong, p)
		}
	case opClose:
		code, reason, err := parseClosePayload(p)
		if err != nil {
			return c.fail(err)
		}
		c.closeRecvOnce.Do(func() { close(c.closeReceived) })
		// Echo the peer's code (RFC 6455 §5.5.1); a no-op if we started the close.
		echo := code
		if code == CloseNoStatus {
			echo = 0 // answer an empty close with an empty close
		}
		_ = c.writeClose(echo, "")
		_ = c.CloseNow()
		return &CloseError{Code: code, Reason: reason}
	}
	return nil
}

// ioError describes a failed read of the underlying connection.
func (c *Conn) ioError(err error) error {
	select {
	case <-c.done:
		return ErrClosed
	default:
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("websocket: connection lost without a close frame: %w", io.ErrUnexpectedEOF)
	}
	return fmt.Errorf("websocket: read: %w", err)
}

// WriteMessage sends data as one message of type t. It is safe to call
// concurrently with other writers and with the reader. Text must be valid UTF-8.
func (c *Conn) WriteMessage(t MessageType, data []byte) error {
	switch t {
	case Text:
		if !utf8.Valid(data) {
			return fmt.Errorf("%w in text message to send", ErrInvalidUTF8)
		}
	case Binary:
	default:
		return fmt.Errorf("websocket: invalid message type %d", t)
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if c.closeSent {
		return ErrClosed
	}
	c.startWriteLocked()
	return c.writeFrameLocked(opcode(t), data)
}

// startWriteLocked gives the message about to be written its write timeout, if any. The caller
// holds writeMu and has checked closeSent: once a close is under way, its own deadline holds.
func (c *Conn) startWriteLocked() {
	if d := time.Duration(c.writeTimeout.Load()); d > 0 {
		_ = c.conn.SetWriteDeadline(time.Now().Add(d))
	}
}

// Ping sends a ping with an optional payload of up to 125 bytes. The peer's
// pong is consumed by ReadMessage.
func (c *Conn) Ping(data []byte) error {
	if len(data) > maxControlPayload {
		return fmt.Errorf("websocket: ping payload longer than %d bytes", maxControlPayload)
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if c.closeSent {
		return ErrClosed
	}
	c.startWriteLocked()
	return c.writeFrameLocked(opPing, data)
}

// writeFrameLocked writes one final frame. The caller holds writeMu.
func (c *Conn) writeFrameLocked(op opcode, p []byte) error {
	if c.writeErr != nil {
		return c.writeErr
	}
	h := frameHeader{fin: true, op: op, length: int64(len(p)), masked: c.client}
	if c.client {
		// RFC 6455 §5.3: the key must be unpredictable; crypto/rand never fails.
		_, _ = rand.Read(h.mask[:])
	}
	_, err := c.bw.Write(appendHeader(c.hdrBuf[:0], h))
	if err == nil && c.client {
		if c.maskBuf == nil {
			c.maskBuf = make([]byte, 4096)
		}
		for pos, rest := 0, p; len(rest) > 0 && err == nil; {
			n := copy(c.maskBuf, rest)
			rest = rest[n:]
			pos = maskBytes(h.mask, pos, c.maskBuf[:n])
			_, err = c.bw.Write(c.maskBuf[:n])
		}
	} else if err == nil {
		_, err = c.bw.Write(p)
	}
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		select {
		case <-c.done:
			c.writeErr = ErrClosed
		default:
			c.writeErr = fmt.Errorf("websocket: write: %w", err)
		}
		return c.writeErr
	}
	return nil
}
