package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/airlockrun/airlock/api"
)

// LogOptions selects what Logs delivers.
type LogOptions struct {
	// Follow keeps delivering new entries as they come, until the sandbox is terminated, fn
	// returns an error or ctx ends. Without it Logs delivers what there is and returns.
	Follow bool
	// Since resumes after the entry with this Seq; 0 starts with the first entry.
	Since int64
}

// Follow reconnects a dropped stream this many times in a row, as long as none brings anything.
const maxReconnects = 5

// Logs delivers a sandbox's log entries (output chunks and events), oldest first, to fn. An
// error from fn ends Logs and is returned as it is. With Follow, entries are streamed with
// server-sent events; a stream that drops is resumed after the last entry delivered (no entry is
// delivered twice), and Logs returns nil when the daemon ends the stream because the sandbox was
// terminated.
func (c *Client) Logs(ctx context.Context, id string, opts LogOptions, fn func(api.LogEntry) error) error {
	if !opts.Follow {
		var entries []api.LogEntry
		if err := c.call(ctx, request{method: http.MethodGet, path: sandboxPath(id, "/logs"), query: logQuery(opts.Since, false)}, &entries); err != nil {
			return err
		}
		for _, e := range entries {
			if err := fn(e); err != nil {
				return err
			}
		}
		return nil
	}
	f := &follower[api.LogEntry]{c: c, what: "logs of " + id, path: sandboxPath(id, "/logs"), event: "log", last: opts.Since, fn: fn,
		query: func(last int64) url.Values { return logQuery(last, true) },
		seq:   func(e api.LogEntry) int64 { return e.Seq },
		page: func(resp *http.Response) ([]api.LogEntry, error) {
			var entries []api.LogEntry
			err := decodeData(resp, &entries)
			return entries, err
		}}
	return f.follow(ctx)
}

func logQuery(since int64, follow bool) url.Values {
	q := url.Values{}
	if since > 0 {
		q.Set("since", strconv.FormatInt(since, 10))
	}
	if follow {
		q.Set("follow", "true")
	}
	return q
}

// errEnd is the daemon's end of a followed stream.
var errEnd = errors.New("end of stream")

// droppedError is a followed stream that ended without the daemon's "end": worth resuming.
type droppedError struct{ err error }

func (e *droppedError) Error() string { return "stream interrupted: " + e.err.Error() }
func (e *droppedError) Unwrap() error { return e.err }

// follower is one followed stream (logs, events) across reconnections: each reconnection
// resumes after the last item delivered, so none is delivered twice.
type follower[T any] struct {
	c         *Client
	what      string // for errors: "logs of sbx_…"
	path      string
	query     func(last int64) url.Values // the stream's query, resuming after last
	event     string                      // the SSE event name of an item
	seq       func(T) int64
	page      func(*http.Response) ([]T, error) // reads the answer of a daemon that does not stream
	last      int64                             // seq of the last item delivered, or where to start
	delivered int                               // items delivered so far
	connected bool                              // a stream was opened once, so a failure to connect is worth retrying
	fn        func(T) error
}

// follow streams until the daemon ends the stream (nil), fn fails, ctx ends, or reconnecting
// fails maxReconnects times in a row without bringing anything.
func (f *follower[T]) follow(ctx context.Context) error {
	failures := 0
	for {
		delivered := f.delivered
		err := f.stream(ctx)
		if errors.Is(err, errEnd) {
			return nil
		}
		if _, dropped := errors.AsType[*droppedError](err); !dropped {
			return err
		}
		if f.delivered > delivered {
			failures = 0
		}
		if failures++; failures > maxReconnects {
			return fmt.Errorf("airlock client: following %s: %w", f.what, err)
		}
		backoff := min(100*time.Millisecond<<(failures-1), time.Second)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
	}
}

