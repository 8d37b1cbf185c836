package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/airlockrun/airlock/internal/store"
)

// adminTenant is the tenant of an admin key created without --tenant: its own sandboxes are
// kept apart from every tenant's.
const adminTenant = "operator"

// keysCmd manages API keys in the data dir's store directly (the daemon need not run; if it
// does, it sees changes at once).
func keysCmd(e *env, args []string) int {
	const usage = "usage: airlock keys create --tenant NAME | create --admin [--tenant NAME] | ls [--json] | revoke KEY   [--data-dir DIR] [--config FILE]"
	if len(args) == 0 {
		fmt.Fprintln(e.stderr, usage)
		return 2
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(e.stderr, usage)
		return 0
	}
	fs := flag.NewFlagSet("keys "+sub, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var h hostFlags
	h.register(fs)
	// Each subcommand lists only its own flags in -h.
	tenant, admin := new(string), new(bool)
	if sub == "create" {
		fs.StringVar(tenant, "tenant", "", "the tenant the key acts for (created on first key; an admin key's default: "+adminTenant+")")
		fs.BoolVar(admin, "admin", false, "an admin key, the operator's: it may also change daemon-wide resources (images, pools)")
	}
	asJSON := new(bool)
	if sub != "revoke" {
		fs.BoolVar(asJSON, "json", false, "print JSON")
	}
	// Flags may come before or after the positional argument (keys revoke KEY --data-dir DIR).
	pos, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	switch {
	case sub == "create" && ((*tenant == "" && !*admin) || len(pos) > 0):
		fmt.Fprintln(e.stderr, "usage: airlock keys create --tenant NAME | --admin [--tenant NAME]")
		return 2
	case sub == "revoke" && len(pos) != 1:
		fmt.Fprintln(e.stderr, "usage: airlock keys revoke KEY-ID-OR-SECRET")
		return 2
	case sub != "create" && sub != "ls" && sub != "revoke":
		fmt.Fprintf(e.stderr, "airlock keys: unknown subcommand %q (create, ls, revoke)\n", sub)
		return 2
	}
	cfg, err := h.load(nil)
	if err != nil {
		fmt.Fprintln(e.stderr, "airlock keys:", err)
		return 2
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		fmt.Fprintln(e.stderr, "airlock keys:", err)
		return 1
	}
	ctx := context.Background()
	st, err := store.Open(ctx, cfg.DatabasePath(), store.Options{Sync: cfg.Database.Sync}, e.log)
	if err != nil {
		fmt.Fprintln(e.stderr, "airlock keys:", err)
		return 1
	}
	defer st.Close()
	switch sub {
	case "create":
		create, role := st.CreateKey, "key"
		if *admin {
			create, role = st.CreateAdminKey, "admin key"
			if *tenant == "" {
				*tenant = adminTenant
			}
		}
		secret, k, err := create(ctx, *tenant)
		if err != nil {
			fmt.Fprintln(e.stderr, "airlock keys create:", err)
			return 1
		}
		if *asJSON {
			// The secret with what it is, for a script that keeps both.
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(struct {
				Secret string `json:"secret"`
				ID     string `json:"id"`
				Tenant string `json:"tenant"`
				Admin  bool   `json:"admin"`
			}{secret, k.ID, k.Tenant, k.Admin}); err != nil {
				// The secret is shown once: one not written is lost, and the exit status says so.
				fmt.Fprintln(e.stderr, "airlock keys create:", err)
				return 1
			}
			return 0
		}
		// The secret is shown once, alone on stdout, so that `KEY=$(airlock keys create ...)` works.
		fmt.Fprintln(e.stdout, secret)
		fmt.Fprintf(e.stderr, "created %s %s for tenant %s; it is not shown again\n", role, k.ID, k.Tenant)
	case "ls":
		keys, err := st.Keys(ctx)
		if err != nil {
			fmt.Fprintln(e.stderr, "airlock keys ls:", err)
			return 1
		}
		if *asJSON {
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(keys) // stdout's errors go unchecked, as fmt's prints do
			return 0
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tTENANT\tROLE\tCREATED\tREVOKED")
		for _, k := range keys {
			revoked := "-"
			if k.RevokedAt != nil {
				revoked = k.RevokedAt.Local().Format(time.DateTime)
			}
			role := "tenant"
			if k.Admin {
				role = "admin"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.ID, k.Tenant, role, k.CreatedAt.Local().Format(time.DateTime), revoked)
		}
		tw.Flush()
	case "revoke":
		k, err := st.RevokeKey(ctx, pos[0])
		if err != nil {
			fmt.Fprintln(e.stderr, "airlock keys revoke:", err)
			return 1
		}
		fmt.Fprintf(e.stderr, "revoked key %s of tenant %s\n", k.ID, k.Tenant)
	}
	return 0
}
