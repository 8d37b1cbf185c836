package cli

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// networkCmd is `airlock network ID [flags]`: change a live sandbox's network policy. The flags
// give the whole new policy, as at create time; credentials the sandbox had stay unless
// --credential names new ones.
func networkCmd(e *env, args []string) int {
	r := newRemote(e, "network", "ID --network restricted|open|none [--allow-domain D]... [--allow-local-network] [--credential C]...")
	var spec sandbox.Spec
	var sf specFlags
	r.fs.StringVar(&spec.Network.EgressPolicy, "network", "", "egress policy: none, restricted, open (default restricted with --allow-domain, else none)")
	r.fs.Var(&sf.allow, "allow-domain", "a domain the sandbox may reach (repeatable)")
	r.fs.BoolVar(&sf.allowLocal, "allow-local-network", false, "let the sandbox reach private addresses (metadata addresses stay blocked)")
	r.fs.Var(&sf.creds, "credential", "HOST:HEADER:secret=NAME or HOST:HEADER:env=VAR (repeatable; replaces the sandbox's credentials)")
	asJSON := r.fs.Bool("json", false, "print the sandbox as JSON")
	id, code := r.oneID(args)
	if code >= 0 {
		return code
	}
	if err := sf.apply(&spec); err != nil {
		return r.usageError("%s", describe(err))
	}
	ctx, stop := interruptible()
	defer stop()
	n := spec.Network
	if len(sf.creds) == 0 {
		// Keep what the sandbox has: values are not shown, so send them back empty.
		cur, err := r.c.Get(ctx, id)
		if err != nil {
			return r.fail(err, nil)
		}
		n.Credentials = cur.Spec.Network.Credentials
	}
	sb, err := r.c.UpdateNetwork(ctx, id, n)
	if err != nil {
		return r.fail(err, map[string]string{"network.egressPolicy": "--network", "network.allowedDomains": "--allow-domain", "network.credentials": "--credential"})
	}
	if *asJSON {
		printJSON(e.stdout, sb)
	} else {
		fmt.Fprintf(e.stdout, "%s: %s\n", sb.ID, networkText(sb.Spec.Network))
	}
	return 0
}

// eventsCmd is `airlock events ID`: a sandbox's recorded events (network decisions, policy
// changes), oldest first.
func eventsCmd(e *env, args []string) int {
	r := newRemote(e, "events", "[--type PREFIX] [--exec EXEC_ID] [--json] ID")
	typ := r.fs.String("type", "", "only events whose type starts with this, e.g. network. or network.connect")
	execID := r.fs.String("exec", "", "only events of this exec")
	asJSON := r.fs.Bool("json", false, "print one JSON event per line")
	id, code := r.oneID(args)
	if code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	tw := tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)
	if !*asJSON {
		fmt.Fprintln(tw, "TIME\tTYPE\tEXEC\tEVENT")
	}
	opts := client.EventOptions{Type: *typ, ExecutionID: *execID}
	enc := json.NewEncoder(e.stdout)
	for {
		page, err := r.c.Events(ctx, id, opts)
		if err != nil {
			return r.fail(err, nil)
		}
		for _, ev := range page.Events {
			if *asJSON {
				enc.Encode(ev)
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", ev.Time.Local().Format(time.TimeOnly), ev.Type, dash(ev.ExecutionID), eventText(ev))
		}
		if len(page.Events) == 0 || page.Next == opts.After {
			break
		}
		opts.After = page.Next
	}
	tw.Flush()
	return 0
}
