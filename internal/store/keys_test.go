package store

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/internal/errdefs"
)

func TestValidateTenant(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"a", true},
		{"Acme.prod_01-eu", true},
		{strings.Repeat("x", 64), true},
		{"", false},
		{strings.Repeat("x", 65), false},
		{"a b", false},
		{"a/b", false},
		{"tenant!", false},
		{"é", false},
	}
	for _, tt := range tests {
		err := ValidateTenant(tt.name)
		if tt.ok != (err == nil) {
			t.Errorf("ValidateTenant(%q) = %v; want ok=%v", tt.name, err, tt.ok)
		}
		if err != nil {
			if fe, ok := errors.AsType[*errdefs.FieldError](err); !ok || fe.Field != "tenant" ||
				!errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("ValidateTenant(%q) = %#v; want an invalid-argument FieldError for tenant", tt.name, err)
			}
		}
	}
}

func TestKeys(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t, Options{})

	if _, _, err := s.CreateKey(ctx, "bad tenant"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("CreateKey(bad tenant) = %v; want ErrInvalidArgument", err)
	}

	secretA, keyA, err := s.CreateKey(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	secretA2, keyA2, err := s.CreateKey(ctx, "acme") // the tenant exists now
	if err != nil {
		t.Fatal(err)
	}
	secretB, keyB, err := s.CreateKey(ctx, "globex")
	if err != nil {
		t.Fatal(err)
	}
	secretOp, keyOp, err := s.CreateAdminKey(ctx, "ops")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^alk_[a-z2-7]{40}$`).MatchString(secretA) {
		t.Errorf("secret %q: want alk_ and 40 base32 characters", secretA)
	}
	if !regexp.MustCompile(`^key_[a-z2-7]{16}$`).MatchString(keyA.ID) {
		t.Errorf("key ID %q: want key_ and 16 base32 characters", keyA.ID)
	}
	if secretA == secretA2 || keyA.ID == keyA2.ID {
		t.Error("two keys share a secret or an ID")
	}

	// Secrets are stored only as hashes: no secret appears in the database, its WAL, or anywhere.
	if _, err := s.write.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, secret := range []string{secretA, secretA2, secretB} {
			if bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte(secret[len(secretPrefix):])) {
				t.Errorf("%s holds a secret in plain text", f)
			}
		}
		if f == path && !bytes.Contains(b, hashSecret(secretA)) {
			t.Errorf("%s lacks the hash %s", f, hex.EncodeToString(hashSecret(secretA)))
		}
	}

	auth := []struct {
		name, secret string
		want         Principal
	}{
		{"first key", secretA, Principal{Tenant: "acme", KeyID: keyA.ID}},
		{"second key", secretA2, Principal{Tenant: "acme", KeyID: keyA2.ID}},
		{"other tenant", secretB, Principal{Tenant: "globex", KeyID: keyB.ID}},
		{"admin key", secretOp, Principal{Tenant: "ops", KeyID: keyOp.ID, Admin: true}},
	}
	for _, tt := range auth {
		for range 2 { // from the database, then remembered
			if p, err := s.Authenticate(ctx, tt.secret); err != nil || p != tt.want {
				t.Errorf("%s: Authenticate = %+v, %v; want %+v", tt.name, p, err, tt.want)
			}
		}
	}

	// Revoke one key by ID and one by secret.
	for _, idOrSecret := range []string{keyA.ID, secretB} {
		k, err := s.RevokeKey(ctx, idOrSecret)
		if err != nil || k.RevokedAt == nil {
			t.Fatalf("RevokeKey(%q) = %+v, %v", idOrSecret, k, err)
		}
		again, err := s.RevokeKey(ctx, idOrSecret) // idempotent: keeps the first time
		if err != nil || !again.RevokedAt.Equal(*k.RevokedAt) {
			t.Errorf("second RevokeKey(%q) = %+v, %v", idOrSecret, again, err)
		}
	}
	for _, idOrSecret := range []string{"key_nosuchkey", "alk_nosuchsecret", ""} {
		if _, err := s.RevokeKey(ctx, idOrSecret); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("RevokeKey(%q) = %v; want ErrNotFound", idOrSecret, err)
		}
	}

	unauth := []struct{ name, secret string }{
		{"revoked by ID", secretA},
		{"revoked by secret", secretB},
		{"unknown", "alk_" + strings.Repeat("a", 40)},
		{"empty", ""},
		{"the key ID", keyA2.ID},
	}
	for _, tt := range unauth {
		if _, err := s.Authenticate(ctx, tt.secret); !errors.Is(err, errdefs.ErrUnauthenticated) {
			t.Errorf("%s: Authenticate = %v; want ErrUnauthenticated", tt.name, err)
		}
	}
	if _, err := s.Authenticate(ctx, secretA2); err != nil {
		t.Errorf("unrevoked key after revocations: %v", err)
	}

	keys, err := s.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, k := range keys {
		ids = append(ids, k.ID)
		if revoked := k.RevokedAt != nil; revoked != (k.ID != keyA2.ID && k.ID != keyOp.ID) {
			t.Errorf("key %s: revoked = %v", k.ID, revoked)
		}
		if k.CreatedAt.Location() != nil && k.CreatedAt.Location().String() != "UTC" {
			t.Errorf("key %s: CreatedAt not UTC", k.ID)
		}
	}
	if want := []string{keyA.ID, keyA2.ID, keyB.ID, keyOp.ID}; strings.Join(ids, " ") != strings.Join(want, " ") {
		t.Errorf("Keys = %v; want %v (oldest first)", ids, want)
	}
}

// TestAuthenticateRevoked checks how soon a revoked key stops working: at once when this Store
// revoked it, within authTTL when another process did (`airlock keys revoke` beside a daemon).
func TestAuthenticateRevoked(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t, Options{})
	other, err := Open(ctx, path, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, tt := range []struct {
		name    string
		revoker *Store
		within  time.Duration
	}{
		{"here", s, 0},
		{"elsewhere", other, authTTL},
	} {
		t.Run(tt.name, func(t *testing.T) {
			secret, k, err := s.CreateKey(ctx, "acme")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Authenticate(ctx, secret); err != nil { // remembered from now
				t.Fatal(err)
			}
			if _, err := tt.revoker.RevokeKey(ctx, k.ID); err != nil {
				t.Fatal(err)
			}
			revoked := time.Now()
			for {
				_, err := s.Authenticate(ctx, secret)
				if errors.Is(err, errdefs.ErrUnauthenticated) {
					break
				}
				if waited := time.Since(revoked); waited > tt.within+50*time.Millisecond {
					t.Fatalf("the key still works %v after it was revoked (%v), want at most %v", waited, err, tt.within)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}
