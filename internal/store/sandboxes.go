package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
)

// Sandbox is a sandbox's stored record.
type Sandbox struct {
	ID, Tenant string
	Spec       api.Spec // stored as JSON
	Status     string
	Reason     string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// Host is the level's facts needed to find the sandbox's host resources after a crash (e.g.
	// init pid, cgroup path), stored as JSON.
	Host json.RawMessage
	// Instance is the id the level knows the sandbox by when it is not ID: a restore replaces the
	// level's sandbox with a new one (see Restored).
	Instance string
}

// LevelID is the id the sandbox's level knows it by.
func (sb Sandbox) LevelID() string {
	if sb.Instance != "" {
		return sb.Instance
	}
	return sb.ID
}

// Filter selects sandboxes; its zero value selects all.
type Filter struct {
	Tenant   string   // "" = every tenant
	Status   []string // any of these; empty = any status
	AgentID  string
	Metadata map[string]string // every pair must be in spec.metadata
	Limit    int               // 0 = no limit
}

// InsertSandbox stores a new sandbox and its first transition ("" → sb.Status, for sb.Reason, at
// sb.CreatedAt). A zero CreatedAt is now; a zero UpdatedAt is CreatedAt. A duplicate ID is
// ErrConflict.
func (s *Store) InsertSandbox(ctx context.Context, sb Sandbox) error {
	if sb.ID == "" {
		return errdefs.Invalid("id", "a sandbox needs an ID")
	}
	if sb.Status == "" {
		return errdefs.Invalid("status", "a sandbox needs a status")
	}
	if len(sb.Host) > 0 && !json.Valid(sb.Host) {
		return errdefs.Invalid("host", "not valid JSON")
	}
	spec, err := json.Marshal(sb.Spec)
	if err != nil {
		return fmt.Errorf("sandbox %q: encode spec: %w", sb.ID, err)
	}
	sb.CreatedAt = orNow(sb.CreatedAt)
	if sb.UpdatedAt.IsZero() {
		sb.UpdatedAt = sb.CreatedAt
	}
	err = s.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO sandboxes
			(id, tenant, agent_id, spec, status, reason, created_at, updated_at, host)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			sb.ID, sb.Tenant, sb.Spec.AgentID, spec, sb.Status, sb.Reason,
			toNanos(sb.CreatedAt), toNanos(sb.UpdatedAt), nullJSON(sb.Host)); err != nil {
			return err
		}
		return insertTransition(ctx, tx, sb.ID, api.Transition{
			To: sb.Status, Reason: sb.Reason, At: sb.CreatedAt,
		})
	})
	return inserted("sandbox", sb.ID, err)
}

func insertTransition(ctx context.Context, tx *sql.Tx, id string, t api.Transition) error {
	_, err := tx.ExecContext(ctx,
		`INSERT INTO transitions (sandbox_id, from_status, to_status, reason, at) VALUES (?, ?, ?, ?, ?)`,
		id, t.From, t.To, t.Reason, toNanos(t.At))
	return err
}

// nullJSON stores an empty raw message as NULL.
func nullJSON(m json.RawMessage) any {
	if len(m) == 0 {
		return nil
	}
	return string(m)
}

// Transition moves sandbox id from status from to t.To, with reason t.Reason, and appends the
// transition to its history, in one transaction. If the stored status is not from, it changes
// nothing and returns ErrConflict (an optimistic check: another request moved the sandbox first).
// The recorded transition's From is from; a zero t.At is now.
func (s *Store) Transition(ctx context.Context, id, from string, t api.Transition) error {
	if t.To == "" {
		return errdefs.Invalid("to", "a transition needs a target status")
	}
	t.From = from
	t.At = orNow(t.At)
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx,
			`UPDATE sandboxes SET status = ?, reason = ?, updated_at = ? WHERE id = ? AND status = ?`,
			t.To, t.Reason, toNanos(t.At), id, from)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			var status string
			err := tx.QueryRowContext(ctx, `SELECT status FROM sandboxes WHERE id = ?`, id).Scan(&status)
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("sandbox %q: %w", id, errdefs.ErrNotFound)
			} else if err != nil {
				return err
			}
			return fmt.Errorf("sandbox %q is %s, not %s: %w", id, status, from, errdefs.ErrConflict)
		}
		return insertTransition(ctx, tx, id, t)
	})
	if err != nil {
		return fmt.Errorf("transition %s→%s: %w", from, t.To, err)
	}
	return nil
}

