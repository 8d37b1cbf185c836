package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
)

// The tools verbs use the daemon's tool gateway (AIRLOCK_HOST, AIRLOCK_TOKEN): the tools this
// key may call and calls of them, and what the tenant defines — its tools, upstream MCP servers
// and policies — from JSON files (the API's bodies).

// toolsCmd is `airlock tools ls|inspect|call|put|rm|servers|policies`.
func toolsCmd(e *env, args []string) int {
	return dispatch(e, "tools", args, []subcommand{{"ls", toolsLs}, {"inspect", toolsInspect}, {"call", toolsCall}, {"put", toolsPut},
		{"rm", toolsRm}, {"servers", toolServersCmd}, {"policies", toolPoliciesCmd}})
}

func toolsLs(e *env, args []string) int {
	r := newRemote(e, "tools ls", "[--agent ID] [--json]")
	asJSON := r.fs.Bool("json", false, "print the tools, with their schemas, as a JSON array")
	agent := r.fs.String("agent", "", "list what the key may call when acting for this agent")
	if code := r.noArgs(args); code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	ts, err := r.c.Tools(ctx, client.ToolsOptions{AgentID: *agent})
	if err != nil {
		return r.fail(err, nil)
	}
	if *asJSON {
		printJSON(e.stdout, orEmpty(ts))
		return 0
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSOURCE\tBACKEND\tRATE\tDESCRIPTION")
	for _, t := range ts {
		desc := t.Description
		if i := strings.IndexAny(desc, "\n"); i >= 0 {
			desc = desc[:i]
		}
		if len(desc) > 70 {
			desc = desc[:67] + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Name, t.Source, t.Backend, dash(t.RateLimit), dash(desc))
	}
	tw.Flush()
	return 0
}

func toolsInspect(e *env, args []string) int {
	return inspect(e, "tools inspect", "NAME", "tool name", args, func(c *client.Client, ctx context.Context, name string) (any, error) {
		return c.Tool(ctx, name)
	})
}

// toolsCall is `airlock tools call NAME [--arg K=V]... [--args JSON|@FILE|-]`: it prints the
// result's text (or, with --json, the whole result) and exits 1 when the tool failed.
func toolsCall(e *env, args []string) int {
	r := newRemote(e, "tools call", "NAME [--arg KEY=VALUE]... [--args JSON|@FILE|-] [--sandbox ID] [--agent ID] [--json]")
	var kvs listFlag
	r.fs.Var(&kvs, "arg", "an argument KEY=VALUE (VALUE as JSON when it parses, else a string); repeatable")
	raw := r.fs.String("args", "", "the arguments as a JSON object, @FILE to read them from a file, or - from stdin")
	sandboxID := r.fs.String("sandbox", "", "run a built-in or exec tool in this sandbox of yours")
	agent := r.fs.String("agent", "", "the agent the call is made for (policies may be scoped to it)")
	asJSON := r.fs.Bool("json", false, "print the whole result as JSON")
	pos, code := r.parse(args, true)
	if code >= 0 {
		return code
	}
	if len(pos) != 1 {
		return r.usageError("want one tool name")
	}
	req := api.ToolCallRequest{SandboxID: *sandboxID, AgentID: *agent}
	if *raw != "" {
		b := []byte(*raw)
		var err error
		switch {
		case *raw == "-":
			b, err = io.ReadAll(e.stdin)
		case strings.HasPrefix(*raw, "@"):
			b, err = os.ReadFile((*raw)[1:])
		}
		if err != nil {
			return r.usageError("--args: %v", err)
		}
		if err := json.Unmarshal(b, &req.Arguments); err != nil {
			return r.usageError("--args: not a JSON object: %v", err)
		}
	}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return r.usageError("--arg %q: want KEY=VALUE", kv)
		}
		if req.Arguments == nil {
			req.Arguments = map[string]any{}
		}
		var val any
		if err := json.Unmarshal([]byte(v), &val); err != nil {
			val = v
		}
		req.Arguments[k] = val
	}
	if code := r.dial(); code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	res, err := r.c.CallTool(ctx, pos[0], req)
	if err != nil {
		return r.toolFail(err)
	}
	if *asJSON {
		printJSON(e.stdout, res)
	} else {
		for _, c := range res.Content {
			switch {
			case c.Text != "":
				fmt.Fprint(e.stdout, c.Text)
				if !strings.HasSuffix(c.Text, "\n") {
					fmt.Fprintln(e.stdout)
				}
			case c.Data != "":
				fmt.Fprintf(e.stdout, "[%s %s, %d bytes as base64; --json shows it]\n", c.Type, c.MimeType, len(c.Data))
			}
		}
	}
	if res.IsError {
		return exitError
	}
	return 0
}

