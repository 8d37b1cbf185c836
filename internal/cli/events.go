package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
)

// eventsCmd is `airlock events [-f] [ID]`: the audit events of a sandbox, or of every sandbox of
// the tenant (and its API calls) without an ID, oldest first; -f follows them as they come.
func eventsCmd(e *env, args []string) int {
	r := newRemote(e, "events", "[-f] [--type PREFIX] [--exec EXEC_ID] [--since DURATION|TIME] [--json] [ID]")
	var follow bool
	r.fs.BoolVar(&follow, "f", false, "follow: print events as they are written (with an ID: until the sandbox is terminated)")
	r.fs.BoolVar(&follow, "follow", false, "the same as -f")
	typ := r.fs.String("type", "", "only events whose type starts with this, e.g. network., exec.files, limit.")
	execID := r.fs.String("exec", "", "only events of this exec")
	since := r.fs.String("since", "", "only events since this long ago (10m) or this time (RFC 3339)")
	asJSON := r.fs.Bool("json", false, "print one JSON event per line")
	r.hidden = map[string]bool{"follow": true}
	pos, code := r.parse(args, true)
	if code >= 0 {
		return code
	}
	if len(pos) > 1 {
		return r.usageError("want at most one sandbox ID")
	}
	id := ""
	if len(pos) == 1 {
		id = pos[0]
	}
	opts := client.EventOptions{Type: *typ, ExecutionID: *execID}
	if *since != "" {
		t, err := sinceTime(*since, time.Now())
		if err != nil {
			return r.usageError("--since: %v", err)
		}
		opts.Since = t
	}
	if code := r.dial(); code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	p := &eventPrinter{w: e.stdout, json: *asJSON, all: id == ""}
	p.header()
	if follow {
		err := r.c.FollowEvents(ctx, id, opts, func(ev api.Event) error { return p.print(ev) })
		if err != nil && ctx.Err() == nil {
			return r.fail(err, nil)
		}
		return 0
	}
	for {
		page, err := r.c.Events(ctx, id, opts)
		if err != nil {
			return r.fail(err, nil)
		}
		for _, ev := range page.Events {
			p.print(ev)
		}
		if len(page.Events) == 0 || page.Next == opts.After {
			return 0
		}
		opts.After = page.Next
	}
}

// sinceTime reads --since: a duration back from now, or a time.
func sinceTime(v string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("want a duration such as 10m or a time such as 2026-11-21T10:00:00Z (got %q)", v)
}

// eventPrinter prints events one line each, as they come (no table that waits for the end, so
// that following works), or as JSON lines.
type eventPrinter struct {
	w    io.Writer
	json bool
	all  bool // events of several sandboxes: show which
}

func (p *eventPrinter) header() {
	if p.json {
		return
	}
	if p.all {
		fmt.Fprintf(p.w, "%-8s  %-12s  %-16s  %-20s  %s\n", "SEQ", "TIME", "TYPE", "SANDBOX", "EVENT")
	} else {
		fmt.Fprintf(p.w, "%-8s  %-12s  %-16s  %-20s  %s\n", "SEQ", "TIME", "TYPE", "EXEC", "EVENT")
	}
}

func (p *eventPrinter) print(ev api.Event) error {
	if p.json {
		return json.NewEncoder(p.w).Encode(ev)
	}
	col := ev.ExecutionID
	if p.all {
		col = ev.SandboxID
	}
	_, err := fmt.Fprintf(p.w, "%-8d  %-12s  %-16s  %-20s  %s\n", ev.Seq, ev.Time.Local().Format("15:04:05.000"), ev.Type, dash(col), eventText(ev))
	return err
}

// replayCmd is `airlock replay ID`: a sandbox's recorded history as a timeline, each exec with
// its command, output and the files it changed.
func replayCmd(e *env, args []string) int {
	r := newRemote(e, "replay", "[--json] ID")
	asJSON := r.fs.Bool("json", false, "print the replay as JSON")
	id, code := r.oneID(args)
	if code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	rp, err := r.c.Replay(ctx, id)
	if err != nil {
		return r.fail(err, nil)
	}
	if *asJSON {
		printJSON(e.stdout, rp)
		return 0
	}
	fmt.Fprintf(e.stdout, "%s  %s level, created %s, %s\n", rp.Sandbox.ID, rp.Sandbox.Spec.Isolation,
		rp.Sandbox.CreatedAt.Local().Format(time.DateTime), rp.Sandbox.Status)
	for _, en := range rp.Entries {
		fmt.Fprintf(e.stdout, "%+9.3fs  %-16s  %s\n", float64(en.OffsetMs)/1000, en.Type, eventText(en.Event))
		if x := en.Exec; x != nil && x.Result != nil {
			indent(e.stdout, "stdout", x.Result.Stdout)
			indent(e.stdout, "stderr", x.Result.Stderr)
		}
	}
	if rp.Truncated {
		fmt.Fprintln(e.stdout, "(the history goes on; a replay shows its first 100000 events)")
	}
	return 0
}

// indent prints an exec's output under its timeline entry.
func indent(w io.Writer, stream, s string) {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return
	}
	for _, line := range strings.Split(s, "\n") {
		fmt.Fprintf(w, "%12s  %s | %s\n", "", stream, line)
	}
}
