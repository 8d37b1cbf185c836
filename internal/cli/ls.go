package cli

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
)

// lsCmd is `airlock ls`: list the sandboxes of the caller's tenant, terminated ones only with
// --all or --status.
func lsCmd(e *env, args []string) int {
	r := newRemote(e, "ls", "[flags]")
	var status, meta listFlag
	var opts client.ListOptions
	r.fs.Var(&status, "status", "only sandboxes in this status (repeatable)")
	r.fs.StringVar(&opts.AgentID, "agent-id", "", "only sandboxes of this agent")
	r.fs.Var(&meta, "metadata", "only sandboxes with this K=V metadata (repeatable)")
	all := r.fs.Bool("all", false, "include terminated sandboxes")
	r.fs.BoolVar(all, "a", false, "the same as --all")
	quiet := r.fs.Bool("q", false, "print only the IDs")
	asJSON := r.fs.Bool("json", false, "print the sandboxes as a JSON array")
	pos, code := r.parse(args, true)
	if code >= 0 {
		return code
	}
	if len(pos) > 0 {
		return r.usageError("unexpected argument %q", pos[0])
	}
	var err error
	if opts.Metadata, err = keyValues("metadata", meta); err != nil {
		return r.usageError("%v", err)
	}
	opts.Status = status
	if code := r.dial(); code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	sbs, err := r.c.List(ctx, opts)
	if err != nil {
		return r.fail(err, map[string]string{"status": "--status", "agentId": "--agent-id"})
	}
	if !*all && len(status) == 0 {
		live := sbs[:0]
		for _, sb := range sbs {
			if sb.Status != api.StatusTerminated {
				live = append(live, sb)
			}
		}
		sbs = live
	}
	switch {
	case *asJSON:
		printJSON(e.stdout, orEmpty(sbs))
	case *quiet:
		for _, sb := range sbs {
			fmt.Fprintln(e.stdout, sb.ID)
		}
	default:
		writeSandboxTable(e.stdout, sbs, time.Now())
	}
	return 0
}

// writeSandboxTable prints sandboxes as a table, their ages as of now.
func writeSandboxTable(w io.Writer, sbs []api.Sandbox, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tSTATUS\tISOLATION\tCPU\tMEMORY\tAGENT\tAGE")
	for _, sb := range sbs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", sb.ID, dash(sb.Name), statusText(sb), dash(sb.Isolation),
			cpuText(sb.Resources.CPU), mib(sb.Resources.MemoryMB), dash(sb.AgentID), age(now, sb.CreatedAt))
	}
	tw.Flush()
}

// statusText is a sandbox's status with the reason for an ending one: "terminated (idle)".
func statusText(sb api.Sandbox) string {
	switch sb.Status {
	case api.StatusCompleted, api.StatusFailed, api.StatusTerminated:
		if sb.Reason != "" {
			return sb.Status + " (" + sb.Reason + ")"
		}
	}
	return dash(sb.Status)
}

func cpuText(cpu api.VCPU) string {
	if cpu == 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(cpu), 'f', -1, 64)
}
