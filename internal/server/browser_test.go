package server

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/manager"
	airmetrics "github.com/airlockrun/airlock/internal/metrics"
	"github.com/airlockrun/airlock/internal/metrics/metricstest"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/store"
	"github.com/airlockrun/airlock/internal/websocket"
)

// createVia makes a sandbox with key through the API at url and returns its ID.
func createVia(t *testing.T, url, key string) string {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/api/v1/sandboxes?wait=true", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct{ Data api.Sandbox }
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %v", resp.StatusCode, err)
	}
	return env.Data.ID
}

// TestBrowserWebSocketKey: a browser's WebSocket may carry its key as the subprotocol
// airlock.bearer.<key> beside airlock.v1, which the daemon answers; only on the WebSocket
// routes, only from the daemon's own origin, and refusals are counted like a stranger's.
func TestBrowserWebSocketKey(t *testing.T) {
	mx := airmetrics.New()
	url, key, _, _ := boundsAPI(t, mx, 0)
	id := createVia(t, url, key)
	logs := "ws" + strings.TrimPrefix(url, "http") + "/api/v1/sandboxes/" + id + "/logs"
	both := wsProtocol + ", " + wsBearer + key
	for _, c := range []struct {
		name, url string
		header    map[string]string
		status    int // 101: upgraded
		code      string
	}{
		{"same origin", logs, map[string]string{"Sec-WebSocket-Protocol": both, "Origin": url}, 101, ""},
		{"no origin", logs, map[string]string{"Sec-WebSocket-Protocol": both}, 101, ""},
		{"the key without airlock.v1", logs, map[string]string{"Sec-WebSocket-Protocol": wsBearer + key, "X-Second": ""}, 400, api.CodeInvalidArgument},
		{"another origin", logs, map[string]string{"Sec-WebSocket-Protocol": both, "Origin": "http://evil.example"}, 403, api.CodeForbidden},
		{"another port", logs, map[string]string{"Sec-WebSocket-Protocol": both, "Origin": "http://127.0.0.1:1"}, 403, api.CodeForbidden},
		{"null origin", logs, map[string]string{"Sec-WebSocket-Protocol": both, "Origin": "null"}, 403, api.CodeForbidden},
		{"unknown key", logs, map[string]string{"Sec-WebSocket-Protocol": wsProtocol + ", " + wsBearer + "alk_nope"}, 401, api.CodeUnauthorized},
		{"the header's key, v1 offered", logs, map[string]string{"Authorization": "Bearer " + key, "Sec-WebSocket-Protocol": wsProtocol}, 101, ""},
		{"not a WebSocket route", "ws" + strings.TrimPrefix(url, "http") + "/api/v1/sandboxes", map[string]string{"Sec-WebSocket-Protocol": both}, 401, api.CodeUnauthorized},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range c.header {
				if v != "" {
					h.Set(k, v)
				}
			}
			conn, resp, err := websocket.Dial(context.Background(), c.url, h, nil)
			if c.status == 101 {
				if err != nil {
					t.Fatalf("dial: %v", err)
				}
				defer func() { _ = conn.CloseNow() }() // the test is over: nothing to do
				if got := resp.Header.Values("Sec-WebSocket-Protocol"); len(got) != 1 || got[0] != wsProtocol {
					t.Errorf("answered protocols %q, want only %s (never the key)", got, wsProtocol)
				}
				return
			}
			if resp == nil {
				t.Fatalf("dial: %v", err)
			}
			var env struct{ Error api.Error }
			b, _ := io.ReadAll(resp.Body)
			_ = json.Unmarshal(b, &env)
			if resp.StatusCode != c.status || env.Error.Code != c.code {
				t.Errorf("%d %s, want %d %s", resp.StatusCode, b, c.status, c.code)
			}
			if strings.Contains(string(b), key) {
				t.Errorf("the refusal repeats the key: %s", b)
			}
		})
	}
	// A plain request cannot use the protocol header instead of Authorization.
	if status := send(t, "GET", url+"/api/v1/sandboxes", map[string]string{"Sec-WebSocket-Protocol": both}); status != http.StatusUnauthorized {
		t.Errorf("a plain GET with the key as a protocol: %d, want 401", status)
	}
	fams := metricstest.Scrape(t, url+"/metrics")
	if got := fams.Value("airlock_api_unauthenticated_total", map[string]string{"reason": airmetrics.UnauthenticatedProtocol}); got != 4 {
		t.Errorf("airlock_api_unauthenticated_total{reason=protocol} = %v, want 4", got)
	}
}

