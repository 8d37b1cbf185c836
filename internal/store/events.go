package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/airlockrun/airlock/api"
)

// TenantEvent is an event with the tenant it belongs to ("" for the daemon's own, such as
// audit.pruned).
type TenantEvent struct {
	Tenant string
	api.Event
}

// EventRow is one stored event of the audit log, as internal/audit hashes it. Body is the
// api.Event as JSON, byte for byte what the hash covers.
type EventRow struct {
	Seq         int64
	ID          string
	Tenant      string
	SandboxID   string
	ExecutionID string
	Type        string
	At          int64 // unix nanoseconds
	Body        []byte
	Hash        string // hex sha-256 over the previous event's hash and this row
}

// Chain is the audit log's chain record: the head is the last event written, the anchor the last
// event retention removed (seq 0 and "" before any). The events that remain are anchor+1..head.
type Chain struct {
	HeadSeq    int64
	HeadHash   string
	AnchorSeq  int64
	AnchorHash string
	// Present is false when the database has no chain record (a new log, or one it was
	// removed from).
	Present bool
}

// AppendEvents inserts rows (sequence numbers and hashes already set, in order) and moves the
// chain's head to the last of them, in one transaction: a batch is in the log whole or not at all.
func (s *Store) AppendEvents(ctx context.Context, rows []EventRow, c Chain) error {
	if len(rows) == 0 {
		return nil
	}
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		st, err := tx.PrepareContext(ctx, `INSERT INTO events (seq, id, tenant, sandbox_id, execution_id, type, at, body, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer st.Close()
		for _, r := range rows {
			if _, err := st.ExecContext(ctx, r.Seq, r.ID, r.Tenant, r.SandboxID, r.ExecutionID, r.Type, r.At, string(r.Body), r.Hash); err != nil {
				return fmt.Errorf("event %d (%s): %w", r.Seq, r.ID, err)
			}
		}
		return putChain(ctx, tx, c)
	})
}

func putChain(ctx context.Context, tx *sql.Tx, c Chain) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO audit_chain (id, head_seq, head_hash, anchor_seq, anchor_hash) VALUES (1, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET head_seq = excluded.head_seq, head_hash = excluded.head_hash,
		anchor_seq = excluded.anchor_seq, anchor_hash = excluded.anchor_hash`, c.HeadSeq, c.HeadHash, c.AnchorSeq, c.AnchorHash)
	return err
}

// ChainState reads the chain record.
func (s *Store) ChainState(ctx context.Context) (Chain, error) {
	var c Chain
	err := s.read.QueryRowContext(ctx, `SELECT head_seq, head_hash, anchor_seq, anchor_hash FROM audit_chain WHERE id = 1`).
		Scan(&c.HeadSeq, &c.HeadHash, &c.AnchorSeq, &c.AnchorHash)
	if errors.Is(err, sql.ErrNoRows) {
		return Chain{}, nil
	}
	if err != nil {
		return Chain{}, fmt.Errorf("audit chain: %w", err)
	}
	c.Present = true
	return c, nil
}

// EventRows returns up to limit stored events with a sequence number above after, in order.
func (s *Store) EventRows(ctx context.Context, after int64, limit int) ([]EventRow, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT seq, id, tenant, sandbox_id, execution_id, type, at, body, hash
		FROM events WHERE seq > ? ORDER BY seq LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("events after %d: %w", after, err)
	}
	defer rows.Close()
	var out []EventRow
	for rows.Next() {
		var r EventRow
		var body string
		if err := rows.Scan(&r.Seq, &r.ID, &r.Tenant, &r.SandboxID, &r.ExecutionID, &r.Type, &r.At, &body, &r.Hash); err != nil {
			return nil, err
		}
		r.Body = []byte(body)
		out = append(out, r)
	}
	return out, rows.Err()
}

// LastEvent returns the stored event with the highest sequence number (ok false when there is
// none).
func (s *Store) LastEvent(ctx context.Context) (r EventRow, ok bool, err error) {
	var body string
	err = s.read.QueryRowContext(ctx, `SELECT seq, id, tenant, sandbox_id, execution_id, type, at, body, hash
		FROM events ORDER BY seq DESC LIMIT 1`).Scan(&r.Seq, &r.ID, &r.Tenant, &r.SandboxID, &r.ExecutionID, &r.Type, &r.At, &body, &r.Hash)
	if errors.Is(err, sql.ErrNoRows) {
		return EventRow{}, false, nil
	}
	if err != nil {
		return EventRow{}, false, fmt.Errorf("last event: %w", err)
	}
	r.Body = []byte(body)
	return r, true, nil
}

