package e2e

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/airlockrun/airlock/api"
)

// TestListsAreArrays walks every GET route of the daemon's own OpenAPI document whose "data" is
// declared an array and checks that a fresh daemon (a sandbox with no execs, no snapshots, no
// webhooks...) answers a JSON array there, never null.
func TestListsAreArrays(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	key := newKey(t, dir, "t1")
	d := startDaemon(t, dir)
	c := d.client(key)
	sb, err := c.Create(bg(), smallSpec())
	if err != nil {
		t.Fatal(err)
	}
	// A webhook that nothing triggers: its delivery log is empty.
	hook, err := c.CreateWebhook(bg(), api.WebhookRequest{URL: "https://hooks.example.com/x", Events: []string{"limit.memory"}})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string, auth bool) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", d.url+path, nil)
		if auth {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		var body json.RawMessage
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return resp.StatusCode, body
	}
	_, raw := get("/api/v1/openapi.json", false)
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]struct {
				Content map[string]struct {
					Schema struct {
						Properties struct {
							Data struct {
								Type string `json:"type"`
							} `json:"data"`
						} `json:"properties"`
					} `json:"schema"`
				} `json:"content"`
			} `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var lists []string
	for path, ops := range doc.Paths {
		if ops["get"].Responses["200"].Content["application/json"].Schema.Properties.Data.Type == "array" {
			lists = append(lists, path)
		}
	}
	sort.Strings(lists)
	if len(lists) < 5 {
		t.Fatalf("the OpenAPI document declares only %d array routes: %v", len(lists), lists)
	}
	param := regexp.MustCompile(`\{\w+\}`)
	for _, path := range lists {
		p := strings.NewReplacer("{id}", sb.ID, "{webhookId}", hook.ID).Replace(path)
		if param.MatchString(p) {
			t.Errorf("%s: a path parameter this test does not know; teach it", path)
			continue
		}
		if strings.HasSuffix(p, "/files/list") {
			p += "?path=/tmp"
		}
		status, body := get(p, true)
		var env struct {
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(body, &env); err != nil {
			t.Errorf("GET %s: %v in %s", path, err, body)
		}
		if status != http.StatusOK || !strings.HasPrefix(string(env.Data), "[") {
			t.Errorf("GET %s: %d, data %s; want 200 and a JSON array", path, status, env.Data)
		}
	}
	t.Logf("array routes checked: %v", lists)
}
