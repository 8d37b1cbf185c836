// Package cli implements airlock's command line, one file per verb. Each verb parses its flags,
// calls into the packages that do the work and maps errors to an exit status once.
package cli

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
)

// env is what every verb gets: its streams and a logger.
type env struct {
	stdin          *os.File
	stdout, stderr io.Writer
	log            *slog.Logger
	// kube makes airlock serve a Kubernetes node: set in airlock-kube (MainKube); nil in
	// airlock, whose serve --kubeconfig runs airlock-kube instead (servenode.go says why).
	kube *KubeNode
}

type verb struct {
	name, usage string
	run         func(e *env, args []string) int
}

func verbs() []verb {
	return []verb{
		{"run", "run [flags] -- CMD [ARG...]   one-shot sandbox, no daemon; exits with CMD's status", runCmd},
		{"serve", "serve [--listen ADDR] [--data-dir DIR] [--config FILE]   the daemon and its HTTP API", serveCmd},
		{"keys", "keys create --tenant NAME | create --admin | ls | revoke KEY   API keys of the daemon (printed once)", keysCmd},
		{"create", "create [flags]                 create a sandbox on the daemon and print its ID", createCmd},
		{"ls", "ls [flags]                     list the daemon's sandboxes (terminated ones too with -a)", lsCmd},
		{"inspect", "inspect [--json] ID            one sandbox in detail", inspectCmd},
		{"exec", "exec [-it] ID [--] CMD...      run a command in a sandbox; exits with its status", execCmd},
		{"logs", "logs [-f] ID                   a sandbox's output and events", logsCmd},
		{"cp", "cp SRC DST                     copy a file in (LOCAL ID:/PATH) or out (ID:/PATH LOCAL)", cpCmd},
		{"events", "events [-f] [--type T] [ID]    audit events of a sandbox, or of all the tenant's; -f follows", eventsCmd},
		{"replay", "replay ID                      a sandbox's recorded history as a timeline", replayCmd},
		{"network", "network ID --network P [--allow-domain D]...   change a sandbox's network policy live", networkCmd},
		{"pause", "pause ID...                    freeze every process of sandboxes", pauseCmd},
		{"resume", "resume ID...                   thaw paused sandboxes", resumeCmd},
		{"start", "start ID...                    start sandboxes' agents (create --agent CMD)", startCmd},
		{"snapshot", "snapshot [--name N] [--description D] ID   save a sandbox's state; print the snapshot's ID", snapshotCmd},
		{"restore", "restore ID SNAPSHOT_ID         put a sandbox back in a snapshot's state", restoreCmd},
		{"fork", "fork [--count N] [--name PREFIX] ID   snapshot a sandbox and start sandboxes from it; print their IDs", forkCmd},
		{"snapshots", "snapshots [ls [--sandbox ID] [--json] | inspect SNAPSHOT_ID | rm SNAPSHOT_ID...]   the tenant's snapshots", snapshotsCmd},
		{"rm", "rm ID...                       terminate sandboxes", rmCmd},
		{"pull", "pull [--data-dir DIR] REF      pull an OCI image into the data dir (the daemon's with AIRLOCK_HOST)", pullCmd},
		{"images", "images [ls [--json] | rm REF... | prune]   the data dir's images (the daemon's with AIRLOCK_HOST)", imagesCmd},
		{"pool", "pool [ls [--json] | inspect NAME | put NAME --size N [flags] | rm NAME...]   the daemon's warm pools", poolCmd},
		{"volumes", "volumes [--json]               the operator's volumes this key may mount (create --volume NAME:PATH)", volumesCmd},
		{"templates", "templates [--json]             the root filesystem templates this key may name (create --template)", templatesCmd},
		{"tenants", "tenants [--json]               quotas and usage: the key's tenant, or every tenant with an admin key", tenantsCmd},
		{"webhooks", "webhooks [ls | add URL [--event T]... | inspect ID | rm ID... | deliveries ID | test ID]   the tenant's webhooks", webhooksCmd},
		{"tools", "tools [ls | inspect NAME | call NAME [--arg K=V]... | put FILE | rm NAME... | servers ... | policies ...]   the tool gateway", toolsCmd},
		{"mcp", "mcp [--agent ID] [--sandbox ID]   an MCP server on stdio serving the daemon's tools (for desktop clients)", mcpCmd},
		{"console", "console [--open]               the web console's address, with this key (AIRLOCK_TOKEN) in it", consoleCmd},
		{"audit", "audit verify [--data-dir DIR]  check the audit log's hash chain; names the first bad event", auditCmd},
		{"doctor", "doctor [--json]                what this host can do, and why not", doctorCmd},
		{"version", "version                        print the version", versionCmd},
	}
}

// Main runs the command line and returns the exit status.
func Main(args []string, stdin *os.File, stdout, stderr io.Writer) int {
	return main(&env{stdin: stdin, stdout: stdout, stderr: stderr, log: newLogger(stderr)}, args)
}

// MainKube is Main in airlock-kube, the binary whose serve can be a Kubernetes node (start).
func MainKube(args []string, stdin *os.File, stdout, stderr io.Writer, kube KubeNode) int {
	return main(&env{stdin: stdin, stdout: stdout, stderr: stderr, log: newLogger(stderr), kube: &kube}, args)
}

func main(e *env, args []string) int {
	stderr := e.stderr
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, v := range verbs() {
		if v.name == args[0] {
			return v.run(e, args[1:])
		}
	}
	fmt.Fprintf(stderr, "airlock: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: airlock COMMAND [ARGS]")
	fmt.Fprintln(w)
	for _, v := range verbs() {
		fmt.Fprintln(w, "  airlock "+v.usage)
	}
}

// newLogger logs to stderr at the level in AIRLOCK_LOG (debug, info, warn, error; default warn),
// so that a one-shot run prints nothing of its own unless something is wrong.
func newLogger(w io.Writer) *slog.Logger { return newLoggerAt(w, os.Getenv("AIRLOCK_LOG"), "text") }

// newLoggerAt logs to w at level, as text or (format "json") one JSON object per record.
func newLoggerAt(w io.Writer, level, format string) *slog.Logger {
	lvl := slog.LevelWarn
	switch strings.ToLower(level) {
	case "debug":
		lvl = slog.LevelDebug
	case "info":
		lvl = slog.LevelInfo
	case "error":
		lvl = slog.LevelError
	}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl}))
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lvl}))
}
