package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/airlockrun/airlock/api"
)

// inspectCmd is `airlock inspect ID`: one sandbox in detail, with its transitions.
func inspectCmd(e *env, args []string) int {
	r := newRemote(e, "inspect", "[--json] ID")
	asJSON := r.fs.Bool("json", false, "print the sandbox as JSON")
	id, code := r.oneID(args)
	if code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	sb, err := r.c.Get(ctx, id)
	if err != nil {
		return r.fail(err, nil)
	}
	if *asJSON {
		printJSON(e.stdout, sb)
	} else {
		writeSandboxDetail(e.stdout, sb, time.Now())
	}
	return 0
}

// writeSandboxDetail prints one sandbox for a person, its times relative to now.
func writeSandboxDetail(w io.Writer, sb api.Sandbox, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	when := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		if t.Before(now) {
			return fmt.Sprintf("%s (%s ago)", t.In(now.Location()).Format(time.RFC3339), age(now, t))
		}
		return fmt.Sprintf("%s (in %s)", t.In(now.Location()).Format(time.RFC3339), age(t, now))
	}
	res := sb.Resources
	row("ID", sb.ID)
	row("Name", sb.Name)
	row("Status", statusText(sb))
	row("Isolation", strings.TrimSuffix(sb.Isolation+" "+sb.Runtime, " "))
	row("Agent", sb.AgentID)
	row("Created", when(sb.CreatedAt))
	if sb.Status != api.StatusTerminated {
		row("Expires", when(sb.ExpiresAt))
	}
	row("Root", firstOf(sb.Image, sb.Template))
	row("User", sb.User)
	row("Workdir", sb.Workdir)
	row("Resources", fmt.Sprintf("cpu %s, memory %s, disk %s, network %d Mbit/s, pids %d, open files %d",
		cpuText(res.CPU), mib(res.MemoryMB), mib(res.DiskMB), res.NetworkMbps, res.MaxProcesses, res.MaxOpenFiles))
	row("Timeouts", fmt.Sprintf("max %s, idle %s", seconds(sb.Timeout.MaxDurationSeconds), seconds(sb.Timeout.IdleTimeoutSeconds)))
	row("Network", networkText(sb.Network))
	row("Read-only", strings.Join(sb.Filesystem.ReadOnly, ", "))
	row("Read-write", strings.Join(sb.Filesystem.ReadWrite, ", "))
	row("Blocked", strings.Join(sb.Filesystem.Blocked, ", "))
	var vols []string
	for _, v := range sb.Volumes {
		s := v.Name + " at " + v.Path
		if v.ReadOnly {
			s += " (read-only)"
		}
		vols = append(vols, s)
	}
	row("Volumes", strings.Join(vols, ", "))
	row("Environment", pairs(sb.Environment))
	row("Metadata", pairs(sb.Metadata))
	tw.Flush()
	if len(sb.Transitions) > 0 {
		fmt.Fprintln(w, "\nTransitions:")
		tw = tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
		fmt.Fprintln(tw, "  TIME\tFROM\tTO\tREASON")
		for _, t := range sb.Transitions {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", t.At.In(now.Location()).Format(time.RFC3339), dash(t.From), t.To, dash(t.Reason))
		}
		tw.Flush()
	}
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func seconds(n int64) string {
	if n == 0 {
		return "-"
	}
	return (time.Duration(n) * time.Second).String()
}

func networkText(n api.Network) string {
	s := dash(n.EgressPolicy)
	if len(n.AllowedDomains) > 0 {
		s += " (" + strings.Join(n.AllowedDomains, ", ") + ")"
	}
	if n.BlockLocalNetwork != nil && !*n.BlockLocalNetwork {
		s += ", local network reachable"
	}
	for _, c := range n.Credentials {
		s += fmt.Sprintf(", credential %s for %s", c.Header, c.Host)
	}
	return s
}

// pairs renders a map as "k=v, k=v" in key order.
func pairs(m map[string]string) string {
	var b []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		b = append(b, k+"="+m[k])
	}
	return strings.Join(b, ", ")
}