// toolFail reports a refused call with what refused it.
func (r *remote) toolFail(err error) int {
	code := r.fail(err, nil)
	if e, ok := errors.AsType[*client.Error](err); ok {
		if e.Rule != "" {
			fmt.Fprintf(r.stderr, "airlock: refused by %s (%s)\n", e.Rule, e.Code)
		}
		if e.RetryAfter > 0 {
			fmt.Fprintf(r.stderr, "airlock: retry after %d s\n", e.RetryAfter)
		}
	}
	return code
}

// readBody reads a definition from FILE (or - for stdin) into v.
func readBody(e *env, file string, v any) error {
	var b []byte
	var err error
	if file == "-" {
		b, err = io.ReadAll(e.stdin)
	} else {
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}

// put is a verb `airlock tools ... put FILE` that sends the definition in FILE with do and
// prints the answer's name, or the answer as JSON.
func put[T any](e *env, name, what string, args []string, do func(c *client.Client, ctx context.Context, v T) (any, string, error)) int {
	r := newRemote(e, name, "FILE|- [--json]   (the definition as JSON: see docs/tools.md)")
	asJSON := r.fs.Bool("json", false, "print the answer as JSON instead of the "+what+"'s name")
	file, code := r.oneArg(args, "definition file")
	if code >= 0 {
		return code
	}
	var v T
	if err := readBody(e, file, &v); err != nil {
		return r.usageError("%v", err)
	}
	ctx, stop := interruptible()
	defer stop()
	out, n, err := do(r.c, ctx, v)
	if err != nil {
		return r.fail(err, nil)
	}
	if *asJSON {
		printJSON(e.stdout, out)
	} else {
		fmt.Fprintln(e.stdout, n)
	}
	return 0
}

func toolsPut(e *env, args []string) int {
	return put(e, "tools put", "tool", args, func(c *client.Client, ctx context.Context, d api.ToolDefinition) (any, string, error) {
		t, err := c.PutTool(ctx, d)
		return t, t.Name, err
	})
}

func toolsRm(e *env, args []string) int {
	return remove(e, "tools rm", "[--json] NAME...", "tool name", "print each removed tool as JSON instead of its name", args,
		func(c *client.Client, ctx context.Context, name string) (any, error) { return c.DeleteTool(ctx, name) })
}

// toolServersCmd is `airlock tools servers ls|inspect|put|rm`.
func toolServersCmd(e *env, args []string) int {
	return dispatch(e, "tools servers", args, []subcommand{{"ls", toolServersLs}, {"inspect", toolServersInspect}, {"put", toolServersPut}, {"rm", toolServersRm}})
}

func toolServersLs(e *env, args []string) int {
	r := newRemote(e, "tools servers ls", "[--json]")
	asJSON := r.fs.Bool("json", false, "print the servers as a JSON array")
	if code := r.noArgs(args); code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	ss, err := r.c.ToolServers(ctx)
	if err != nil {
		return r.fail(err, nil)
	}
	if *asJSON {
		printJSON(e.stdout, orEmpty(ss))
		return 0
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSOURCE\tTRANSPORT\tDESCRIPTION")
	for _, s := range ss {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Name, s.Source, s.Transport, dash(s.Description))
	}
	tw.Flush()
	return 0
}

func toolServersInspect(e *env, args []string) int {
	return inspect(e, "tools servers inspect", "NAME", "server name", args, func(c *client.Client, ctx context.Context, name string) (any, error) {
		return c.ToolServer(ctx, name)
	})
}

func toolServersPut(e *env, args []string) int {
	return put(e, "tools servers put", "server", args, func(c *client.Client, ctx context.Context, d api.ToolServer) (any, string, error) {
		s, err := c.PutToolServer(ctx, d)
		return s, s.Name, err
	})
}

func toolServersRm(e *env, args []string) int {
	return remove(e, "tools servers rm", "[--json] NAME...", "server name", "print each removed server as JSON instead of its name", args,
		func(c *client.Client, ctx context.Context, name string) (any, error) {
			return c.DeleteToolServer(ctx, name)
		})
}

// toolPoliciesCmd is `airlock tools policies ls|inspect|put|rm`.
func toolPoliciesCmd(e *env, args []string) int {
	return dispatch(e, "tools policies", args, []subcommand{{"ls", toolPoliciesLs}, {"inspect", toolPoliciesInspect}, {"put", toolPoliciesPut}, {"rm", toolPoliciesRm}})
}

func toolPoliciesLs(e *env, args []string) int {
	r := newRemote(e, "tools policies ls", "[--tenant T] [--json]")
	asJSON := r.fs.Bool("json", false, "print the policies as a JSON array")
	ten := r.fs.String("tenant", "", "an admin key's: this tenant's policies (default: every tenant's)")
	if code := r.noArgs(args); code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	ps, err := r.c.ToolPolicies(ctx, client.PolicyOptions{Tenant: *ten})
	if err != nil {
		return r.fail(err, nil)
	}
	if *asJSON {
		printJSON(e.stdout, orEmpty(ps))
		return 0
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTENANT\tSOURCE\tBINDS\tALLOW\tDENY\tRATE LIMITS")
	for _, p := range ps {
		var binds []string
		for _, b := range []struct{ k, v string }{{"key", p.KeyID}, {"agent", p.AgentID}, {"sandbox", p.SandboxID}} {
			if b.v != "" {
				binds = append(binds, b.k+"="+b.v)
			}
		}
		if p.ToolsOnly {
			binds = append(binds, "toolsOnly")
		}
		var rates []string
		for _, rl := range p.RateLimits {
			rates = append(rates, rl.Tools+":"+rl.Limit)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, p.Tenant, p.Source, dash(strings.Join(binds, " ")),
			dash(strings.Join(p.Allow, " ")), dash(strings.Join(p.Deny, " ")), dash(strings.Join(rates, " ")))
	}
	tw.Flush()
	return 0
}

func toolPoliciesInspect(e *env, args []string) int {
	r := newRemote(e, "tools policies inspect", "[--tenant T] NAME")
	ten := r.fs.String("tenant", "", "an admin key's: the policy's tenant")
	name, code := r.oneArg(args, "policy name")
	if code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	p, err := r.c.ToolPolicy(ctx, name, client.PolicyOptions{Tenant: *ten})
	if err != nil {
		return r.fail(err, nil)
	}
	printJSON(e.stdout, p)
	return 0
}

func toolPoliciesPut(e *env, args []string) int {
	return put(e, "tools policies put", "policy", args, func(c *client.Client, ctx context.Context, p api.ToolPolicy) (any, string, error) {
		out, err := c.PutToolPolicy(ctx, p)
		return out, out.Name, err
	})
}

func toolPoliciesRm(e *env, args []string) int {
	r := newRemote(e, "tools policies rm", "[--tenant T] [--json] NAME...")
	asJSON := r.fs.Bool("json", false, "print each removed policy as JSON instead of its name")
	ten := r.fs.String("tenant", "", "an admin key's: the policies' tenant")
	names, code := r.parse(args, true)
	if code >= 0 {
		return code
	}
	if len(names) == 0 {
		return r.usageError("want at least one policy name")
	}
	if code := r.dial(); code >= 0 {
		return code
	}
	return r.each(names, *asJSON, func(ctx context.Context, name string) (any, error) {
		return r.c.DeleteToolPolicy(ctx, name, client.PolicyOptions{Tenant: *ten})
	})
}
