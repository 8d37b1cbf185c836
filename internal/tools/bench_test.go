package tools

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/airlockrun/airlock/api"
)

// BenchmarkCall is the gateway's own path for an http tool (the operator's, egress daemon)
// against a local server — policy, validation, rate limit, the request, the tool.call event —
// beside the same request made directly; the API's hop is not in it (internal/server's
// BenchmarkToolCall has it, test/bench/tools the whole daemon).
func BenchmarkCall(b *testing.B) {
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"q":%q,"answer":"local"}`, r.URL.Query().Get("q"))
	}))
	defer local.Close()
	r := newRig(b, Config{
		Tools: []ConfigTool{{Tenants: []string{"*"}, ToolDefinition: api.ToolDefinition{Name: "local_http", RateLimit: "1000000/1s",
			InputSchema: map[string]any{"type": "object", "required": []any{"q"}, "properties": map[string]any{"q": map[string]any{"type": "string", "pattern": "^[a-z]+$"}}},
			HTTP:        &api.HTTPBackend{URL: local.URL + "/echo", Query: map[string]string{"q": "{{q}}"}, Egress: api.ToolEgressDaemon}}}},
		Policies: []api.ToolPolicy{{Name: "p", Tenant: "*", Allow: []string{"local_http"}}},
	})
	args := map[string]any{"q": "bench"}
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
			if _, err := r.g.Call(r.ctx, "local_http", api.ToolCallRequest{Arguments: args}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
