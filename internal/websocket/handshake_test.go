package websocket

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestAcceptKey(t *testing.T) {
	// The worked example of RFC 6455 §1.3.
	if got, want := acceptKey(testKey), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="; got != want {
		t.Errorf("acceptKey = %q, want %q", got, want)
	}
}

func TestAcceptRefusesBadHandshakes(t *testing.T) {
	valid := func() http.Header {
		return http.Header{
			"Upgrade":               {"websocket"},
			"Connection":            {"keep-alive, Upgrade"},
			"Sec-Websocket-Version": {"13"},
			"Sec-Websocket-Key":     {testKey},
		}
	}
	tests := []struct {
		name       string
		method     string
		edit       func(http.Header)
		wantStatus int
		wantBody   string
	}{
		{"POST", http.MethodPost, func(http.Header) {}, 400, "must use GET"},
		{"no Upgrade", "GET", func(h http.Header) { h.Del("Upgrade") }, 400, "Upgrade: websocket"},
		{"Upgrade to something else", "GET", func(h http.Header) { h.Set("Upgrade", "h2c") }, 400, "Upgrade: websocket"},
		{"Connection without upgrade", "GET", func(h http.Header) { h.Set("Connection", "keep-alive") }, 400, "Connection"},
		{"old version", "GET", func(h http.Header) { h.Set("Sec-WebSocket-Version", "8") }, 426, "want 13"},
		{"no version", "GET", func(h http.Header) { h.Del("Sec-WebSocket-Version") }, 426, "want 13"},
		{"no key", "GET", func(h http.Header) { h.Del("Sec-WebSocket-Key") }, 400, "lacks Sec-WebSocket-Key"},
		{"key not 16 bytes", "GET", func(h http.Header) { h.Set("Sec-WebSocket-Key", "c2hvcnQ=") }, 400, "16 bytes"},
		{"key not base64", "GET", func(h http.Header) { h.Set("Sec-WebSocket-Key", "!!!") }, 400, "16 bytes"},
	}
	acceptErr := make(chan error, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := Accept(w, r)
		if err == nil {
			_ = c.CloseNow()
		}
		acceptErr <- err
	}))
	defer ts.Close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, ts.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header = valid()
			tt.edit(req.Header)
			resp, err := ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus || !strings.Contains(string(body), tt.wantBody) {
				t.Errorf("got %d %q, want %d containing %q", resp.StatusCode, body, tt.wantStatus, tt.wantBody)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
				t.Errorf("Content-Type = %q, want text/plain", ct)
			}
			if tt.wantStatus == 426 && resp.Header.Get("Sec-WebSocket-Version") != "13" {
				t.Error("426 answer lacks Sec-WebSocket-Version: 13")
			}
			if err := <-acceptErr; !errors.Is(err, ErrBadHandshake) {
				t.Errorf("Accept error = %v, want ErrBadHandshake", err)
			}
		})
	}
}

func TestAcceptWithoutHijacker(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	r.Header = http.Header{"Upgrade": {"websocket"}, "Connection": {"Upgrade"},
		"Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {testKey}}
	w := httptest.NewRecorder() // cannot hijack
	if _, err := Accept(w, r); err == nil {
		t.Fatal("Accept succeeded on a ResponseWriter that cannot hijack")
	}
	if w.Code != http.StatusInternalServerError {
		t.Errorf("status = %d, want 500", w.Code)
	}
}

// TestDialRefused checks that a refused handshake's response comes back with a
// readable body, so the SDK can decode the API's JSON error.
func TestDialRefused(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
	}{
		{"401 JSON", http.StatusUnauthorized, `{"error":"unauthenticated"}`},
		{"404 JSON", http.StatusNotFound, `{"error":"no such sandbox"}`},
		{"200 from a plain endpoint", http.StatusOK, `{"ok":true}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body) // the client checks what arrives
			}))
			defer ts.Close()
			c, resp, err := Dial(context.Background(), ts.URL, nil, nil)
			if c != nil || !errors.Is(err, ErrBadHandshake) {
				t.Fatalf("Dial = %v, %v; want ErrBadHandshake", c, err)
			}
			if !strings.Contains(err.Error(), http.StatusText(tt.status)) {
				t.Errorf("error %q does not name the status", err)
			}
			if resp == nil || resp.StatusCode != tt.status {
				t.Fatalf("response = %v, want status %d", resp, tt.status)
			}
			var v map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
				t.Errorf("decode body: %v", err)
			}
			resp.Body.Close()
		})
	}
}

func TestDialSchemesAndHeaders(t *testing.T) {
	handler := func(t *testing.T) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if got := r.Header.Get("Authorization"); got != "Bearer k" {
				http.Error(w, "bad auth "+got, http.StatusUnauthorized)
				return
			}
			w.Header().Set("X-Request-Id", "r1") // must reach the client with the 101
			c, err := Accept(w, r)
			if err != nil {
				t.Errorf("Accept: %v", err)
				return
			}
			defer func() { _ = c.CloseNow() }()
			_ = echo(c)
		})
	}
	plain := httptest.NewServer(handler(t))
	defer plain.Close()
	secure := httptest.NewTLSServer(handler(t))
	defer secure.Close()
	tlsConfig := secure.Client().Transport.(*http.Transport).TLSClientConfig

	tests := []struct {
		name string
		url  string
	}{
		{"ws", "ws" + strings.TrimPrefix(plain.URL, "http") + "/path?q=1"},
		{"http", plain.URL},
		{"wss", "wss" + strings.TrimPrefix(secure.URL, "https")},
		{"https", secure.URL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c, resp, err := Dial(ctx, tt.url, http.Header{"Authorization": {"Bearer k"}}, tlsConfig)
			if err != nil {
				t.Fatalf("Dial: %v", err)
			}
			if got := resp.Header.Get("X-Request-Id"); got != "r1" {
				t.Errorf("X-Request-Id = %q, want r1", got)
			}
			if err := c.WriteMessage(Text, []byte("ping")); err != nil {
				t.Fatal(err)
			}
			if _, m, err := c.ReadMessage(); err != nil || string(m) != "ping" {
				t.Errorf("ReadMessage = %q, %v", m, err)
			}
			if err := c.Close(CloseNormal, ""); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}

func TestDialErrors(t *testing.T) {
	// silent accepts TCP connections and never answers.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			nc, err := silent.Accept()
			if err != nil {
				return
			}
			defer nc.Close()
		}
	}()
	silentURL := "ws://" + silent.Addr().String()

	tests := []struct {
		name    string
		url     string
		timeout time.Duration
		wantErr error // nil: any error
	}{
		{"handshake deadline", silentURL, 100 * time.Millisecond, context.DeadlineExceeded},
		{"unsupported scheme", "ftp://example.com", time.Second, nil},
		{"missing host", "ws:///path", time.Second, nil},
		{"malformed URL", "ws://[::1", time.Second, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tt.timeout)
			defer cancel()
			start := time.Now()
			c, _, err := Dial(ctx, tt.url, nil, nil)
			if c != nil || err == nil {
				t.Fatalf("Dial succeeded")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error = %v, want %v", err, tt.wantErr)
			}
			if took := time.Since(start); took > tt.timeout+time.Second {
				t.Errorf("Dial took %v, past its %v deadline", took, tt.timeout)
			}
		})
	}
}
