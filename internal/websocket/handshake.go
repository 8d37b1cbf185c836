package websocket

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// acceptGUID is the fixed GUID of RFC 6455 §1.3 that proves the server speaks WebSocket.
const acceptGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// maxErrorBody caps how much of a refused handshake's body Dial keeps.
const maxErrorBody = 1 << 20

// bufSize is the size of the buffered reader and writer of a client connection.
const bufSize = 4096

// acceptKey computes Sec-WebSocket-Accept for a Sec-WebSocket-Key.
func acceptKey(key string) string {
	sum := sha1.Sum([]byte(key + acceptGUID))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// headerHasToken reports whether the comma-separated header name of h, over
// all its lines, contains token, ignoring case.
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// checkUpgrade validates the opening handshake of r. It returns 0 and "" if r
// is acceptable, or the HTTP status and message to refuse it with.
func checkUpgrade(r *http.Request) (int, string) {
	switch {
	case r.Method != http.MethodGet:
		return http.StatusBadRequest, "websocket: the upgrade request must use GET, not " + r.Method
	case r.ProtoMajor != 1:
		// Upgrade is an HTTP/1.1 mechanism; RFC 8441 (over HTTP/2) is not supported.
		return http.StatusBadRequest, "websocket: the upgrade request must use HTTP/1.1"
	case !headerHasToken(r.Header, "Upgrade", "websocket"):
		return http.StatusBadRequest, `websocket: the request lacks "Upgrade: websocket"`
	case !headerHasToken(r.Header, "Connection", "upgrade"):
		return http.StatusBadRequest, `websocket: the request's Connection header lacks "upgrade"`
	case r.Header.Get("Sec-WebSocket-Version") != "13":
		// RFC 6455 §4.4: answer an unsupported version with 426 and the ones we speak.
		return http.StatusUpgradeRequired, "websocket: unsupported Sec-WebSocket-Version, want 13"
	}
	key := r.Header.Get("Sec-WebSocket-Key")
	if key == "" {
		return http.StatusBadRequest, "websocket: the request lacks Sec-WebSocket-Key"
	}
	if b, err := base64.StdEncoding.DecodeString(key); err != nil || len(b) != 16 {
		return http.StatusBadRequest, "websocket: Sec-WebSocket-Key must be 16 bytes in base64"
	}
	return 0, ""
}

// Accept upgrades an HTTP request to a WebSocket connection (server side). It
// validates the handshake (GET, Upgrade: websocket, Connection containing
// upgrade, Sec-WebSocket-Version: 13 and a well-formed Sec-WebSocket-Key) and
// otherwise answers 400, or 426 for a wrong version, with a plain-text message
// and returns an error wrapping ErrBadHandshake. Headers the handler set on w
// are sent with the 101 answer. On success w must not be used again.
func Accept(w http.ResponseWriter, r *http.Request) (*Conn, error) {
	if status, msg := checkUpgrade(r); status != 0 {
		if status == http.StatusUpgradeRequired {
			w.Header().Set("Upgrade", "websocket")
			w.Header().Set("Sec-WebSocket-Version", "13")
		}
		http.Error(w, msg, status)
		return nil, fmt.Errorf("%w: %s", ErrBadHandshake, strings.TrimPrefix(msg, "websocket: "))
	}

	nc, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "websocket: this connection cannot be upgraded", http.StatusInternalServerError)
		return nil, fmt.Errorf("websocket: hijack: %w", err)
	}
	// The server may leave its own timeouts on a hijacked connection; streams
	// are long-lived, so clear them and leave deadlines to the caller.
	_ = nc.SetDeadline(time.Time{})

	var b bytes.Buffer
	b.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n")
	b.WriteString("Sec-WebSocket-Accept: " + acceptKey(r.Header.Get("Sec-WebSocket-Key")) + "\r\n")
	extra := w.Header().Clone()
	for _, k := range []string{"Upgrade", "Connection", "Sec-WebSocket-Accept", "Content-Length", "Transfer-Encoding"} {
		extra.Del(k)
	}
	_ = extra.Write(&b) // writes to a bytes.Buffer cannot fail
	b.WriteString("\r\n")
	if _, err := nc.Write(b.Bytes()); err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("websocket: write handshake: %w", err)
	}
	// brw.Reader may already hold frames the client sent right after its
	// request, so it must be the reader of the connection.
	return newConn(nc, brw.Reader, brw.Writer, false), nil
}