// SetHost replaces sandbox id's host facts.
func (s *Store) SetHost(ctx context.Context, id string, host json.RawMessage) error {
	if len(host) > 0 && !json.Valid(host) {
		return errdefs.Invalid("host", "not valid JSON")
	}
	return s.update(ctx, id, "set host", `UPDATE sandboxes SET host = ? WHERE id = ?`, nullJSON(host), id)
}

// Restored records that sandbox id now runs as the level's sandbox instance, restored from a
// snapshot with spec (the snapshot's environment, workdir and metadata), whose host facts are
// host; and, in the same transaction, that the level's sandbox retired, which instance replaced,
// is to be torn down (Retired, Reclaimed).
func (s *Store) Restored(ctx context.Context, id, instance string, spec api.Spec, host json.RawMessage, retired string) error {
	if len(host) > 0 && !json.Valid(host) {
		return errdefs.Invalid("host", "not valid JSON")
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("sandbox %q: encode spec: %w", id, err)
	}
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE sandboxes SET instance = ?, spec = ?, host = ? WHERE id = ?`, instance, b, nullJSON(host), id)
		if err != nil {
			return fmt.Errorf("sandbox %q: record restore: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return fmt.Errorf("sandbox %q: %w", id, errors.Join(err, errdefs.ErrNotFound))
		}
		if err := retire(ctx, tx, retired, id, spec.Isolation); err != nil {
			return err
		}
		// The new instance, recorded before it was made (Retire), is the sandbox's now.
		if _, err := tx.ExecContext(ctx, `DELETE FROM retired_instances WHERE level_id = ?`, instance); err != nil {
			return fmt.Errorf("sandbox %q: record restore: %w", id, err)
		}
		return nil
	})
}

// Retire records that the level's instance levelID of sandbox id is to be torn down unless a
// later write says otherwise: a restore records the instance it is about to make, so that a
// daemon killed before Restored reclaims it (Retired), and Restored (or Reclaimed) clears it.
func (s *Store) Retire(ctx context.Context, levelID, id, isolation string) error {
	return s.writeTx(ctx, func(tx *sql.Tx) error { return retire(ctx, tx, levelID, id, isolation) })
}

func retire(ctx context.Context, tx *sql.Tx, levelID, id, isolation string) error {
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO retired_instances (level_id, sandbox_id, isolation, retired_at) VALUES (?, ?, ?, ?)`,
		levelID, id, isolation, time.Now().UnixMilli()); err != nil {
		return fmt.Errorf("sandbox %q: record retired instance %s: %w", id, levelID, err)
	}
	return nil
}

// RetiredInstance is a level's sandbox that a restore replaced and whose teardown was not
// recorded as done.
type RetiredInstance struct {
	LevelID, SandboxID, Isolation string
}