// SetEventHashes stores hashes computed for rows written before the log was hash-chained, and
// the chain record they lead to, in one transaction.
func (s *Store) SetEventHashes(ctx context.Context, rows []EventRow, c Chain) error {
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		for _, r := range rows {
			if _, err := tx.ExecContext(ctx, `UPDATE events SET hash = ? WHERE seq = ?`, r.Hash, r.Seq); err != nil {
				return err
			}
		}
		return putChain(ctx, tx, c)
	})
}

// PruneEvents removes the events up to and including sequence number c.AnchorSeq, which
// becomes the chain's anchor, in one transaction.
func (s *Store) PruneEvents(ctx context.Context, c Chain) (int64, error) {
	var n int64
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM events WHERE seq <= ?`, c.AnchorSeq)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		}
		return putChain(ctx, tx, c)
	})
	if err != nil {
		return 0, fmt.Errorf("prune events through %d: %w", c.AnchorSeq, err)
	}
	return n, nil
}

// EventCount is the number of stored events.
func (s *Store) EventCount(ctx context.Context) (int64, error) {
	var n int64
	err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM events`).Scan(&n)
	return n, err
}

// EventFilter selects events. A query names a tenant, a sandbox, or both.
type EventFilter struct {
	Tenant      string
	SandboxID   string
	TypePrefix  string // "network." selects network.dns and network.connect
	ExecutionID string
	After       int64 // events with a sequence number above this
	Since       int64 // unix nanoseconds; events at or after it (0: no bound)
	Until       int64 // unix nanoseconds; events before it (0: no bound)
	Limit       int   // default 1000, at most 10000
}

// Events returns the events f selects in log order, each with its sequence number set (the
// cursor for the next page).
func (s *Store) Events(ctx context.Context, f EventFilter) ([]api.Event, error) {
	if f.Limit <= 0 || f.Limit > 10000 {
		f.Limit = 1000
	}
	if f.Tenant == "" && f.SandboxID == "" {
		return nil, errors.New("events: a query names a tenant or a sandbox")
	}
	var where []string
	var args []any
	if f.SandboxID != "" {
		where, args = append(where, `sandbox_id = ?`), append(args, f.SandboxID)
	}
	if f.Tenant != "" {
		where, args = append(where, `tenant = ?`), append(args, f.Tenant)
	}
	where, args = append(where, `seq > ?`), append(args, f.After)
	if f.TypePrefix != "" {
		where, args = append(where, `substr(type, 1, ?) = ?`), append(args, len(f.TypePrefix), f.TypePrefix)
	}
	if f.ExecutionID != "" {
		where, args = append(where, `execution_id = ?`), append(args, f.ExecutionID)
	}
	if f.Since != 0 {
		where, args = append(where, `at >= ?`), append(args, f.Since)
	}
	if f.Until != 0 {
		where, args = append(where, `at < ?`), append(args, f.Until)
	}
	q := `SELECT seq, body FROM events WHERE ` + strings.Join(where, ` AND `) + ` ORDER BY seq LIMIT ?`
	args = append(args, f.Limit)
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	defer rows.Close()
	evs := []api.Event{}
	for rows.Next() {
		var seq int64
		var body string
		if err := rows.Scan(&seq, &body); err != nil {
			return nil, err
		}
		var e api.Event
		if err := json.Unmarshal([]byte(body), &e); err != nil {
			return nil, fmt.Errorf("event %d: %w", seq, err)
		}
		e.Seq = seq
		evs = append(evs, e)
	}
	return evs, rows.Err()
}

// SetSpec replaces sandbox id's spec (a live policy change).
func (s *Store) SetSpec(ctx context.Context, id string, spec api.Spec) error {
	b, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	return s.update(ctx, id, "set spec", `UPDATE sandboxes SET spec = ? WHERE id = ?`, string(b), id)
}