// TestSameOrigin: the daemon's origin is the scheme and host a request reached it by, or its
// publicUrl's.
func TestSameOrigin(t *testing.T) {
	s := &Server{cfg: Config{PublicURL: "https://airlock.example.com/base"}}
	r := httptest.NewRequest("GET", "http://127.0.0.1:7070/api/v1/sandboxes/x/exec", nil)
	for origin, want := range map[string]bool{
		"http://127.0.0.1:7070":       true,
		"HTTP://127.0.0.1:7070":       true,
		"https://127.0.0.1:7070":      false, // the request came without TLS
		"http://127.0.0.1:7071":       false,
		"http://localhost:7070":       false,
		"https://airlock.example.com": true,
		"http://airlock.example.com":  false,
		"null":                        false,
		"http://127.0.0.1:7070/x":     false,
		"http://u@127.0.0.1:7070":     false,
	} {
		if got := s.sameOrigin(r, origin); got != want {
			t.Errorf("sameOrigin(%q) = %v, want %v", origin, got, want)
		}
	}
}

// TestVerifyAudit: GET /api/v1/audit/verify walks the chain; a tenant's answer may come from a
// walk up to a minute old and names no other tenant's event, an admin's is fresh and says all.
func TestVerifyAudit(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "airlock.db")
	st, err := store.Open(ctx, path, store.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	k1, _, _ := st.CreateKey(ctx, "t1")
	k2, _, _ := st.CreateKey(ctx, "t2")
	admin := adminKey(t, st, "operator")
	drivers := driver.NewRegistry()
	drivers.Register(drivertest.NewFake())
	log := slog.New(slog.DiscardHandler)
	m := manager.New(manager.Config{DefaultIsolation: sandbox.LevelProcess}, drivers, st, log)
	t.Cleanup(m.Close)
	srv := httptest.NewServer(New(Config{}, m, st, drivers, Images{}, log))
	t.Cleanup(srv.Close)
	createVia(t, srv.URL, k1)
	createVia(t, srv.URL, k2)
	var rows []store.EventRow
	for range 500 { // the audit log writes every 100 ms
		if rows, err = st.EventRows(ctx, 0, 1000); err == nil && len(rows) >= 4 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	verify := func(key string) api.AuditVerification {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+"/api/v1/audit/verify", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var env struct{ Data api.AuditVerification }
		if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || resp.StatusCode != 200 {
			t.Fatalf("verify: %d %v", resp.StatusCode, err)
		}
		return env.Data
	}
	v := verify(k1)
	if !v.Intact || v.Problem != nil || v.Events < 4 || v.FromSeq != 1 || v.HeadSeq < v.Events || len(v.HeadHash) != 64 {
		t.Fatalf("untouched log: %+v", v)
	}
	var victim store.EventRow
	for _, r := range rows {
		if r.Tenant == "t2" {
			victim = r
			break
		}
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE events SET at = at + 1 WHERE seq = ?`, victim.Seq); err != nil {
		t.Fatal(err)
	}
	if v := verify(k1); !v.Intact {
		t.Errorf("a tenant's second call within a minute walked again: %+v", v)
	}
	v = verify(admin)
	if v.Intact || v.Problem == nil || v.Problem.Seq != victim.Seq || v.Problem.ID != victim.ID || !strings.Contains(v.Problem.Reason, "edited") {
		t.Fatalf("admin, after an edit: %+v", v)
	}
	v = verify(k1) // the admin's walk is newer: t1 gets it, without t2's event
	if v.Intact || v.Problem == nil || v.Problem.Seq != victim.Seq || v.Problem.ID != "" || strings.Contains(v.Problem.Reason, "edited") {
		t.Errorf("t1, after an edit of t2's event: %+v", v.Problem)
	}
	v = verify(k2)
	if v.Problem == nil || v.Problem.ID != victim.ID || !strings.Contains(v.Problem.Reason, "edited") {
		t.Errorf("t2, after an edit of its own event: %+v", v.Problem)
	}
}
