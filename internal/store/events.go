package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/airlockrun/airlock/api"
)

// TenantEvent is an event with the tenant it belongs to.
type TenantEvent struct {
	Tenant string
	api.Event
}

// AddEvents appends events in one transaction (the manager batches them).
func (s *Store) AddEvents(ctx context.Context, evs []TenantEvent) error {
	if len(evs) == 0 {
		return nil
	}
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		st, err := tx.PrepareContext(ctx, `INSERT INTO events (id, tenant, sandbox_id, execution_id, type, at, body) VALUES (?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer st.Close()
		for _, e := range evs {
			body, err := json.Marshal(e.Event)
			if err != nil {
				return err
			}
			if _, err := st.ExecContext(ctx, e.ID, e.Tenant, e.SandboxID, e.ExecutionID, e.Type, e.Time.UnixNano(), body); err != nil {
				return fmt.Errorf("event %s: %w", e.ID, err)
			}
		}
		return nil
	})
}

// EventFilter selects a sandbox's events.
type EventFilter struct {
	SandboxID   string
	TypePrefix  string // "network." selects network.dns and network.connect
	ExecutionID string
	After       int64 // events with a sequence number above this
	Limit       int   // default 1000
}

// Events returns a sandbox's events in order, each with its sequence number (the cursor for
// the next page).
func (s *Store) Events(ctx context.Context, f EventFilter) ([]api.Event, []int64, error) {
	if f.Limit <= 0 || f.Limit > 10000 {
		f.Limit = 1000
	}
	q := `SELECT seq, body FROM events WHERE sandbox_id = ? AND seq > ?`
	args := []any{f.SandboxID, f.After}
	if f.TypePrefix != "" {
		q += ` AND substr(type, 1, ?) = ?`
		args = append(args, len(f.TypePrefix), f.TypePrefix)
	}
	if f.ExecutionID != "" {
		q += ` AND execution_id = ?`
		args = append(args, f.ExecutionID)
	}
	q += ` ORDER BY seq LIMIT ?`
	args = append(args, f.Limit)
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("events of %s: %w", f.SandboxID, err)
	}
	defer rows.Close()
	var evs []api.Event
	var seqs []int64
	for rows.Next() {
		var seq int64
		var body string
		if err := rows.Scan(&seq, &body); err != nil {
			return nil, nil, err
		}
		var e api.Event
		if err := json.NewDecoder(strings.NewReader(body)).Decode(&e); err != nil {
			return nil, nil, fmt.Errorf("event %d: %w", seq, err)
		}
		evs = append(evs, e)
		seqs = append(seqs, seq)
	}
	return evs, seqs, rows.Err()
}

// SetSpec replaces sandbox id's spec (a live policy change).
func (s *Store) SetSpec(ctx context.Context, id string, spec api.Spec) error {
	b, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	return s.update(ctx, id, "set spec", `UPDATE sandboxes SET spec = ? WHERE id = ?`, string(b), id)
}
