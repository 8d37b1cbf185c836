package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
)

// PutPool stores warm pool p, replacing one of the same name.
func (s *Store) PutPool(ctx context.Context, p api.Pool) error {
	body, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("pool %q: encode: %w", p.Name, err)
	}
	if _, err := s.write.ExecContext(ctx,
		`INSERT INTO pools (name, body, updated_at) VALUES (?, ?, ?)
		 ON CONFLICT (name) DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at`,
		p.Name, body, toNanos(time.Now())); err != nil {
		return fmt.Errorf("pool %q: %w", p.Name, err)
	}
	return nil
}

// DeletePool removes warm pool name; a missing one is ErrNotFound.
func (s *Store) DeletePool(ctx context.Context, name string) error {
	res, err := s.write.ExecContext(ctx, `DELETE FROM pools WHERE name = ?`, name)
	if err != nil {
		return fmt.Errorf("pool %q: %w", name, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("pool %q: %w", name, err)
	} else if n == 0 {
		return fmt.Errorf("pool %q: %w", name, errdefs.ErrNotFound)
	}
	return nil
}

// Pools returns the stored warm pools by name.
func (s *Store) Pools(ctx context.Context) ([]api.Pool, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT body FROM pools ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list pools: %w", err)
	}
	return collect(rows, "list pools", func(row interface{ Scan(...any) error }) (api.Pool, error) {
		var body []byte
		var p api.Pool
		if err := row.Scan(&body); err != nil {
			return p, err
		}
		return p, json.Unmarshal(body, &p)
	})
}

// Claim hands ready sandbox ID from tenant From (a warm pool's) to tenant To with the claiming
// create's Spec, created At. Its history (the pool's provisioning → ready) stays.
type Claim struct {
	ID, From, To string
	Spec         api.Spec
	At           time.Time
}

// ClaimSandboxes records claims in one transaction (the manager groups concurrent claims, so a
// burst of them costs one commit). A claim whose sandbox is no longer From's and ready gets
// ErrConflict in its slot of the result and changes nothing; err is for the whole transaction.
func (s *Store) ClaimSandboxes(ctx context.Context, claims []Claim) (each []error, err error) {
	each = make([]error, len(claims))
	err = s.writeTx(ctx, func(tx *sql.Tx) error {
		st, err := tx.PrepareContext(ctx, `UPDATE sandboxes SET tenant = ?, agent_id = ?, spec = ?, created_at = ?, updated_at = ?
			WHERE id = ? AND tenant = ? AND status = ?`)
		if err != nil {
			return err
		}
		defer st.Close()
		for i, c := range claims {
			b, err := json.Marshal(c.Spec)
			if err != nil {
				each[i] = fmt.Errorf("sandbox %q: encode spec: %w", c.ID, err)
				continue
			}
			res, err := st.ExecContext(ctx, c.To, c.Spec.AgentID, b, toNanos(c.At), toNanos(c.At), c.ID, c.From, api.StatusReady)
			if err != nil {
				return fmt.Errorf("claim sandbox %q: %w", c.ID, err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return fmt.Errorf("claim sandbox %q: %w", c.ID, err)
			} else if n == 0 {
				each[i] = fmt.Errorf("sandbox %q is no longer a ready sandbox of %s: %w", c.ID, c.From, errdefs.ErrConflict)
			}
		}
		return nil
	})
	return each, err
}
