package cli

// What the client verbs (create, ls, inspect, exec, logs, pause, resume, rm, cp, pool) share:
// finding the daemon, parsing flags, and turning the daemon's answers into messages and exit
// statuses.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/airlockrun/airlock/client"
)

// Exit statuses of the client verbs.
const (
	exitError       = 1   // the daemon refused or failed the request
	exitUsage       = 2   // bad flags or arguments
	exitUnreachable = 125 // no daemon at AIRLOCK_HOST
	exitInterrupted = 130 // Ctrl-C
)

// remote is one client verb's run: its name, flags and the daemon's client.
type remote struct {
	*env
	name string
	fs   *flag.FlagSet
	c    *client.Client
	// hidden are flags the verb parses, to refuse them by name, but does not show in its help.
	hidden map[string]bool
}

// newRemote prepares a client verb's flag set; usage is its argument synopsis.
func newRemote(e *env, name, usage string) *remote {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by parse, in the user's spelling
	r := &remote{env: e, name: name, fs: fs}
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: airlock %s %s\n", name, usage)
		shown := flag.NewFlagSet(name, flag.ContinueOnError)
		fs.VisitAll(func(f *flag.Flag) {
			if !r.hidden[f.Name] {
				shown.Var(f.Value, f.Name, f.Usage)
				shown.Lookup(f.Name).DefValue = f.DefValue
			}
		})
		shown.SetOutput(e.stderr)
		shown.PrintDefaults()
		fmt.Fprintln(e.stderr, "\nThe daemon is found in AIRLOCK_HOST (default "+client.DefaultHost+"), its key in AIRLOCK_TOKEN.")
	}
	return r
}

// parse parses the verb's flags, which may come before or after the arguments (everything after
// "--" is an argument), and returns the arguments. code >= 0 means: exit with it.
func (r *remote) parse(args []string, interspersed bool) (pos []string, code int) {
	var err error
	if interspersed {
		pos, err = parseInterspersed(r.fs, args)
	} else if err = r.fs.Parse(args); err == nil {
		pos = r.fs.Args()
	}
	switch {
	case errors.Is(err, flag.ErrHelp): // the flag package has shown r.fs.Usage
		return nil, 0
	case err != nil:
		// The flag package says "-disk"; airlock's flags are spelled "--disk".
		return nil, r.usageError("%s", strings.Replace(err.Error(), " -", " --", 1))
	}
	return pos, -1
}

// noArgs parses a verb that takes no argument and finds the daemon; code >= 0 means: exit with
// it.
func (r *remote) noArgs(args []string) (code int) {
	pos, code := r.parse(args, true)
	if code >= 0 {
		return code
	}
	if len(pos) > 0 {
		return r.usageError("unexpected argument %q", pos[0])
	}
	return r.dial()
}

// oneID parses a verb that takes exactly one sandbox ID and finds the daemon; code >= 0 means:
// exit with it.
func (r *remote) oneID(args []string) (id string, code int) { return r.oneArg(args, "sandbox ID") }

// oneArg parses a verb that takes exactly one argument, a what, and finds the daemon; code >= 0
// means: exit with it.
func (r *remote) oneArg(args []string, what string) (arg string, code int) {
	pos, code := r.parse(args, true)
	if code >= 0 {
		return "", code
	}
	if len(pos) != 1 {
		return "", r.usageError("want one %s", what)
	}
	if code := r.dial(); code >= 0 {
		return "", code
	}
	return pos[0], -1
}

// usageError reports a mistake on the command line and returns exitUsage.
func (r *remote) usageError(format string, args ...any) int {
	fmt.Fprintf(r.stderr, "airlock %s: %s (see airlock %s --help)\n", r.name, fmt.Sprintf(format, args...), r.name)
	return exitUsage
}

// dial finds the daemon; code >= 0 means: exit with it.
func (r *remote) dial() int {
	c, err := client.FromEnv()
	if err != nil {
		fmt.Fprintf(r.stderr, "airlock: AIRLOCK_HOST: %v\n", err)
		return exitUsage
	}
	r.c = c
	return -1
}

// fail reports err, naming the flag behind a refused field from flags (the verb's own) or the
// flags that create and run share, and returns the exit status for it.
func (r *remote) fail(err error, flags map[string]string) int {
	if errors.Is(err, context.Canceled) {
		return exitInterrupted // the user pressed Ctrl-C and knows why
	}
	fmt.Fprintln(r.stderr, "airlock:", r.describe(err, flags))
	switch {
	case unreachable(err):
		fmt.Fprintf(r.stderr, "airlock: is the daemon running? Start it with `airlock serve`, or set AIRLOCK_HOST (now %s).\n", r.c.BaseURL())
		return exitUnreachable
	case errors.Is(err, client.ErrUnauthorized):
		fmt.Fprintln(r.stderr, "airlock: set AIRLOCK_TOKEN to a key from `airlock keys create`.")
	}
	return exitError
}