// Retired lists the instances restores replaced whose teardown has not been recorded (Reclaimed):
// those a daemon killed meanwhile left.
func (s *Store) Retired(ctx context.Context) ([]RetiredInstance, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT level_id, sandbox_id, isolation FROM retired_instances ORDER BY retired_at, rowid`)
	if err != nil {
		return nil, fmt.Errorf("retired instances: %w", err)
	}
	defer rows.Close()
	var out []RetiredInstance
	for rows.Next() {
		var r RetiredInstance
		if err := rows.Scan(&r.LevelID, &r.SandboxID, &r.Isolation); err != nil {
			return nil, fmt.Errorf("retired instances: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Reclaimed records that retired instance levelID is torn down.
func (s *Store) Reclaimed(ctx context.Context, levelID string) error {
	if _, err := s.write.ExecContext(ctx, `DELETE FROM retired_instances WHERE level_id = ?`, levelID); err != nil {
		return fmt.Errorf("retired instance %q: %w", levelID, err)
	}
	return nil
}

// update runs a one-row UPDATE of sandbox id; no such row is ErrNotFound.
func (s *Store) update(ctx context.Context, id, what, q string, args ...any) error {
	res, err := s.write.ExecContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("sandbox %q: %s: %w", id, what, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("sandbox %q: %s: %w", id, what, err)
	} else if n == 0 {
		return fmt.Errorf("sandbox %q: %w", id, errdefs.ErrNotFound)
	}
	return nil
}

const sandboxColumns = `id, tenant, spec, status, reason, created_at, updated_at, host, instance`

func scanSandbox(row interface{ Scan(...any) error }) (Sandbox, error) {
	var sb Sandbox
	var spec []byte
	var created, updated int64
	var host []byte
	if err := row.Scan(&sb.ID, &sb.Tenant, &spec, &sb.Status, &sb.Reason, &created, &updated, &host, &sb.Instance); err != nil {
		return Sandbox{}, err
	}
	if err := json.Unmarshal(spec, &sb.Spec); err != nil {
		return Sandbox{}, fmt.Errorf("sandbox %q: decode spec: %w", sb.ID, err)
	}
	sb.CreatedAt, sb.UpdatedAt = fromNanos(created), fromNanos(updated)
	if host != nil {
		sb.Host = json.RawMessage(host)
	}
	return sb, nil
}

// Sandbox returns sandbox id of tenant; tenant "" is any tenant. Another tenant's sandbox is
// ErrNotFound, exactly like a missing one, so that its existence is never revealed.
func (s *Store) Sandbox(ctx context.Context, tenant, id string) (Sandbox, error) {
	row := s.read.QueryRowContext(ctx,
		`SELECT `+sandboxColumns+` FROM sandboxes WHERE id = ?1 AND (?2 = '' OR tenant = ?2)`, id, tenant)
	sb, err := scanSandbox(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Sandbox{}, fmt.Errorf("sandbox %q: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return Sandbox{}, fmt.Errorf("sandbox %q: %w", id, err)
	}
	return sb, nil
}

// Sandboxes lists the sandboxes f selects, newest first.
func (s *Store) Sandboxes(ctx context.Context, f Filter) ([]Sandbox, error) {
	var where []string
	var args []any
	if f.Tenant != "" {
		where = append(where, `tenant = ?`)
		args = append(args, f.Tenant)
	}
	if len(f.Status) > 0 {
		where = append(where, `status IN (?`+strings.Repeat(`, ?`, len(f.Status)-1)+`)`)
		for _, st := range f.Status {
			args = append(args, st)
		}
	}
	if f.AgentID != "" {
		where = append(where, `agent_id = ?`)
		args = append(args, f.AgentID)
	}
	// json_each matches keys literally, where a JSON path would need escaping.
	for k, v := range f.Metadata {
		where = append(where, `EXISTS (SELECT 1 FROM json_each(spec, '$.metadata') WHERE key = ? AND value = ?)`)
		args = append(args, k, v)
	}
	q := `SELECT ` + sandboxColumns + ` FROM sandboxes`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	q += ` ORDER BY created_at DESC, rowid DESC`
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	return collect(rows, "list sandboxes", scanSandbox)
}

// Transitions returns sandbox id's transitions in the order they happened. A sandbox without any
// (or no sandbox) yields none.
func (s *Store) Transitions(ctx context.Context, id string) ([]api.Transition, error) {
	rows, err := s.read.QueryContext(ctx,
		`SELECT from_status, to_status, reason, at FROM transitions WHERE sandbox_id = ? ORDER BY seq`, id)
	if err != nil {
		return nil, fmt.Errorf("sandbox %q: transitions: %w", id, err)
	}
	defer rows.Close()
	var out []api.Transition
	for rows.Next() {
		var t api.Transition
		var at int64
		if err := rows.Scan(&t.From, &t.To, &t.Reason, &at); err != nil {
			return nil, fmt.Errorf("sandbox %q: transitions: %w", id, err)
		}
		t.At = fromNanos(at)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sandbox %q: transitions: %w", id, err)
	}
	return out, nil
}
