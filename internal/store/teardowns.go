package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
)

// Teardown is the recorded intent to end a sandbox: its level's instance is to be destroyed, and
// only then the record moved to End for Reason. It is internal: the sandbox's status stays what
// it was until the end is recorded (TornDown clears the intent).
type Teardown struct {
	SandboxID string
	LevelID   string // the instance the level knows the sandbox by (Sandbox.LevelID)
	Isolation string
	End       string // api.StatusTerminated, api.StatusFailed, or api.StatusCompleted (its agent exited 0)
	Reason    string
	At        time.Time // when the intent was recorded; zero in BeginTeardown is now
}

// BeginTeardown records teardown t before anything of it happens. A sandbox has at most one: a
// later one replaces it.
func (s *Store) BeginTeardown(ctx context.Context, t Teardown) error {
	if t.SandboxID == "" || t.LevelID == "" {
		return errdefs.Invalid("id", "a teardown needs a sandbox and an instance")
	}
	if t.End != api.StatusTerminated && t.End != api.StatusFailed && t.End != api.StatusCompleted {
		return errdefs.Invalid("end", "a teardown ends terminated, failed or completed, not %q", t.End)
	}
	if _, err := s.write.ExecContext(ctx, `INSERT OR REPLACE INTO teardowns
		(sandbox_id, level_id, isolation, end_status, reason, recorded_at) VALUES (?, ?, ?, ?, ?, ?)`,
		t.SandboxID, t.LevelID, t.Isolation, t.End, t.Reason, toNanos(orNow(t.At))); err != nil {
		return fmt.Errorf("sandbox %q: record teardown: %w", t.SandboxID, err)
	}
	return nil
}

const teardownColumns = `sandbox_id, level_id, isolation, end_status, reason, recorded_at`

func scanTeardown(row interface{ Scan(...any) error }) (Teardown, error) {
	var t Teardown
	var at int64
	if err := row.Scan(&t.SandboxID, &t.LevelID, &t.Isolation, &t.End, &t.Reason, &at); err != nil {
		return Teardown{}, err
	}
	t.At = fromNanos(at)
	return t, nil
}

// Teardowns lists the teardowns begun and not finished, oldest first: after a kill, those the
// killed daemon was in the middle of.
func (s *Store) Teardowns(ctx context.Context) ([]Teardown, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+teardownColumns+` FROM teardowns ORDER BY recorded_at, rowid`)
	if err != nil {
		return nil, fmt.Errorf("teardowns: %w", err)
	}
	return collect(rows, "teardowns", scanTeardown)
}

// TeardownOf returns sandbox id's unfinished teardown, or ErrNotFound if it has none.
func (s *Store) TeardownOf(ctx context.Context, id string) (Teardown, error) {
	t, err := scanTeardown(s.read.QueryRowContext(ctx, `SELECT `+teardownColumns+` FROM teardowns WHERE sandbox_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Teardown{}, fmt.Errorf("sandbox %q: no teardown: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return Teardown{}, fmt.Errorf("sandbox %q: teardown: %w", id, err)
	}
	return t, nil
}

// TornDown records that sandbox id's teardown is finished: its instance is gone and its end
// recorded. Without a teardown recorded it does nothing.
func (s *Store) TornDown(ctx context.Context, id string) error {
	if _, err := s.write.ExecContext(ctx, `DELETE FROM teardowns WHERE sandbox_id = ?`, id); err != nil {
		return fmt.Errorf("sandbox %q: record teardown done: %w", id, err)
	}
	return nil
}
