package cli

import (
	"fmt"

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
