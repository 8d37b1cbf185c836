// Package mcpserve serves airlock's tools over MCP (docs/tools.md#mcp), with the official Go SDK:
// the daemon's streamable HTTP endpoint (/mcp) and `airlock mcp` on stdio. The tools listed are
// exactly those the caller may call, computed at each tools/list; each tools/call goes through
// the gateway's path (allowlist, validation, rate limit, audit), and a refusal comes back as a
// tool error the model reads (isError, with the code, field and rule).
package mcpserve

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockrun/airlock/api"
)

// Backend serves one caller's tools: the gateway for a request of the daemon's, the daemon's API
// (through the Go SDK) for `airlock mcp`.
type Backend interface {
	List(ctx context.Context) ([]api.Tool, error)
	Call(ctx context.Context, name string, args map[string]any) (api.ToolResult, error)
}

// Refusal is a call the backend refused (not allowed, invalid arguments, rate limited): it
// becomes a tool error with what the API's error says. Backends return errors that unwrap to
// one where they can; any other error is a protocol error.
type Refusal struct {
	Code, Message, Field, Rule string
	RetryAfterSeconds          int
}

func (r *Refusal) Error() string { return r.Code + ": " + r.Message }

// text is the refusal as the model reads it.
func (r *Refusal) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "airlock refused the call (%s): %s", r.Code, r.Message)
	if r.Field != "" {
		fmt.Fprintf(&b, "\nfield: %s", r.Field)
	}
	if r.Rule != "" {
		fmt.Fprintf(&b, "\nrule: %s", r.Rule)
	}
	if r.RetryAfterSeconds > 0 {
		fmt.Fprintf(&b, "\nretry after: %d s", r.RetryAfterSeconds)
	}
	return b.String()
}

// New returns an MCP server whose tools/list and tools/call are answered by the backend that
// backendFor gives for each request (which carries the caller: its HTTP headers and token).
func New(version string, log *slog.Logger, backendFor func(ctx context.Context, req mcp.Request) (Backend, error)) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "airlock", Title: "airlock tool gateway", Version: version}, &mcp.ServerOptions{
		Logger:       log,
		Instructions: "Tools run in airlock sandboxes; each call is checked against the caller's policy and the tool's schema, rate-limited and recorded.",
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "tools/list":
				b, err := backendFor(ctx, req)
				if err != nil {
					return nil, err
				}
				return list(ctx, b)
			case "tools/call":
				b, err := backendFor(ctx, req)
				if err != nil {
					return nil, err
				}
				return call(ctx, b, req)
			}
			return next(ctx, method, req)
		}
	})
	return s
}

func list(ctx context.Context, b Backend) (*mcp.ListToolsResult, error) {
	ts, err := b.List(ctx)
	if err != nil {
		return nil, err
	}
	out := &mcp.ListToolsResult{Tools: make([]*mcp.Tool, 0, len(ts))}
	for _, t := range ts {
		schema := t.InputSchema
		if schema == nil {
			schema = map[string]any{"type": "object"}
		}
		out.Tools = append(out.Tools, &mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	return out, nil
}

func call(ctx context.Context, b Backend, req mcp.Request) (*mcp.CallToolResult, error) {
	p, ok := req.GetParams().(*mcp.CallToolParamsRaw)
	if !ok || p == nil {
		return nil, errors.New("tools/call without params")
	}
	var args map[string]any
	if len(p.Arguments) > 0 && string(p.Arguments) != "null" {
		if err := json.Unmarshal(p.Arguments, &args); err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "arguments must be a JSON object: " + err.Error()}}}, nil
		}
	}
	res, err := b.Call(ctx, p.Name, args)
	if err != nil {
		if r, ok := errors.AsType[*Refusal](err); ok {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: r.text()}},
				StructuredContent: map[string]any{"error": map[string]any{"code": r.Code, "message": r.Message, "field": r.Field, "rule": r.Rule}}}, nil
		}
		return nil, err
	}
	return ToMCP(res), nil
}

// ToMCP is a gateway result as MCP's.
func ToMCP(res api.ToolResult) *mcp.CallToolResult {
	out := &mcp.CallToolResult{IsError: res.IsError, Content: []mcp.Content{}}
	for _, c := range res.Content {
		switch c.Type {
		case api.ContentImage, api.ContentAudio:
			data, err := base64.StdEncoding.DecodeString(c.Data)
			if err != nil {
				continue
			}
			if c.Type == api.ContentImage {
				out.Content = append(out.Content, &mcp.ImageContent{Data: data, MIMEType: c.MimeType})
			} else {
				out.Content = append(out.Content, &mcp.AudioContent{Data: data, MIMEType: c.MimeType})
			}
		case api.ContentResource:
			rc := &mcp.ResourceContents{URI: c.URI, MIMEType: c.MimeType, Text: c.Text}
			if c.Data != "" {
				if data, err := base64.StdEncoding.DecodeString(c.Data); err == nil {
					rc.Blob, rc.Text = data, ""
				}
			}
			if rc.URI == "" {
				rc.URI = "airlock:result"
			}
			out.Content = append(out.Content, &mcp.EmbeddedResource{Resource: rc})
		default:
			out.Content = append(out.Content, &mcp.TextContent{Text: c.Text})
		}
	}
	if res.StructuredContent != nil {
		out.StructuredContent = res.StructuredContent
	}
	return out
}
