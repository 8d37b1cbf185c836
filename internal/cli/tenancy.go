package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
)

// The tenancy verbs list what the operator lends tenants and what they may use (AIRLOCK_HOST,
// AIRLOCK_TOKEN): volumes and templates come from the daemon's configuration file, and so do
// quotas (tenants.defaults, tenants.overrides); a tenant key sees its own, an admin key all.

// listVerb runs a client call with no arguments and prints its result as JSON or as a table.
func listVerb[T any](e *env, name string, args []string, get func(*client.Client, context.Context) ([]T, error), header string, row func(T) []any) int {
	r := newRemote(e, name, "[--json]")
	asJSON := r.fs.Bool("json", false, "print JSON")
	if code := r.noArgs(args); code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	items, err := get(r.c, ctx)
	if err != nil {
		return r.fail(err, nil)
	}
	if *asJSON {
		printJSON(e.stdout, orEmpty(items))
		return 0
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, it := range items {
		cells := row(it)
		format := strings.Repeat("%v\t", len(cells)-1) + "%v\n"
		fmt.Fprintf(tw, format, cells...)
	}
	tw.Flush()
	return 0
}

// volumesCmd is `airlock volumes`: the volumes the key may mount (create --volume NAME:PATH).
func volumesCmd(e *env, args []string) int {
	return listVerb(e, "volumes", args, (*client.Client).Volumes, "NAME\tMODE\tHOST PATH\tTENANTS", func(v api.VolumeInfo) []any {
		mode := "rw"
		if v.ReadOnly {
			mode = "ro"
		}
		return []any{v.Name, mode, dash(v.HostPath), dash(strings.Join(v.Tenants, ","))}
	})
}

// templatesCmd is `airlock templates`: the root filesystems the key may name (create --template).
func templatesCmd(e *env, args []string) int {
	return listVerb(e, "templates", args, (*client.Client).Templates, "NAME\tKIND\tDIRECTORY\tTENANTS", func(t api.TemplateInfo) []any {
		return []any{t.Name, t.Kind, dash(t.Dir), dash(strings.Join(t.Tenants, ","))}
	})
}

// tenantsCmd is `airlock tenants`: quotas and usage (the key's own tenant; every tenant for an
// admin key).
func tenantsCmd(e *env, args []string) int {
	return listVerb(e, "tenants", args, (*client.Client).Tenants, "TENANT\tPLAN\tSANDBOXES\tMEMORY MB\tDISK MB\tREQUESTS/S", func(t api.Tenant) []any {
		q, u := t.Quota, t.Usage
		return []any{t.Name, dash(q.Plan), fmt.Sprintf("%d/%d", u.Sandboxes, q.MaxSandboxes), fmt.Sprintf("%d/%d", u.MemoryMB, q.MaxMemoryMB),
			fmt.Sprintf("%d/%d", u.DiskMB, q.MaxDiskMB), fmt.Sprintf("%g (burst %d)", q.RequestsPerSecond, q.Burst)}
	})
}
