package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
)

// logsCmd is `airlock logs [-f] ID`: the sandbox's output and events. The commands' stdout goes to
// stdout and their stderr to stderr, as they printed it; events go to stderr as lines starting
// with "* ". With -f it keeps following until the sandbox is terminated or Ctrl-C.
func logsCmd(e *env, args []string) int {
	r := newRemote(e, "logs", "[-f] [--since SEQ] [--json] ID")
	var opts client.LogOptions
	r.fs.BoolVar(&opts.Follow, "f", false, "follow: keep printing new entries until the sandbox is terminated")
	r.fs.BoolVar(&opts.Follow, "follow", false, "the same as -f")
	r.fs.Int64Var(&opts.Since, "since", 0, "start after the entry with this sequence number")
	asJSON := r.fs.Bool("json", false, "print each entry as one line of JSON")
	id, code := r.oneID(args)
	if code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	enc := json.NewEncoder(e.stdout)
	err := r.c.Logs(ctx, id, opts, func(le api.LogEntry) error {
		if *asJSON {
			return enc.Encode(le)
		}
		return writeLogEntry(e.stdout, e.stderr, le)
	})
	if err != nil && !(opts.Follow && errors.Is(err, ctx.Err())) { // Ctrl-C ends following
		return r.fail(err, nil)
	}
	return 0
}

// writeLogEntry prints one entry for a person.
func writeLogEntry(stdout, stderr io.Writer, le api.LogEntry) error {
	var err error
	switch le.Stream {
	case api.StreamStdout:
		_, err = io.WriteString(stdout, le.Data)
	case api.StreamStderr:
		_, err = io.WriteString(stderr, le.Data)
	default:
		if le.Event != nil {
			_, err = fmt.Fprintf(stderr, "* %s %s\n", le.Time.Local().Format(time.TimeOnly), eventText(*le.Event))
		}
	}
	return err
}

// eventText describes an event in a line.
func eventText(ev api.Event) string {
	str := func(k string) string {
		if v, ok := ev.Data[k]; ok {
			return fmt.Sprint(v)
		}
		return ""
	}
	switch ev.Type {
	case api.EventSandboxStatus:
		to := firstOf(str("to"), ev.Message)
		s := "status " + to
		if reason := str("reason"); reason != "" && reason != to {
			s += " (" + reason + ")"
		}
		return s
	case api.EventExecStarted:
		cmd := str("command")
		if argv, ok := ev.Data["command"].([]any); ok {
			words := make([]string, len(argv))
			for i, w := range argv {
				words[i] = fmt.Sprint(w)
			}
			cmd = strings.Join(words, " ")
		}
		return fmt.Sprintf("%s started: %s", ev.ExecutionID, cmd)
	case api.EventExecExited:
		return fmt.Sprintf("%s exited with status %s after %sms", ev.ExecutionID, str("exitCode"), str("durationMs"))
	case api.EventExecFiles:
		return filesText(ev.Data)
	case api.EventNetworkDNS, api.EventNetworkConnect:
		if str("decision") == "deny" {
			return ev.Message + ": " + str("reason")
		}
		return ev.Message
	}
	if ev.Message != "" {
		return ev.Type + ": " + ev.Message
	}
	return ev.Type
}

// filesText is an exec.files event on one line: +created ~modified -deleted.
func filesText(d map[string]any) string {
	var parts []string
	for _, k := range []struct{ key, count, sign string }{{"created", "nCreated", "+"}, {"modified", "nModified", "~"}, {"deleted", "nDeleted", "-"}} {
		paths, _ := d[k.key].([]any)
		for i, p := range paths {
			if i == 5 {
				parts = append(parts, fmt.Sprintf("%s…(%v in all)", k.sign, d[k.count]))
				break
			}
			parts = append(parts, k.sign+fmt.Sprint(p))
		}
	}
	if len(parts) == 0 {
		return "no files changed"
	}
	return "files " + strings.Join(parts, " ")
}
