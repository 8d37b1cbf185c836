package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/internal/netpolicy"
)

// rawExchange sends req on a new connection to addr and returns a reader of the answers.
func rawExchange(t *testing.T, addr, req string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	return c, bufio.NewReader(c)
}

func readResponse(t *testing.T, br *bufio.Reader, method string) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

var allowedEvent = netpolicy.Event{Proto: ProtoHTTP, Name: "allowed.test", Port: 80, Allow: true, Rule: netpolicy.RuleAllowlist, Addr: loopback}

func TestExpectContinue(t *testing.T) {
	e := newEnv(t, restricted(testDomains...))
	const head = "POST http://%s/ HTTP/1.1\r\nHost: %[1]s\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"

	c, br := rawExchange(t, e.explicit, fmt.Sprintf(head, "allowed.test"))
	if resp, _ := readResponse(t, br, "POST"); resp.StatusCode != http.StatusContinue {
		t.Fatalf("status %d, want 100", resp.StatusCode)
	}
	if _, err := io.WriteString(c, "hello"); err != nil {
		t.Fatal(err)
	}
	if resp, body := readResponse(t, br, "POST"); resp.StatusCode != 200 || !strings.HasSuffix(body, "body=5") {
		t.Errorf("got %d %q", resp.StatusCode, body)
	}
	checkEvent(t, e.sb.take1(t), allowedEvent)

	// Denied: answered at once, without the body, and the connection closes.
	_, br = rawExchange(t, e.explicit, fmt.Sprintf(head, "evil.test"))
	resp, _ := readResponse(t, br, "POST")
	if resp.StatusCode != 403 || !resp.Close {
		t.Errorf("status %d, close %t; want 403 and close", resp.StatusCode, resp.Close)
	}
	checkEvent(t, e.sb.take1(t), netpolicy.Event{Proto: ProtoHTTP, Name: "evil.test", Port: 80, Rule: netpolicy.RuleNotListed})
}

func TestUpgrade(t *testing.T) {
	e := newEnv(t, restricted(testDomains...))
	e.route("127.0.0.1:80", httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "no upgrade", 400)
			return
		}
		c, bw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		// The test's client checks what comes back.
		_, _ = bw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		_ = bw.Flush()
		_, _ = io.Copy(c, bw)
	})))
	c, br := rawExchange(t, e.transHTTP, "GET / HTTP/1.1\r\nHost: allowed.test\r\nConnection: keep-alive, Upgrade\r\nUpgrade: echo\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 101 || resp.Header.Get("Upgrade") != "echo" {
		t.Fatalf("got %s %v", resp.Status, resp.Header)
	}
	if _, err := io.WriteString(c, "ping"); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(br, got); err != nil || string(got) != "ping" {
		t.Fatalf("echo %q, %v", got, err)
	}
	c.Close()
	ev := e.sb.take1(t)
	checkEvent(t, ev, allowedEvent)
	if ev.BytesOut != 4 || ev.BytesIn != 4 {
		t.Errorf("bytes out %d in %d, want 4 each", ev.BytesOut, ev.BytesIn)
	}
}

func TestResponseFraming(t *testing.T) {
	e := newEnv(t, restricted(testDomains...))
	e.route("127.0.0.1:80", httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/stream": // no Content-Length: chunked to HTTP/1.1 upstream
			// The test's client checks what arrives.
			_, _ = io.WriteString(w, "part one,")
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, "part two")
		case "/nocontent":
			w.WriteHeader(http.StatusNoContent)
		case "/trailer":
			w.Header().Set("Trailer", "X-Sum")
			_, _ = io.WriteString(w, "data")
			w.Header().Set("X-Sum", "42")
		default:
			n, _ := io.Copy(io.Discard, r.Body)
			fmt.Fprintf(w, "%s %d", r.Method, n)
		}
	})))

	t.Run("kept alive across HEAD, 204 and chunked", func(t *testing.T) {
		c, br := rawExchange(t, e.explicit, "HEAD http://allowed.test/x HTTP/1.1\r\nHost: allowed.test\r\n\r\n"+
			"GET http://allowed.test/nocontent HTTP/1.1\r\nHost: allowed.test\r\n\r\n"+
			"GET http://allowed.test/stream HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
		if resp, body := readResponse(t, br, "HEAD"); resp.StatusCode != 200 || body != "" || resp.ContentLength != 6 {
			t.Errorf("HEAD: %d %q length %d", resp.StatusCode, body, resp.ContentLength)
		}
		if resp, body := readResponse(t, br, "GET"); resp.StatusCode != 204 || body != "" {
			t.Errorf("204: %d %q", resp.StatusCode, body)
		}
		resp, body := readResponse(t, br, "GET")
		if body != "part one,part two" || len(resp.TransferEncoding) == 0 {
			t.Errorf("stream: %q %v", body, resp.TransferEncoding)
		}
		c.Close()
		e.sb.take(t, 3)
	})
	t.Run("trailers", func(t *testing.T) {
		_, br := rawExchange(t, e.explicit, "GET http://allowed.test/trailer HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
		resp, body := readResponse(t, br, "GET")
		if body != "data" || resp.Trailer.Get("X-Sum") != "42" {
			t.Errorf("body %q trailer %v", body, resp.Trailer)
		}
		checkEvent(t, e.sb.take1(t), allowedEvent)
	})
	t.Run("HTTP/1.0 gets the end of the connection", func(t *testing.T) {
		_, br := rawExchange(t, e.transHTTP, "GET /stream HTTP/1.0\r\nHost: allowed.test\r\n\r\n")
		resp, body := readResponse(t, br, "GET")
		if body != "part one,part two" || len(resp.TransferEncoding) != 0 || !resp.Close {
			t.Errorf("body %q, encoding %v, close %t", body, resp.TransferEncoding, resp.Close)
		}
		checkEvent(t, e.sb.take1(t), allowedEvent)
	})
	t.Run("chunked upload", func(t *testing.T) {
		_, br := rawExchange(t, e.explicit, "POST http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: chunked\r\n\r\n"+
			"3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n")
		if resp, body := readResponse(t, br, "POST"); resp.StatusCode != 200 || body != "POST 7" {
			t.Errorf("got %d %q", resp.StatusCode, body)
		}
		ev := e.sb.take1(t)
		checkEvent(t, ev, allowedEvent)
		if ev.BytesOut != 7 {
			t.Errorf("bytes out %d", ev.BytesOut)
		}
	})
	t.Run("hop-by-hop headers dropped", func(t *testing.T) {
		headers := make(chan http.Header, 1)
		e.route("127.0.0.1:80", httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			headers <- r.Header.Clone()
			w.Header().Set("Keep-Alive", "timeout=5")
			w.Header().Set("X-Kept", "yes")
		})))
		_, br := rawExchange(t, e.explicit, "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n"+
			"Proxy-Authorization: Basic eDp5\r\nProxy-Connection: keep-alive\r\nConnection: X-Private\r\nX-Private: 1\r\nX-Public: 1\r\n\r\n")
		resp, _ := readResponse(t, br, "GET")
		got := <-headers
		for _, h := range []string{"Proxy-Authorization", "Proxy-Connection", "X-Private"} {
			if got.Get(h) != "" {
				t.Errorf("%s forwarded", h)
			}
		}
		if got.Get("X-Public") != "1" || got.Get("User-Agent") != "" {
			t.Errorf("request headers %v", got)
		}
		if resp.Header.Get("Keep-Alive") != "" || resp.Header.Get("X-Kept") != "yes" {
			t.Errorf("response headers %v", resp.Header)
		}
		e.sb.take1(t)
	})
}
