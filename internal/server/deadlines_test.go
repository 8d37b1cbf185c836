package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLift: under server timeouts of 300 ms, a lifted request's work may take longer and its
// upload may too as long as it keeps coming; a stalled upload, and a plain body slower than
// the timeout in all, are cut.
func TestLift(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, c := range []struct {
		name   string
		stream bool          // the route's body is streamed (an upload)
		gaps   int           // the body is sent in this many pieces, 100 ms apart
		stall  time.Duration // then one more piece after this long
		work   time.Duration // the handler works this long before answering
		want   string        // the answer, or "" for none (cut)
	}{
		{name: "upload that keeps coming", stream: true, gaps: 8, want: "read 9"},
		{name: "upload that stalls", stream: true, gaps: 1, stall: 3 * timeout},
		{name: "plain body slower in all", gaps: 8},
		{name: "work longer than the write timeout", work: 3 * timeout, want: "read 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &Server{cfg: Config{ReadTimeout: timeout, WriteTimeout: timeout}}
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				r = s.lift(w, r, c.stream)
				b, err := io.ReadAll(r.Body)
				if err != nil {
					return // the connection is cut: nothing can be answered
				}
				time.Sleep(c.work)
				fmt.Fprintf(w, "read %d", len(b))
			}))
			srv.Config.ReadTimeout, srv.Config.WriteTimeout = timeout, timeout
			srv.Start()
			defer srv.Close()
			conn, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			n := c.gaps + 1
			if c.stall > 0 {
				n++
			}
			fmt.Fprintf(conn, "PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\nx", n)
			for range c.gaps {
				time.Sleep(100 * time.Millisecond)
				_, _ = conn.Write([]byte("x")) // the server may have cut it: the answer says
			}
			if c.stall > 0 {
				time.Sleep(c.stall)
				_, _ = conn.Write([]byte("x")) // the server may have cut it: the answer says
			}
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second)) // fails only on a closed conn, which the read says
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			var got string
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				got = string(b)
			}
			if got != c.want {
				t.Errorf("answer %q (%v), want %q", got, err, c.want)
			}
		})
	}
}

// TestCopyOut: a download larger than a chunk arrives whole to a client that reads it slowly,
// each chunk within the write timeout though the whole takes longer.
func TestCopyOut(t *testing.T) {
	// Each chunk is taken within the timeout with room for a busy host; the whole takes about
	// 2.4 s, more than twice the timeout.
	const timeout = time.Second
	s := &Server{cfg: Config{WriteTimeout: timeout}}
	body := strings.Repeat("0123456789abcdef", 8*downloadChunk/16+3)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = s.lift(w, r, false)
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		if err := s.copyOut(w, strings.NewReader(body)); err != nil {
			t.Errorf("copyOut: %v", err)
		}
	}))
	srv.Config.WriteTimeout = timeout
	srv.Start()
	defer srv.Close()
	// A small receive buffer, so that the download cannot sit in the sockets' buffers.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 64<<10) }); cerr != nil {
			return cerr
		}
		return err
	}}
	tr := &http.Transport{DialContext: d.DialContext}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var n int
	buf := make([]byte, downloadChunk/2)
	for {
		time.Sleep(150 * time.Millisecond) // 16 half chunks: about 2.4 s in all
		m, err := io.ReadFull(resp.Body, buf)
		n += m
		if err != nil {
			break
		}
	}
	if n != len(body) {
		t.Errorf("read %d bytes of %d", n, len(body))
	}
}
