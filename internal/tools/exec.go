package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/manager"
)

// runExec runs an exec tool: its command, with the arguments in its placeholders and (stdin
// json) on its standard input, in the tool's sandbox.
func (g *Gateway) runExec(ctx context.Context, inv *invocation) (api.ToolResult, error) {
	e := inv.tool.def.Exec
	// Without a sandbox of its own, the tool runs in the caller's workspace, as the built-ins do.
	scope := "workspace"
	if inv.tool.sandbox != nil {
		scope = "tool:" + inv.tool.name
	}
	p, err := g.sandboxFor(ctx, inv, inv.tool.sandbox, scope)
	if err != nil {
		return api.ToolResult{}, err
	}
	defer p.release()
	inv.rec.sandboxID = p.id
	req := api.ExecRequest{Command: render(e.Command, inv.args), Env: e.Env, Workdir: e.Workdir, Timeout: inv.tool.timeout.Seconds()}
	if e.Stdin != api.ToolStdinNone {
		b, err := json.Marshal(orEmpty(inv.args))
		if err != nil {
			return api.ToolResult{}, err
		}
		req.Stdin = string(b)
	}
	res, err := g.m.Exec(ctx, p.id, req, manager.Stream{})
	if err != nil {
		return api.ToolResult{}, err
	}
	return execResult(res, e.Output == api.ToolOutputJSON), nil
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// execResult is an exec's result as a tool's: stdout when it exited 0; otherwise an error with
// its status and stderr.
func execResult(res api.ExecResult, asJSON bool) api.ToolResult {
	sc := map[string]any{"exitCode": res.ExitCode, "stdout": res.Stdout, "stderr": res.Stderr}
	if res.TimedOut {
		sc["timedOut"] = true
	}
	if res.OOMKilled {
		sc["oomKilled"] = true
	}
	if res.ExitCode != 0 || res.TimedOut {
		var b strings.Builder
		switch {
		case res.TimedOut:
			b.WriteString("the command timed out")
		case res.OOMKilled:
			b.WriteString("the command was killed at the sandbox's memory limit")
		default:
			fmt.Fprintf(&b, "the command exited with status %d", res.ExitCode)
		}
		if res.Stderr != "" {
			b.WriteString("\nstderr:\n" + res.Stderr)
		}
		if res.Stdout != "" {
			b.WriteString("\nstdout:\n" + res.Stdout)
		}
		return api.ToolResult{Content: []api.ToolContent{{Type: api.ContentText, Text: b.String()}}, IsError: true, StructuredContent: sc}
	}
	out := api.ToolResult{Content: []api.ToolContent{{Type: api.ContentText, Text: res.Stdout}}}
	if asJSON {
		var v map[string]any
		if err := json.Unmarshal([]byte(res.Stdout), &v); err != nil {
			return errorResult("the tool's output is not a JSON object: %v\nstdout:\n%s", err, res.Stdout)
		}
		out.StructuredContent = v
	}
	return out
}

// render fills argv's {{name}} placeholders with the arguments: a string as it is, anything else
// as JSON, a missing one as "". Each element stays one argument: nothing is split or run by a
// shell.
func render(argv []string, args map[string]any) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = fill(a, args, func(s string) string { return s })
	}
	return out
}

// fill replaces the placeholders of tmpl with the arguments, each passed through esc. It scans
// by hand (a call's hot path): a placeholder is what the regular expression placeholder matches.
func fill(tmpl string, args map[string]any, esc func(string) string) string {
	if !strings.Contains(tmpl, "{{") {
		return tmpl
	}
	var b strings.Builder
	rest := tmpl
	for {
		i := strings.Index(rest, "{{")
		if i < 0 {
			b.WriteString(rest)
			return b.String()
		}
		j := strings.Index(rest[i:], "}}")
		if j < 0 {
			b.WriteString(rest)
			return b.String()
		}
		name := strings.TrimSpace(rest[i+2 : i+j])
		if !validPlaceholder(name) {
			b.WriteString(rest[:i+2])
			rest = rest[i+2:]
			continue
		}
		b.WriteString(rest[:i])
		b.WriteString(argText(args, name, esc))
		rest = rest[i+j+2:]
	}
}

// validPlaceholder: 1 or more of letters, digits, '_', '.', '-' (placeholder's name).
func validPlaceholder(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// argText is argument name as a template puts it: a string as it is, anything else as JSON, a
// missing one as "".
func argText(args map[string]any, name string, esc func(string) string) string {
	v, ok := args[name]
	if !ok || v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return esc(s)
	}
	b, _ := json.Marshal(v) // decoded from JSON: always encodes
	return esc(string(b))
}
