package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"

	"github.com/airlockrun/airlock/api"
)

// Paths inside a sandbox are absolute ("/workspace/main.py"); the daemon also takes paths
// relative to the sandbox's workdir. The file methods stream: nothing holds a whole file in
// memory on the client.

func fileQuery(path string, extra ...string) url.Values {
	q := url.Values{"path": {path}}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	return q
}

// ReadFile opens a file inside a sandbox for reading. The caller must close it; reading it
// streams the file from the daemon.
func (c *Client) ReadFile(ctx context.Context, id, path string) (io.ReadCloser, error) {
	resp, err := c.send(ctx, request{method: http.MethodGet, path: sandboxPath(id, "/files"),
		query: fileQuery(path), accept: "application/octet-stream"})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// WriteFile creates or replaces a file inside a sandbox with what r yields, creating missing
// parent directories. mode holds the permission bits (0 means 0644). r is streamed to the daemon;
// when it is an *os.File, a *bytes.Reader or the like, its size is sent up front so that an
// upload over a limit fails before it starts.
func (c *Client) WriteFile(ctx context.Context, id, path string, r io.Reader, mode os.FileMode) (api.FileInfo, error) {
	if mode == 0 {
		mode = 0o644
	}
	q := fileQuery(path, "mode", fmt.Sprintf("%04o", mode.Perm()), "parents", "true")
	req := request{method: http.MethodPut, path: sandboxPath(id, "/files"), query: q, body: r,
		contentType: "application/octet-stream", length: sizeOf(r)}
	if req.body == nil {
		req.body = http.NoBody
	}
	var fi api.FileInfo
	err := c.call(ctx, req, &fi)
	return fi, err
}

// sizeOf is what is left of r, when r can tell; else 0 (unknown).
func sizeOf(r io.Reader) int64 {
	switch v := r.(type) {
	case interface{ Len() int }: // bytes.Reader, bytes.Buffer, strings.Reader
		return int64(v.Len())
	case *os.File:
		fi, err := v.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			return 0
		}
		off, err := v.Seek(0, io.SeekCurrent)
		if err != nil {
			return 0
		}
		return fi.Size() - off
	}
	return 0
}

// ListFiles lists a directory inside a sandbox.
func (c *Client) ListFiles(ctx context.Context, id, path string) ([]api.FileInfo, error) {
	var fis []api.FileInfo
	err := c.call(ctx, request{method: http.MethodGet, path: sandboxPath(id, "/files/list"), query: fileQuery(path)}, &fis)
	return fis, err
}

// StatFile describes one file inside a sandbox; a missing file is ErrNotFound.
func (c *Client) StatFile(ctx context.Context, id, path string) (api.FileInfo, error) {
	var fi api.FileInfo
	err := c.call(ctx, request{method: http.MethodGet, path: sandboxPath(id, "/files/stat"), query: fileQuery(path)}, &fi)
	return fi, err
}

// Mkdir creates a directory inside a sandbox, and its missing parents when parents is set.
func (c *Client) Mkdir(ctx context.Context, id, path string, parents bool) (api.FileInfo, error) {
	q := fileQuery(path)
	if parents {
		q.Set("parents", "true")
	}
	var fi api.FileInfo
	err := c.call(ctx, request{method: http.MethodPost, path: sandboxPath(id, "/files/mkdir"), query: q}, &fi)
	return fi, err
}

// RemoveFile removes a file or an empty directory inside a sandbox; with recursive, a directory
// and everything in it.
func (c *Client) RemoveFile(ctx context.Context, id, path string, recursive bool) error {
	q := fileQuery(path)
	if recursive {
		q.Set("recursive", "true")
	}
	return c.call(ctx, request{method: http.MethodDelete, path: sandboxPath(id, "/files"), query: q}, nil)
}
