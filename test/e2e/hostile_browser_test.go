package e2e

import (
	"database/sql"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/internal/websocket"
)

// browserAndAudit: what the web console added to the API, tried with another tenant's ids. A
// WebSocket keyed by its subprotocol (a browser's way) reaches only its own tenant's sandbox and
// only from the daemon's origin; the audit chain's verification tells a tenant nothing of
// another tenant's events, even where the chain breaks at one.
func (h *hostile) browserAndAudit(t *testing.T) {
	sb, err := h.c1.Create(bg(), smallSpec())
	if err != nil {
		t.Fatal(err)
	}
	defer terminate(bg(), t, h.c1, sb.ID)
	shOK(t, h.c1, sb.ID, "echo mine")

	ws := "ws" + strings.TrimPrefix(h.d.url, "http") + "/api/v1/sandboxes/" + sb.ID + "/exec"
	for _, c := range []struct {
		name, key, origin string
		status            int
	}{
		{"t2's key on t1's sandbox", h.t2, h.d.url, http.StatusNotFound},
		{"t1's key from another origin", h.t1, "http://evil.example", http.StatusForbidden},
		{"t1's key", h.t1, h.d.url, http.StatusSwitchingProtocols},
	} {
		hd := http.Header{"Sec-WebSocket-Protocol": {"airlock.v1, airlock.bearer." + c.key}, "Origin": {c.origin}}
		conn, resp, err := websocket.Dial(bg(), ws, hd, nil)
		if conn != nil {
			_ = conn.CloseNow() // only the handshake was under test
		}
		if resp == nil || resp.StatusCode != c.status {
			t.Errorf("%s: %v %v, want %d", c.name, resp, err, c.status)
		}
	}

	// The chain, whole, for every key.
	var mine api.Event
	for range 100 {
		p, err := h.c1.Events(bg(), sb.ID, client.EventOptions{Type: api.EventExecExited})
		if err == nil && len(p.Events) > 0 {
			mine = p.Events[0]
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if mine.ID == "" {
		t.Fatal("t1's exec.exited was not recorded")
	}
	for _, c := range []*client.Client{h.c2, h.adminC} {
		if v, err := c.VerifyAudit(bg()); err != nil || !v.Intact || v.HeadSeq < mine.Seq {
			t.Fatalf("verify of the untouched log: %+v %v", v, err)
		}
	}
	// An edit of t1's event: the admin key's answer names it, t2's only its place.
	db, err := sql.Open("sqlite", filepath.Join(h.dataDir, "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var body string
	if err := db.QueryRow(`SELECT body FROM events WHERE seq = ?`, mine.Seq).Scan(&body); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE events SET body = replace(body, 'exit', 'EXIT') WHERE seq = ?`, mine.Seq); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if _, err := db.Exec(`UPDATE events SET body = ? WHERE seq = ?`, body, mine.Seq); err != nil {
			t.Error(err)
		}
		if v, err := h.adminC.VerifyAudit(bg()); err != nil || !v.Intact {
			t.Errorf("verify once the edit is undone: %+v %v", v, err)
		}
	}()
	if v, err := h.adminC.VerifyAudit(bg()); err != nil || v.Intact || v.Problem == nil || v.Problem.ID != mine.ID {
		t.Fatalf("admin's verify after an edit of t1's event: %+v %v", v, err)
	}
	req, _ := http.NewRequest("GET", h.d.url+"/api/v1/audit/verify", nil)
	req.Header.Set("Authorization", "Bearer "+h.t2)
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), `"intact":false`) {
		t.Errorf("t2's verify after the edit: %d %s", resp.StatusCode, raw)
	}
	for _, secret := range []string{mine.ID, sb.ID, mine.ExecutionID, "t1"} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("t2's verify names t1's %q: %s", secret, raw)
		}
	}
	if v, err := h.c1.VerifyAudit(bg()); err != nil || v.Problem == nil || v.Problem.ID != mine.ID {
		t.Errorf("t1's verify of its own edited event: %+v %v", v, err)
	}
}
