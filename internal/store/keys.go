package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base32"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
)

// Key secrets and IDs are lowercase base32: unambiguous, and safe in headers, URLs and shells.
const (
	secretPrefix = "alk_"
	keyIDPrefix  = "key_"
	secretBytes  = 25 // 200 bits: 40 base32 characters
	keyIDBytes   = 10 // 16 base32 characters
)

var keyEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// maxTenantLen is the longest tenant name.
const maxTenantLen = 64

// ValidateTenant reports whether name is a valid tenant name: 1-64 characters of [a-zA-Z0-9._-].
func ValidateTenant(name string) error {
	if name == "" || len(name) > maxTenantLen {
		return errdefs.Invalid("tenant", "must be 1-%d characters long", maxTenantLen)
	}
	if !api.ValidName(name) {
		return errdefs.Invalid("tenant", "may hold only letters, digits, '.', '_' and '-', not %q", name)
	}
	return nil
}

func randomText(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails; it crashes the program if the kernel cannot supply randomness
	return keyEncoding.EncodeToString(b)
}

func hashSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// CreateKey makes a new tenant API key for tenant, creating the tenant if this is its first key.
// The secret is returned once; only its SHA-256 is stored.
func (s *Store) CreateKey(ctx context.Context, tenant string) (secret string, k api.Key, err error) {
	return s.createKey(ctx, tenant, false)
}

// CreateAdminKey makes a new admin key (the operator's, docs/security.md#who-is-trusted-with-what) that acts as tenant for its own
// sandboxes and may also change daemon-wide resources: images, pools.
func (s *Store) CreateAdminKey(ctx context.Context, tenant string) (secret string, k api.Key, err error) {
	return s.createKey(ctx, tenant, true)
}

func (s *Store) createKey(ctx context.Context, tenant string, admin bool) (secret string, k api.Key, err error) {
	if err := ValidateTenant(tenant); err != nil {
		return "", api.Key{}, err
	}
	secret = secretPrefix + randomText(secretBytes)
	k = api.Key{ID: keyIDPrefix + randomText(keyIDBytes), Tenant: tenant, Admin: admin, CreatedAt: time.Now().UTC()}
	err = s.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO tenants (name, created_at) VALUES (?, ?)`,
			tenant, toNanos(k.CreatedAt)); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO api_keys (id, tenant, hash, created_at, admin) VALUES (?, ?, ?, ?, ?)`,
			k.ID, tenant, hashSecret(secret), toNanos(k.CreatedAt), admin)
		return err
	})
	if err != nil {
		return "", api.Key{}, fmt.Errorf("create key for tenant %q: %w", tenant, err)
	}
	return secret, k, nil
}

const keyColumns = `id, tenant, created_at, revoked_at, admin`

func scanKey(row interface{ Scan(...any) error }) (api.Key, error) {
	var k api.Key
	var created int64
	var revoked sql.NullInt64
	if err := row.Scan(&k.ID, &k.Tenant, &created, &revoked, &k.Admin); err != nil {
		return api.Key{}, err
	}
	k.CreatedAt = fromNanos(created)
	if revoked.Valid {
		t := fromNanos(revoked.Int64)
		k.RevokedAt = &t
	}
	return k, nil
}

// Keys lists every key, oldest first, revoked ones included.
func (s *Store) Keys(ctx context.Context) ([]api.Key, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+keyColumns+` FROM api_keys ORDER BY created_at, rowid`)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	return collect(rows, "list keys", scanKey)
}

// RevokeKey revokes the key with the given ID or secret and returns it. Revoking a revoked key
// changes nothing. An unknown key is ErrNotFound.
func (s *Store) RevokeKey(ctx context.Context, idOrSecret string) (api.Key, error) {
	where, arg, what := `id = ?`, any(idOrSecret), idOrSecret
	if strings.HasPrefix(idOrSecret, secretPrefix) {
		where, arg, what = `hash = ?`, hashSecret(idOrSecret), secretPrefix+"…" // never log a secret
	}
	row := s.write.QueryRowContext(ctx,
		`UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE `+where+` RETURNING `+keyColumns,
		toNanos(time.Now()), arg)
	k, err := scanKey(row)
	s.authMu.Lock()
	clear(s.auth) // revoked here: at once
	s.authMu.Unlock()
	if errors.Is(err, sql.ErrNoRows) {
		return api.Key{}, fmt.Errorf("key %q: %w", what, errdefs.ErrNotFound)
	}
	if err != nil {
		return api.Key{}, fmt.Errorf("revoke key %q: %w", what, err)
	}
	return k, nil
}

// Principal is who an API key acts for.
type Principal struct {
	Tenant string
	KeyID  string
	// Admin keys are the operator's: they may change daemon-wide resources (docs/security.md#who-is-trusted-with-what).
	Admin bool
}

// Authenticate returns who secret acts for; an unknown or revoked secret is
// ErrUnauthenticated. The lookup is by the secret's SHA-256, so its timing reveals nothing about
// the stored secrets.
//
// A key found valid is trusted for authTTL without asking the database again (every request
// authenticates, and fifty at once would queue on the read connections). A key revoked through
// this Store stops working at once; one revoked by another process (`airlock keys revoke` beside a
// running daemon) within authTTL.
func (s *Store) Authenticate(ctx context.Context, secret string) (Principal, error) {
	h := hashSecret(secret)
	s.authMu.Lock()
	e, ok := s.auth[string(h)]
	s.authMu.Unlock()
	if ok && time.Since(e.at) < authTTL {
		return e.Principal, nil
	}
	var p Principal
	var revoked sql.NullInt64
	err := s.read.QueryRowContext(ctx, `SELECT id, tenant, revoked_at, admin FROM api_keys WHERE hash = ?`,
		h).Scan(&p.KeyID, &p.Tenant, &revoked, &p.Admin)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Principal{}, fmt.Errorf("unknown API key: %w", errdefs.ErrUnauthenticated)
	case err != nil:
		return Principal{}, fmt.Errorf("authenticate: %w", err)
	case revoked.Valid:
		return Principal{}, fmt.Errorf("API key %s is revoked: %w", p.KeyID, errdefs.ErrUnauthenticated)
	}
	s.authMu.Lock()
	if len(s.auth) >= maxAuthEntries {
		clear(s.auth)
	}
	s.auth[string(h)] = authEntry{Principal: p, at: time.Now()}
	s.authMu.Unlock()
	return p, nil
}

// authTTL is how long Authenticate trusts a key it found valid; maxAuthEntries bounds how many
// it remembers.
const (
	authTTL        = time.Second
	maxAuthEntries = 4096
)

type authEntry struct {
	Principal
	at time.Time
}

// Tenants lists the tenants that have had a key, by name.
func (s *Store) Tenants(ctx context.Context) ([]string, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT name FROM tenants ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	return collect(rows, "list tenants", func(r interface{ Scan(...any) error }) (string, error) {
		var n string
		return n, r.Scan(&n)
	})
}
