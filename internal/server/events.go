package server

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/query"
	"github.com/airlockrun/airlock/internal/store"
)

// eventQuery documents the filters of both events routes.
var eventQuery = []param{
	{"type", "string", "keep events whose type starts with this, e.g. network. or exec.files"},
	{"executionId", "string", "keep events of this exec"},
	{"after", "integer", "the cursor: only events after it (the previous page's next, or the last seq seen)"},
	{"since", "string", "only events at or after this time (RFC 3339)"},
	{"until", "string", "only events before this time (RFC 3339)"},
	{"limit", "integer", "at most this many per page (default 1000, at most 10000)"},
	{"follow", "boolean", "stream the events as they are written (text/event-stream; resume with Last-Event-ID)"},
}

// events serves GET /api/v1/sandboxes/{id}/events and GET /api/v1/events: a page, or with
// follow=true a stream of SSE "event" messages (id: the event's seq).
func events(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	f, follow, err := eventFilter(r)
	if err != nil {
		return nil, err
	}
	if !follow {
		return s.m.Events(r.Context(), f)
	}
	// Refusals (an unknown sandbox, bad filters) are answered before the stream starts.
	if err := s.m.CheckEvents(r.Context(), f); err != nil {
		return nil, err
	}
	ctx, send, stop := s.startSSE(w, r, "airlock events")
	defer stop()
	f.Limit = 1000
	err = s.m.FollowEvents(ctx, f, func(e api.Event) error { return sendSSE(send, "event", e.Seq, e) })
	if err == nil && ctx.Err() == nil {
		_ = send("event: end\ndata: {}\n\n") // the client gone: nothing to answer
	}
	return nil, written
}

// eventFilter reads the events routes' query.
func eventFilter(r *http.Request) (store.EventFilter, bool, error) {
	q := r.URL.Query()
	f := store.EventFilter{SandboxID: r.PathValue("id"), TypePrefix: q.Get("type"), ExecutionID: q.Get("executionId")}
	if f.SandboxID == "" {
		f.SandboxID = q.Get("sandboxId")
	}
	var err error
	if f.After, err = query.Int(q, "after"); err != nil {
		return f, false, err
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(id), 10, 64)
		if err != nil || n < 0 {
			return f, false, errdefs.Invalid("Last-Event-ID", "must be an event's seq (got %q)", id)
		}
		f.After = max(f.After, n)
	}
	limit, err := query.Int(q, "limit")
	if err != nil {
		return f, false, err
	}
	if limit > 10000 {
		return f, false, errdefs.Invalid("limit", "must be at most 10000 (got %d)", limit)
	}
	f.Limit = int(limit)
	for _, t := range []struct {
		name string
		to   *int64
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := q.Get(t.name); v != "" {
			at, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return f, false, errdefs.Invalid(t.name, "must be a time in RFC 3339 form, e.g. 2026-11-21T10:00:00Z (got %q)", v)
			}
			*t.to = at.UnixNano()
		}
	}
	follow, err := boolQuery(r, "follow")
	return f, follow, err
}

// replay serves GET /api/v1/sandboxes/{id}/replay.
func replay(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	return s.m.Replay(r.Context(), r.PathValue("id"))
}
