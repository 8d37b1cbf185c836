package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/airlockrun/airlock/client"
)

const chunk = 1 << 20

// TestWriteFileStreams proves that an upload of unknown size is sent as it is read: the daemon
// sees the first chunk before the second has been produced.
func TestWriteFileStreams(t *testing.T) {
	firstSeen := make(chan struct{})
	received := make(chan int64, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadFull(r.Body, make([]byte, chunk)); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		close(firstSeen)
		n, _ := io.Copy(io.Discard, r.Body)
		received <- chunk + n
		_, _ = io.WriteString(w, `{"ok":true,"data":{"path":"/big","type":"file","size":`+strconv.FormatInt(chunk+n, 10)+`,"mode":"0600"}}`) // a failure is the client's to see
	}))
	defer srv.Close()
	c, _ := client.New(srv.URL, "tok", client.WithHTTPClient(srv.Client()))

	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write(bytes.Repeat([]byte("a"), chunk)) // a failure shows in what the daemon received
		select {
		case <-firstSeen:
		case <-time.After(10 * time.Second):
			pw.CloseWithError(errors.New("the daemon never saw the first chunk: the upload is buffered"))
			return
		}
		for range 7 {
			_, _ = pw.Write(bytes.Repeat([]byte("b"), chunk)) // likewise
		}
		pw.Close()
	}()
	fi, err := c.WriteFile(context.Background(), "sbx_1", "/big", pr, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if got := <-received; got != 8*chunk || fi.Size != 8*chunk || fi.Mode != "0600" {
		t.Errorf("daemon got %d bytes, FileInfo %+v", got, fi)
	}
}

// TestReadFileStreams proves that a download is handed over as it arrives: the caller reads the
// first chunk while the daemon still holds back the rest.
func TestReadFileStreams(t *testing.T) {
	firstRead := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("path") != "/big" {
			http.Error(w, "path", 400)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(bytes.Repeat([]byte("a"), chunk)) // a failure shows in what the client read
		w.(http.Flusher).Flush()
		select {
		case <-firstRead:
		case <-time.After(10 * time.Second):
			return // the download is buffered: the client sees a short file
		}
		for range 7 {
			_, _ = w.Write(bytes.Repeat([]byte("b"), chunk)) // likewise
		}
	}))
	defer srv.Close()
	c, _ := client.New(srv.URL, "tok", client.WithHTTPClient(srv.Client()))
	rc, err := c.ReadFile(context.Background(), "sbx_1", "/big")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.ReadFull(rc, make([]byte, chunk)); err != nil {
		t.Fatal(err)
	}
	close(firstRead)
	n, err := io.Copy(io.Discard, rc)
	if err != nil || n != 7*chunk {
		t.Fatalf("rest of the download: %d bytes, %v", n, err)
	}
}

func TestReadFileError(t *testing.T) {
	_, c := newRecorder(t, http.StatusNotFound, `{"ok":false,"error":{"code":"not_found","message":"/x: no such file"}}`)
	if _, err := c.ReadFile(context.Background(), "sbx_1", "/x"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("err %v", err)
	}
}

// TestWriteFileLength checks that a body of known size is announced, so that the daemon can
// refuse one over its limit before it is sent.
func TestWriteFileLength(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("0123456789"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(3, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		r    io.Reader
		want int64 // -1: chunked
	}{
		{"bytes", bytes.NewReader([]byte("abc")), 3},
		{"file from its offset", f, 7},
		{"pipe", io.MultiReader(bytes.NewReader([]byte("abc"))), -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := make(chan int64, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body) // what is checked is the length the client announced
				got <- r.ContentLength
				_, _ = io.WriteString(w, `{"ok":true,"data":{}}`) // a failure is the client's to see
			}))
			defer srv.Close()
			cl, _ := client.New(srv.URL, "tok", client.WithHTTPClient(srv.Client()))
			if _, err := cl.WriteFile(context.Background(), "sbx_1", "/f", c.r, 0); err != nil {
				t.Fatal(err)
			}
			if n := <-got; n != c.want {
				t.Errorf("Content-Length %d, want %d", n, c.want)
			}
		})
	}
}

func TestWriteFileTooLarge(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		_, _ = io.WriteString(w, `{"ok":false,"error":{"code":"payload_too_large","message":"over the 5120 MiB of the writable layer"}}`) // a failure is the client's to see
	}))
	defer srv.Close()
	c, _ := client.New(srv.URL, "tok", client.WithHTTPClient(srv.Client()))
	_, err := c.WriteFile(context.Background(), "sbx_1", "/f", io.LimitReader(zeros{}, 64<<20), 0)
	if !errors.Is(err, client.ErrPayloadTooLarge) {
		t.Fatalf("err %v", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }
