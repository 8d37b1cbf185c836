package cli

import (
	"fmt"

	"github.com/airlockrun/airlock/api"
)

// snapshotFlags names snapshot's flags behind the request's fields.
var snapshotFlags = map[string]string{"name": "--name", "description": "--description", "memory": "--memory"}

// snapshotCmd is `airlock snapshot ID`: save a sandbox's state and print the snapshot's ID.
func snapshotCmd(e *env, args []string) int {
	r := newRemote(e, "snapshot", "[--name NAME] [--description TEXT] [--memory[=false]] [--json] ID")
	var req api.SnapshotRequest
	r.fs.StringVar(&req.Name, "name", "", "a name for the snapshot (default its ID)")
	r.fs.StringVar(&req.Description, "description", "", "what the snapshot holds")
	r.fs.Var(optionalBool{&req.Memory}, "memory", memoryUsage)
	asJSON := r.fs.Bool("json", false, "print the snapshot as JSON instead of its ID")
	id, code := r.oneID(args)
	if code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	snap, err := r.c.Snapshot(ctx, id, req)
	if err != nil {
		return r.fail(err, snapshotFlags)
	}
	if *asJSON {
		printJSON(e.stdout, snap)
	} else {
		fmt.Fprintln(e.stdout, snap.ID)
	}
	return 0
}
