package store

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSealedWebhookSecrets: with a seal key, the database holds no webhook secret in the clear
// (the file alone gives nothing away), the store reads it back whole, secrets an earlier airlock
// stored in the clear are sealed at open, and a wrong key opens nothing.
func TestSealedWebhookSecrets(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "airlock.db")
	keyPath := filepath.Join(dir, "seal.key")
	key, err := LoadSealKey(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(keyPath); st.Mode().Perm() != 0o600 {
		t.Errorf("seal key mode %v", st.Mode().Perm())
	}
	if again, err := LoadSealKey(keyPath); err != nil || string(again) != string(key) {
		t.Fatalf("reload: %v", err)
	}

	// An earlier airlock stored one in the clear.
	old, err := Open(ctx, path, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.PutWebhook(ctx, Webhook{ID: "whk_old", Tenant: "t", URL: "https://a.example/", Events: []string{"*"}, Secret: "old-clear-secret-0"}, 10); err != nil {
		t.Fatal(err)
	}
	old.Close()

	s, err := Open(ctx, path, Options{SealKey: key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutWebhook(ctx, Webhook{ID: "whk_new", Tenant: "t", URL: "https://a.example/", Events: []string{"*"}, Secret: "new-secret-value-1"}, 10); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"whk_old": "old-clear-secret-0", "whk_new": "new-secret-value-1"} {
		if w, err := s.Webhook(ctx, "t", id); err != nil || w.Secret != want {
			t.Errorf("%s: %q %v", id, w.Secret, err)
		}
	}
	s.Close()

	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := raw.Query(`SELECT secret FROM webhooks`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(v, sealPrefix) || strings.Contains(v, "secret") {
			t.Errorf("stored in the database: %q", v)
		}
	}
	rows.Close()
	raw.Close()
	for _, f := range []string{path, path + "-wal"} {
		b, _ := os.ReadFile(f)
		if strings.Contains(string(b), "new-secret-value-1") || strings.Contains(string(b), "old-clear-secret-0") {
			t.Errorf("%s holds the secret in the clear", f)
		}
	}

	wrong := make([]byte, SealKeySize)
	w, err := Open(ctx, path, Options{SealKey: wrong}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Webhook(ctx, "t", "whk_new"); err == nil || !strings.Contains(err.Error(), "seal key") {
		t.Errorf("a wrong key: %v", err)
	}
}
