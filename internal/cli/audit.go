package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"

	"github.com/airlockrun/airlock/internal/audit"
	"github.com/airlockrun/airlock/internal/store"
)

// auditCmd is `airlock audit verify`: check the data dir's audit log's hash chain, from the
// store directly (the daemon may be running). Exit status 0: the chain is whole; 1: it is not
// (the first bad event is named); 2: the check could not run.
func auditCmd(e *env, args []string) int {
	const usage = "usage: airlock audit verify [--json] [--data-dir DIR] [--config FILE]"
	if len(args) == 0 || args[0] != "verify" {
		fmt.Fprintln(e.stderr, usage)
		return 2
	}
	fs := flag.NewFlagSet("audit verify", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var h hostFlags
	h.register(fs)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	pos, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return 2
	}
	if len(pos) > 0 {
		fmt.Fprintln(e.stderr, usage)
		return 2
	}
	cfg, err := h.load(nil)
	if err != nil {
		fmt.Fprintln(e.stderr, "airlock audit verify:", err)
		return 2
	}
	ctx := context.Background()
	st, err := store.Open(ctx, cfg.DatabasePath(), store.Options{Sync: cfg.Database.Sync}, e.log)
	if err != nil {
		fmt.Fprintln(e.stderr, "airlock audit verify:", err)
		return 2
	}
	defer st.Close()
	rep, err := audit.Verify(ctx, st)
	if err != nil {
		fmt.Fprintln(e.stderr, "airlock audit verify:", err)
		return 2
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep) // stdout's errors go unchecked, as fmt's prints do
	} else if rep.Problem == nil {
		fmt.Fprintf(e.stdout, "ok: %d events, %d to %d; head hash %s\n", rep.Events, rep.Chain.AnchorSeq+1, rep.Chain.HeadSeq, dash(rep.Chain.HeadHash))
		if rep.Chain.AnchorSeq > 0 {
			fmt.Fprintf(e.stdout, "events up to %d were removed by retention; the chain starts after hash %s\n", rep.Chain.AnchorSeq, rep.Chain.AnchorHash)
		}
	}
	if rep.Problem != nil {
		fmt.Fprintf(e.stderr, "airlock audit verify: the audit log was altered: %s (%d events before it are intact)\n", rep.Problem, rep.Events)
		return 1
	}
	return 0
}
