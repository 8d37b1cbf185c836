package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
)

// snapshotsCmd is `airlock snapshots ls|inspect|rm`: the tenant's snapshots, those of ended
// sandboxes included (they outlive their sandbox).
func snapshotsCmd(e *env, args []string) int {
	return dispatch(e, "snapshots", args, []subcommand{{"ls", snapshotsLs}, {"inspect", snapshotsInspect}, {"rm", snapshotsRm}})
}

func snapshotsLs(e *env, args []string) int {
	r := newRemote(e, "snapshots ls", "[--sandbox ID] [--json]")
	sandboxID := r.fs.String("sandbox", "", "only the snapshots of this sandbox")
	asJSON := r.fs.Bool("json", false, "print the snapshots as a JSON array")
	if code := r.noArgs(args); code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	snaps, err := r.c.Snapshots(ctx, *sandboxID)
	if err != nil {
		return r.fail(err, nil)
	}
	if *asJSON {
		printJSON(e.stdout, orEmpty(snaps))
		return 0
	}
	writeSnapshotTable(e.stdout, snaps, time.Now())
	return 0
}

// writeSnapshotTable prints snapshots as a table, their ages as of now.
func writeSnapshotTable(w io.Writer, snaps []api.Snapshot, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "SNAPSHOT\tSANDBOX\tNAME\tLEVEL\tSIZE\tMEMORY\tCREATED")
	for _, s := range snaps {
		memory := "no"
		if s.Memory {
			memory = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.1f MiB\t%s\t%s\n", s.ID, s.SandboxID, dash(s.Name), levelText(s.Isolation, s.Runtime),
			s.SizeMB, memory, age(now, s.CreatedAt))
	}
	tw.Flush()
}

// levelText is a level with its runtime, as one table cell: "container/runsc", "process".
func levelText(isolation, runtime string) string {
	if runtime == "" {
		return dash(isolation)
	}
	return isolation + "/" + runtime
}

func snapshotsInspect(e *env, args []string) int {
	return inspect(e, "snapshots inspect", "SNAPSHOT_ID", "snapshot ID", args, func(c *client.Client, ctx context.Context, id string) (any, error) {
		return c.GetSnapshot(ctx, id)
	})
}

func snapshotsRm(e *env, args []string) int {
	return remove(e, "snapshots rm", "[--json] SNAPSHOT_ID...", "snapshot ID", "print each deleted snapshot as JSON instead of its ID", args,
		func(c *client.Client, ctx context.Context, id string) (any, error) { return c.DeleteSnapshot(ctx, id) })
}
