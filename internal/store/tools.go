package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/airlockrun/airlock/internal/errdefs"
)

// Kinds of ToolObject.
const (
	ToolKindTool   = "tool"
	ToolKindServer = "server"
	ToolKindPolicy = "policy"
)

// ToolObject is one definition of the tool gateway made through the API: a tool, an upstream
// MCP server or a policy of Tenant, named Name among its kind. Body is its JSON; the gateway
// checks it when it is put and again when it is loaded.
type ToolObject struct {
	Tenant, Kind, Name string
	Body               []byte
	Source             string // tenant or admin
	CreatedBy          string // the key's ID
	UpdatedAt          time.Time
}

// PutToolObject stores o, replacing the one of the same tenant, kind and name.
func (s *Store) PutToolObject(ctx context.Context, o ToolObject) error {
	if _, err := s.write.ExecContext(ctx,
		`INSERT INTO tool_objects (tenant, kind, name, body, source, created_by, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)
		 ON CONFLICT (tenant, kind, name) DO UPDATE SET body = excluded.body, source = excluded.source,
		 created_by = excluded.created_by, updated_at = excluded.updated_at`,
		o.Tenant, o.Kind, o.Name, string(o.Body), o.Source, o.CreatedBy, toNanos(orNow(o.UpdatedAt))); err != nil {
		return fmt.Errorf("%s %q of tenant %s: %w", o.Kind, o.Name, o.Tenant, err)
	}
	return nil
}

// DeleteToolObject removes one; a missing one is ErrNotFound.
func (s *Store) DeleteToolObject(ctx context.Context, tenant, kind, name string) error {
	res, err := s.write.ExecContext(ctx, `DELETE FROM tool_objects WHERE tenant = ? AND kind = ? AND name = ?`, tenant, kind, name)
	if err != nil {
		return fmt.Errorf("%s %q of tenant %s: %w", kind, name, tenant, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("%s %q of tenant %s: %w", kind, name, tenant, err)
	} else if n == 0 {
		return fmt.Errorf("%s %q of tenant %s: %w", kind, name, tenant, errdefs.ErrNotFound)
	}
	return nil
}

// ToolObjects returns every stored tool object, by tenant, kind and name.
func (s *Store) ToolObjects(ctx context.Context) ([]ToolObject, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT tenant, kind, name, body, source, created_by, updated_at FROM tool_objects ORDER BY tenant, kind, name`)
	if err != nil {
		return nil, fmt.Errorf("list tool objects: %w", err)
	}
	return collect(rows, "list tool objects", func(row interface{ Scan(...any) error }) (ToolObject, error) {
		var o ToolObject
		var body string
		var at int64
		err := row.Scan(&o.Tenant, &o.Kind, &o.Name, &body, &o.Source, &o.CreatedBy, &at)
		o.Body, o.UpdatedAt = []byte(body), fromNanos(at)
		return o, err
	})
}

// KeyTenant returns the tenant of API key id (revoked keys included); an unknown key is
// ErrNotFound.
func (s *Store) KeyTenant(ctx context.Context, id string) (string, error) {
	var ten string
	err := s.read.QueryRowContext(ctx, `SELECT tenant FROM api_keys WHERE id = ?`, id).Scan(&ten)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("key %q: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("key %q: %w", id, err)
	}
	return ten, nil
}