func (r *remote) describe(err error, flags map[string]string) string {
	if unreachable(err) {
		var op *net.OpError
		errors.As(err, &op)
		return fmt.Sprintf("cannot reach the daemon at %s: %v", r.c.BaseURL(), op.Err)
	}
	e, ok := errors.AsType[*client.Error](err)
	if !ok {
		return strings.TrimPrefix(err.Error(), "airlock client: ")
	}
	return e.Describe(fieldFlag(e.Field, flags))
}

// unreachable reports whether err is a failure to connect to the daemon at all.
func unreachable(err error) bool {
	op, ok := errors.AsType[*net.OpError](err)
	return ok && op.Op == "dial"
}

// fieldFlag names the flag behind an API field: from flags, the shared table, or the field
// itself.
func fieldFlag(field string, flags map[string]string) string {
	if f, ok := flags[field]; ok {
		return f
	}
	if f, ok := flagForField[field]; ok {
		return f
	}
	for prefix, f := range map[string]string{"filesystem.readOnly": "--ro", "filesystem.readWrite": "--rw",
		"filesystem.blocked": "--block", "network.allowedDomains": "--allow-domain", "environment": "--env", "metadata": "--metadata"} {
		if strings.HasPrefix(field, prefix) {
			return f
		}
	}
	return field
}

// interruptible returns a context that Ctrl-C or SIGTERM cancels.
func interruptible() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// orEmpty is list, or an empty one where list is nil: a JSON list prints as [], never null.
func orEmpty[T any](list []T) []T {
	if list == nil {
		return []T{}
	}
	return list
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // stdout's errors go unchecked, as fmt's prints do
}

// keyValues parses repeated K=V flags of name into a map.
func keyValues(name string, kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--%s %q: want KEY=VALUE", name, kv)
		}
		m[k] = v
	}
	return m, nil
}

// age renders how long ago t was, in the largest whole unit: 45s, 12m, 3h, 5d.
func age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return strconv.Itoa(max(int(d/time.Second), 0)) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	}
	return strconv.Itoa(int(d/(24*time.Hour))) + "d"
}

// mib renders a size in MiB as the flags take it: 512M, 2G.
func mib(n int64) string {
	switch {
	case n == 0:
		return "-"
	case n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "T"
	case n%1024 == 0:
		return strconv.FormatInt(n/1024, 10) + "G"
	}
	return strconv.FormatInt(n, 10) + "M"
}

// dash stands in for an empty table cell.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// each applies op to every ID and prints each ID it succeeded for, or the sandbox as JSON; one
// failure does not stop the others. It returns the exit status.
func (r *remote) each(ids []string, asJSON bool, op func(ctx context.Context, id string) (any, error)) int {
	ctx, stop := interruptible()
	defer stop()
	code := 0
	for _, id := range ids {
		v, err := op(ctx, id)
		if err != nil {
			code = max(code, r.fail(err, nil))
			if unreachable(err) || ctx.Err() != nil {
				return code
			}
			continue
		}
		if asJSON {
			printJSON(r.stdout, v)
		} else {
			fmt.Fprintln(r.stdout, id)
		}
	}
	return code
}

// inspect is a verb `airlock NAME ARG` that prints one object, got by get, as JSON.
func inspect(e *env, name, usage, what string, args []string, get func(c *client.Client, ctx context.Context, arg string) (any, error)) int {
	r := newRemote(e, name, usage)
	arg, code := r.oneArg(args, what)
	if code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	v, err := get(r.c, ctx, arg)
	if err != nil {
		return r.fail(err, nil)
	}
	printJSON(e.stdout, v)
	return 0
}

// remove is a verb `airlock NAME [--json] ARG...` that deletes each argument with del and prints
// its name, or what del returned as JSON; it goes on after a failure and exits with the worst.
func remove(e *env, name, usage, what, jsonHelp string, args []string, del func(c *client.Client, ctx context.Context, arg string) (any, error)) int {
	r := newRemote(e, name, usage)
	asJSON := r.fs.Bool("json", false, jsonHelp)
	names, code := r.parse(args, true)
	if code >= 0 {
		return code
	}
	if len(names) == 0 {
		return r.usageError("want at least one %s", what)
	}
	if code := r.dial(); code >= 0 {
		return code
	}
	return r.each(names, *asJSON, func(ctx context.Context, arg string) (any, error) { return del(r.c, ctx, arg) })
}

// subcommand is one verb of a group such as `airlock pool`.
type subcommand struct {
	name string
	run  func(e *env, args []string) int
}

// dispatch runs the subcommand args name (ls when args start with a flag or are empty) of the
// group `airlock <group>`.
func dispatch(e *env, group string, args []string, subs []subcommand) int {
	sub := "ls"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	names := make([]string, len(subs))
	for i, c := range subs {
		if c.name == sub {
			return c.run(e, args)
		}
		names[i] = c.name
	}
	fmt.Fprintf(e.stderr, "airlock %s: unknown subcommand %q (%s)\n", group, sub, strings.Join(names, ", "))
	return exitUsage
}
