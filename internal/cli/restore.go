package cli

import "fmt"

// restoreCmd is `airlock restore ID SNAPSHOT_ID`: put a sandbox back in a snapshot's state.
func restoreCmd(e *env, args []string) int {
	r := newRemote(e, "restore", "[--json] ID SNAPSHOT_ID")
	asJSON := r.fs.Bool("json", false, "print the answer as JSON ({id, state, restoredFrom, restoredAt} and the sandbox) instead of the ID")
	pos, code := r.parse(args, true)
	if code >= 0 {
		return code
	}
	if len(pos) != 2 {
		return r.usageError("want a sandbox ID and a snapshot ID")
	}
	if code := r.dial(); code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	sb, err := r.c.Restore(ctx, pos[0], pos[1])
	if err != nil {
		return r.fail(err, map[string]string{"snapshotId": "SNAPSHOT_ID"})
	}
	if *asJSON {
		printJSON(e.stdout, sb)
	} else {
		fmt.Fprintln(e.stdout, sb.ID)
	}
	return 0
}
