package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
)

// sseDaemon answers the logs route with one scripted event stream per connection.
type sseDaemon struct {
	mu      sync.Mutex // guards queries
	queries []string
	streams []string // the body of each connection in turn; the last one repeats
}

func (d *sseDaemon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	n := len(d.queries)
	d.queries = append(d.queries, r.URL.RawQuery)
	d.mu.Unlock()
	if r.Header.Get("Accept") != "text/event-stream" {
		http.Error(w, "want SSE", http.StatusNotAcceptable)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	_, _ = io.WriteString(w, d.streams[min(n, len(d.streams)-1)]) // a failure is the client's to see
}

func (d *sseDaemon) asked() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.queries...)
}

func entry(seq int64, data string) string {
	return fmt.Sprintf("id: %d\nevent: log\ndata: {\"seq\":%d,\"stream\":\"stdout\",\"data\":%q}\n\n", seq, seq, data)
}

func follow(t *testing.T, d *sseDaemon, since int64) ([]api.LogEntry, error) {
	t.Helper()
	srv := httptest.NewServer(d)
	defer srv.Close()
	c, _ := client.New(srv.URL, "tok", client.WithHTTPClient(srv.Client()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []api.LogEntry
	err := c.Logs(ctx, "sbx_1", client.LogOptions{Follow: true, Since: since}, func(e api.LogEntry) error {
		got = append(got, e)
		return nil
	})
	return got, err
}

func seqs(es []api.LogEntry) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "%d:%s ", e.Seq, e.Data)
	}
	return b.String()
}

func TestLogsFollowEnds(t *testing.T) {
	// The entry of seq 2 has its JSON split over two data lines.
	d := &sseDaemon{streams: []string{": hello\n\n" + entry(1, "a") +
		"id: 2\nevent: log\ndata: {\"seq\":2,\"stream\":\"stdout\",\ndata: \"data\":\"b\\nc\"}\n\n" +
		"event: end\ndata: {}\n\n" + entry(3, "after the end")}}
	got, err := follow(t, d, 0)
	if err != nil {
		t.Fatal(err)
	}
	if s := seqs(got); s != "1:a 2:b\nc " {
		t.Errorf("entries %q", s)
	}
	if q := d.asked(); len(q) != 1 || q[0] != "follow=true" {
		t.Errorf("requests %q, want one with follow=true (no reconnect after the end)", q)
	}
}

func TestLogsFollowResumes(t *testing.T) {
	d := &sseDaemon{streams: []string{
		entry(5, "a") + entry(6, "b") + "id: 7\nevent: log\ndata: {\"seq\":7", // dropped mid-event
		entry(6, "b") + entry(7, "c") + "event: end\n\n",                      // the daemon repeats 6
	}}
	got, err := follow(t, d, 4)
	if err != nil {
		t.Fatal(err)
	}
	if s := seqs(got); s != "5:a 6:b 7:c " {
		t.Errorf("entries %q", s)
	}
	if q := d.asked(); len(q) != 2 || q[0] != "follow=true&since=4" || q[1] != "follow=true&since=6" {
		t.Errorf("requests %q", q)
	}
}

func TestLogsFollowGivesUp(t *testing.T) {
	if testing.Short() {
		t.Skip("waits through the reconnection backoff")
	}
	d := &sseDaemon{streams: []string{""}}
	_, err := follow(t, d, 0)
	if err == nil || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a stream that always drops: %v", err)
	}
	if n := len(d.asked()); n != 6 {
		t.Errorf("%d connections, want 1 and 5 reconnections", n)
	}
}

func TestLogsFollowErrorEvent(t *testing.T) {
	d := &sseDaemon{streams: []string{entry(1, "a") + "event: error\ndata: {\"code\":\"internal\",\"message\":\"log store broke\"}\n\n"}}
	got, err := follow(t, d, 0)
	if e, ok := errors.AsType[*client.Error](err); !ok || e.Message != "log store broke" || len(got) != 1 {
		t.Fatalf("error event: %v, %d entries", err, len(got))
	}
}

func TestLogsFollowNotFound(t *testing.T) {
	rec, c := newRecorder(t, http.StatusNotFound, `{"ok":false,"error":{"code":"not_found","message":"no sandbox"}}`)
	err := c.Logs(context.Background(), "sbx_x", client.LogOptions{Follow: true}, func(api.LogEntry) error { return nil })
	if !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("err %v", err)
	}
	if n := len(rec.reqs); n != 1 {
		t.Errorf("%d requests, want no reconnection after a refusal", n)
	}
}

func TestLogsStopsOnCallbackError(t *testing.T) {
	d := &sseDaemon{streams: []string{entry(1, "a") + entry(2, "b") + "event: end\n\n"}}
	srv := httptest.NewServer(d)
	defer srv.Close()
	c, _ := client.New(srv.URL, "tok", client.WithHTTPClient(srv.Client()))
	stop := errors.New("enough")
	n := 0
	err := c.Logs(context.Background(), "sbx_1", client.LogOptions{Follow: true}, func(api.LogEntry) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("Logs = %v after %d entries, want the callback's error after 1", err, n)
	}
}

func TestLogsFollowCancel(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, entry(1, "a")) // a failure is the client's to see
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	c, _ := client.New(srv.URL, "tok", client.WithHTTPClient(srv.Client()))
	ctx, cancel := context.WithCancel(context.Background())
	err := c.Logs(ctx, "sbx_1", client.LogOptions{Follow: true}, func(api.LogEntry) error { cancel(); return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Logs after cancel = %v", err)
	}
}

func TestLogsList(t *testing.T) {
	_, c := newRecorder(t, http.StatusOK, `{"ok":true,"data":[{"seq":1,"stream":"stdout","data":"x"},{"seq":2,"stream":"event","event":{"type":"sandbox.status"}}]}`)
	var got []api.LogEntry
	err := c.Logs(context.Background(), "sbx_1", client.LogOptions{}, func(e api.LogEntry) error { got = append(got, e); return nil })
	if err != nil || len(got) != 2 || got[1].Event == nil || got[1].Event.Type != api.EventSandboxStatus {
		t.Fatalf("Logs = %v, %+v", err, got)
	}
}

func TestLogsFollowNoDaemon(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c, _ := client.New(url, "tok")
	start := time.Now()
	err := c.Logs(context.Background(), "sbx_1", client.LogOptions{Follow: true}, func(api.LogEntry) error { return nil })
	if err == nil || errors.As(err, new(*client.Error)) || time.Since(start) > time.Second {
		t.Fatalf("no daemon: %v after %v, want the transport error at once", err, time.Since(start))
	}
}
