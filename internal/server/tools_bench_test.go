package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/tools"
)

// BenchmarkToolCall is an http tool's call through the API (the operator's, egress daemon,
// against a local server) beside the same request made directly: the gateway's overhead in
// process, without the daemon's own process or the bench's client in the way
// (test/bench/tools measures the whole path).
func BenchmarkToolCall(b *testing.B) {
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"q":%q,"answer":"local"}`, r.URL.Query().Get("q"))
	}))
	defer local.Close()
	r := newToolsAPI(b, tools.Config{
		Tools: []tools.ConfigTool{{Tenants: []string{"*"}, ToolDefinition: api.ToolDefinition{Name: "local_http", RateLimit: "1000000/1s",
			InputSchema: map[string]any{"type": "object", "required": []any{"q"}, "properties": map[string]any{"q": map[string]any{"type": "string", "pattern": "^[a-z]+$"}}},
			HTTP:        &api.HTTPBackend{URL: local.URL + "/echo", Query: map[string]string{"q": "{{q}}"}, Egress: api.ToolEgressDaemon}}}},
		Policies: []api.ToolPolicy{{Name: "p", Tenant: "*", Allow: []string{"local_http"}}},
	})
	c := r.client(b, r.k1)
	ctx := context.Background()
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			resp, err := http.Get(local.URL + "/echo?q=bench")
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	b.Run("gateway", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.CallTool(ctx, "local_http", api.ToolCallRequest{Arguments: map[string]any{"q": "bench"}}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("inspect", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.Tool(ctx, "local_http"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
