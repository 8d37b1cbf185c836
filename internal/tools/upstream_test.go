package tools

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
)

// TestUpstreamHTTP: an operator's MCP server over streamable HTTP (a Go SDK server on loopback)
// behind the gateway: its tools listed as SERVER__TOOL with its schemas, validated by airlock
// before the server sees them, called with the operator's headers, refused by policy like any.
func TestUpstreamHTTP(t *testing.T) {
	var calls, authed atomic.Int64
	srv := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, nil)
	type in struct {
		Word string `json:"word" jsonschema:"a word"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "shout", Description: "upper-cases a word",
		InputSchema: map[string]any{"type": "object", "required": []any{"word"}, "properties": map[string]any{"word": map[string]any{"type": "string", "maxLength": 10}}}},
		func(ctx context.Context, req *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
			calls.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.ToUpper(a.Word)}}}, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "hidden"}, func(ctx context.Context, req *mcp.CallToolRequest, a map[string]any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer upstream-secret" {
			authed.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close) // after the gateway's own cleanup: its sessions end first

	r := newRig(t, Config{
		Servers: []ConfigServer{{ToolServer: api.ToolServer{Name: "up", URL: hs.URL, Tools: []string{"shout"}, RateLimit: "2/1h"},
			Headers: map[string]string{"Authorization": "Bearer upstream-secret"}, Tenants: []string{"t1"}}},
	})
	ts, err := r.g.List(r.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var up *api.Tool
	for i := range ts {
		if strings.HasPrefix(ts[i].Name, "up__") {
			if up != nil {
				t.Errorf("a second upstream tool listed: %s (tools: shout only)", ts[i].Name)
			}
			up = &ts[i]
		}
	}
	if up == nil || up.Name != "up__shout" || up.Source != api.ToolSourceMCP || up.Server != "up" || up.InputSchema["required"] == nil {
		t.Fatalf("upstream tool: %+v", up)
	}
	res, err := r.g.Call(r.ctx, "up__shout", api.ToolCallRequest{Arguments: map[string]any{"word": "hey"}})
	if err != nil || res.IsError || res.Content[0].Text != "HEY" {
		t.Fatalf("call: %+v, %v", res, err)
	}
	// The upstream's schema is checked by airlock: the server never sees this call.
	_, err = r.g.Call(r.ctx, "up__shout", api.ToolCallRequest{Arguments: map[string]any{"word": "much-too-long"}})
	if fe, ok := errors.AsType[*errdefs.FieldError](err); !ok || fe.Field != "/word" || fe.Rule != "maxLength" {
		t.Errorf("an argument past the upstream's schema: %v", err)
	}
	if _, err := r.g.Call(r.ctx, "up__hidden", api.ToolCallRequest{}); !errors.Is(err, errdefs.ErrPermissionDenied) {
		t.Errorf("a tool the server's tools patterns hide: %v", err)
	}
	if _, err := r.g.Call(r.ctx, "up__shout", api.ToolCallRequest{Arguments: map[string]any{"word": "a"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.g.Call(r.ctx, "up__shout", api.ToolCallRequest{Arguments: map[string]any{"word": "b"}}); !errors.Is(err, errdefs.ErrQuota) {
		t.Errorf("past the server's rateLimit: %v", err)
	}
	if calls.Load() != 2 || authed.Load() == 0 {
		t.Errorf("the server got %d calls (want 2) and %d requests with the operator's header", calls.Load(), authed.Load())
	}
	evs := r.events(t)
	last := evs[len(evs)-1]
	if last.Data["server"] != "up" || last.Data["code"] != api.CodeRateLimited {
		t.Errorf("the last event: %+v", last)
	}
	// Another tenant is not granted the server.
	if _, ok := r.g.fixedServers["up"]; !ok || granted(r.g.fixedServers["up"].tenants, "t2") {
		t.Error("the server is granted to t1 only")
	}
}