// Dial opens a client connection to a ws:// or wss:// URL; http:// and https://
// are accepted as synonyms. h holds extra request headers such as
// Authorization; tlsConfig, which may be nil, is used for wss. ctx bounds the
// dial and the handshake only. No proxy is used.
//
// If the server answers with a status other than 101, Dial returns that
// response, its body read into memory (up to 1 MiB) so it stays readable, and
// an error wrapping ErrBadHandshake that names the status.
func Dial(ctx context.Context, rawURL string, h http.Header, tlsConfig *tls.Config) (*Conn, *http.Response, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, fmt.Errorf("websocket: dial: %w", err)
	}
	var secure bool
	switch u.Scheme {
	case "ws", "http":
	case "wss", "https":
		secure = true
	default:
		return nil, nil, fmt.Errorf("websocket: dial %s: unsupported scheme %q", u.Redacted(), u.Scheme)
	}
	if u.Host == "" {
		return nil, nil, fmt.Errorf("websocket: dial %s: missing host", u.Redacted())
	}
	addr := u.Host
	if u.Port() == "" {
		port := "80"
		if secure {
			port = "443"
		}
		addr = net.JoinHostPort(u.Hostname(), port)
	}

	var nc net.Conn
	if secure {
		cfg := tlsConfig.Clone()
		if cfg == nil {
			cfg = &tls.Config{}
		}
		if cfg.ServerName == "" {
			cfg.ServerName = u.Hostname()
		}
		// The upgrade exists only in HTTP/1.1; never let ALPN pick h2.
		cfg.NextProtos = []string{"http/1.1"}
		nc, err = (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", addr)
	} else {
		var d net.Dialer
		nc, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("websocket: dial %s: %w", u.Redacted(), err)
	}

	// Cancelling ctx must interrupt the handshake; an expired deadline does.
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	c, resp, err := clientHandshake(nc, u, h)
	if !stop() {
		// ctx ended during the handshake; even if it succeeded, the deadline
		// now set has made the connection unusable.
		_ = nc.Close()
		return nil, resp, fmt.Errorf("websocket: dial %s: %w", u.Redacted(), ctx.Err())
	}
	if err != nil {
		_ = nc.Close()
		return nil, resp, fmt.Errorf("websocket: dial %s: %w", u.Redacted(), err)
	}
	return c, resp, nil
}

// clientHandshake sends the opening handshake on nc and checks the answer.
func clientHandshake(nc net.Conn, u *url.URL, h http.Header) (*Conn, *http.Response, error) {
	var nonce [16]byte
	_, _ = rand.Read(nonce[:]) // crypto/rand never fails
	key := base64.StdEncoding.EncodeToString(nonce[:])

	req := &http.Request{
		Method:     http.MethodGet,
		URL:        &url.URL{Path: u.Path, RawPath: u.RawPath, RawQuery: u.RawQuery},
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     h.Clone(),
		Host:       u.Host,
	}
	if req.Header == nil {
		req.Header = make(http.Header)
	}
	if host := req.Header.Get("Host"); host != "" {
		req.Host = host
	}
	if u.User != nil && req.Header.Get("Authorization") == "" {
		pw, _ := u.User.Password()
		req.SetBasicAuth(u.User.Username(), pw)
	}
	// Set last so the caller's headers cannot break the handshake.
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Sec-WebSocket-Key", key)
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Del("Sec-WebSocket-Extensions") // we implement none

	bw := bufio.NewWriterSize(nc, bufSize)
	if err := req.Write(bw); err != nil {
		return nil, nil, fmt.Errorf("write handshake: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return nil, nil, fmt.Errorf("write handshake: %w", err)
	}
	br := bufio.NewReaderSize(nc, bufSize)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, nil, fmt.Errorf("read handshake answer: %w", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		// The connection is closed on return; keep the body (often a JSON
		// error) readable for the caller.
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		_ = resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		return nil, resp, fmt.Errorf("%w: server answered %s", ErrBadHandshake, resp.Status)
	}
	switch {
	case !headerHasToken(resp.Header, "Upgrade", "websocket"):
		return nil, resp, fmt.Errorf(`%w: answer lacks "Upgrade: websocket"`, ErrBadHandshake)
	case !headerHasToken(resp.Header, "Connection", "upgrade"):
		return nil, resp, fmt.Errorf(`%w: answer's Connection header lacks "upgrade"`, ErrBadHandshake)
	case resp.Header.Get("Sec-WebSocket-Accept") != acceptKey(key):
		return nil, resp, fmt.Errorf("%w: wrong Sec-WebSocket-Accept", ErrBadHandshake)
	case resp.Header.Get("Sec-WebSocket-Extensions") != "":
		return nil, resp, fmt.Errorf("%w: server chose an extension we did not offer", ErrBadHandshake)
	}
	return newConn(nc, br, bw, true), resp, nil
}
