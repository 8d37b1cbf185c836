package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/internal/mcpserve"
)

// mcpCmd is `airlock mcp`: an MCP server on stdin and stdout for desktop clients (Claude
// Desktop, Claude Code, Cursor), serving the tools of the daemon at AIRLOCK_HOST that the key in
// AIRLOCK_TOKEN may call. Every call goes to the daemon's POST /api/v1/tools/{name}/call, so it
// is allowed, validated, rate-limited and recorded there; stdout carries only MCP.
func mcpCmd(e *env, args []string) int {
	r := newRemote(e, "mcp", "[--agent ID] [--sandbox ID]")
	agent := r.fs.String("agent", "", "the agent the calls are made for (policies may be scoped to it)")
	sandboxID := r.fs.String("sandbox", "", "run built-in and exec tools in this sandbox of yours")
	if code := r.noArgs(args); code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	b := clientBackend{c: r.c, agent: *agent, sandbox: *sandboxID}
	srv := mcpserve.New(Version, e.log, func(context.Context, mcp.Request) (mcpserve.Backend, error) { return b, nil })
	if err := srv.Run(ctx, &mcp.StdioTransport{}); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(e.stderr, "airlock mcp:", err)
		return exitError
	}
	return 0
}

// clientBackend serves the MCP server from the daemon's API.
type clientBackend struct {
	c              *client.Client
	agent, sandbox string
}

func (b clientBackend) List(ctx context.Context) ([]api.Tool, error) {
	return b.c.Tools(ctx, client.ToolsOptions{AgentID: b.agent})
}

func (b clientBackend) Call(ctx context.Context, name string, args map[string]any) (api.ToolResult, error) {
	res, err := b.c.CallTool(ctx, name, api.ToolCallRequest{Arguments: args, AgentID: b.agent, SandboxID: b.sandbox})
	if e, ok := errors.AsType[*client.Error](err); ok {
		return api.ToolResult{}, &mcpserve.Refusal{Code: e.Code, Message: e.Message, Field: e.Field, Rule: e.Rule, RetryAfterSeconds: e.RetryAfter}
	}
	return res, err
}
