package client

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestSSEReader(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     []sseEvent
		err      error // after the events
	}{
		{"one event", "id: 1\nevent: log\ndata: {\"seq\":1}\n\n",
			[]sseEvent{{id: "1", event: "log", data: []byte(`{"seq":1}`)}}, io.EOF},
		{"multi-line data joined with newlines", "event: log\ndata: {\"seq\":\ndata: 2}\n\n",
			[]sseEvent{{event: "log", data: []byte("{\"seq\":\n2}")}}, io.EOF},
		{"CRLF line ends, no space after the colon", "event:log\r\ndata:x\r\n\r\n",
			[]sseEvent{{event: "log", data: []byte("x")}}, io.EOF},
		{"comments and blank lines between events are skipped", ": keep-alive\n\n\nevent: log\ndata: a\n\n: ping\n\nevent: end\n\n",
			[]sseEvent{{event: "log", data: []byte("a")}, {event: "end"}}, io.EOF},
		{"no event name is a message", "data: hi\n\n",
			[]sseEvent{{event: "message", data: []byte("hi")}}, io.EOF},
		{"only one leading space is stripped", "data:  two\n\n",
			[]sseEvent{{event: "message", data: []byte(" two")}}, io.EOF},
		{"an event cut off by the end is dropped", "event: log\ndata: a\n\nevent: log\ndata: b\n",
			[]sseEvent{{event: "log", data: []byte("a")}}, io.EOF},
		{"a line cut off by the end is dropped", "event: log\ndata: a",
			nil, io.EOF},
		{"retry and unknown fields are ignored", "retry: 100\nfoo: bar\nevent: end\n\n",
			[]sseEvent{{event: "end"}}, io.EOF},
		{"a long line", "data: " + strings.Repeat("x", 200<<10) + "\n\n",
			[]sseEvent{{event: "message", data: []byte(strings.Repeat("x", 200<<10))}}, io.EOF},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newSSEReader(strings.NewReader(c.in))
			for i, w := range c.want {
				ev, err := r.next()
				if err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
				if ev.id != w.id || ev.event != w.event || string(ev.data) != string(w.data) {
					t.Fatalf("event %d = {%q %q %.40q}, want {%q %q %.40q}", i, ev.id, ev.event, ev.data, w.id, w.event, w.data)
				}
			}
			if _, err := r.next(); !errors.Is(err, c.err) {
				t.Fatalf("after the events: %v, want %v", err, c.err)
			}
		})
	}
}

func TestSSELineLimit(t *testing.T) {
	r := newSSEReader(io.MultiReader(strings.NewReader("data: "), strings.NewReader(strings.Repeat("x", maxSSELine+256<<10))))
	if _, err := r.next(); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("an endless line: %v, want a length error", err)
	}
}