// stream reads one SSE connection until it ends: errEnd, a *droppedError, or an error to return.
func (f *follower[T]) stream(ctx context.Context) error {
	resp, err := f.c.send(ctx, request{method: http.MethodGet, path: f.path, query: f.query(f.last), accept: "text/event-stream"})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if _, ok := errors.AsType[*Error](err); ok || !f.connected {
			return err // a refusal, or no daemon to begin with
		}
		return &droppedError{err}
	}
	defer resp.Body.Close()
	f.connected = true
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		// A daemon that does not stream answers with what it has.
		items, err := f.page(resp)
		if err != nil {
			return err
		}
		for _, it := range items {
			if err := f.deliver(it); err != nil {
				return err
			}
		}
		return errEnd
	}
	sr := newSSEReader(resp.Body)
	for {
		ev, err := sr.next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return &droppedError{err}
		}
		switch ev.event {
		case f.event, "message":
			var it T
			if err := json.Unmarshal(ev.data, &it); err != nil {
				return fmt.Errorf("airlock client: following %s: bad entry: %w", f.what, err)
			}
			if err := f.deliver(it); err != nil {
				return err
			}
		case "end":
			return errEnd
		case "error":
			return sseError(resp.StatusCode, ev.data)
		}
	}
}

// deliver hands it to fn unless a resumed stream repeats it.
func (f *follower[T]) deliver(it T) error {
	if f.delivered > 0 && f.seq(it) <= f.last {
		return nil
	}
	if err := f.fn(it); err != nil {
		return err
	}
	f.delivered++
	f.last = f.seq(it)
	return nil
}

// sseError reads an "error" event: an api.Error, an error envelope or plain text.
func sseError(status int, data []byte) error {
	var env api.Response[json.RawMessage]
	var ae api.Error
	switch {
	case json.Unmarshal(data, &env) == nil && env.Error != nil:
		ae = *env.Error
	case json.Unmarshal(data, &ae) == nil && ae.Message != "":
	default:
		ae = api.Error{Code: api.CodeInternal, Message: string(data)}
	}
	return &Error{StatusCode: status, Code: ae.Code, Message: ae.Message, Field: ae.Field, Status: ae.Status}
}

// sseEvent is one dispatched event of a text/event-stream.
type sseEvent struct {
	id, event string
	data      []byte
}

// maxSSELine bounds one line of an event stream.
const maxSSELine = 16 << 20

// sseReader parses a text/event-stream (the HTML "server-sent events" format): "field: value"
// lines, events separated by a blank line, data lines joined with "\n", comments ignored.
type sseReader struct {
	r *bufio.Reader
}

func newSSEReader(r io.Reader) *sseReader { return &sseReader{r: bufio.NewReaderSize(r, 64<<10)} }

// next returns the next event. An event cut off by the end of the stream is dropped, as the
// format requires; io.EOF then means the stream ended between events.
func (s *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	var data bytes.Buffer
	seen := false
	for {
		line, err := s.line()
		if err != nil {
			return sseEvent{}, err
		}
		if len(line) == 0 {
			if !seen {
				continue
			}
			ev.data = bytes.TrimSuffix(data.Bytes(), []byte("\n"))
			if ev.event == "" {
				ev.event = "message"
			}
			return ev, nil
		}
		if line[0] == ':' {
			continue // a comment, e.g. a keep-alive
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(name) {
		case "data":
			data.Write(value)
			data.WriteByte('\n')
		case "event":
			ev.event = string(value)
		case "id":
			ev.id = string(value)
		default:
			continue // retry and unknown fields
		}
		seen = true
	}
}

// line reads one line without its end (\n or \r\n).
func (s *sseReader) line() ([]byte, error) {
	var long []byte
	for {
		chunk, err := s.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long)+len(chunk) > maxSSELine {
				return nil, fmt.Errorf("event stream line longer than %d bytes", maxSSELine)
			}
			long = append(long, chunk...)
			continue
		}
		if err != nil {
			return nil, err // a line without its end is incomplete
		}
		if long != nil {
			chunk = append(long, chunk...)
		}
		chunk = bytes.TrimSuffix(chunk, []byte("\n"))
		return bytes.TrimSuffix(chunk, []byte("\r")), nil
	}
}
