package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
)

// Exec records are on the hot path of every command: StartExec and FinishExec are one
// autocommitted statement each on the writer connection.

// StartExec records exec e as running. It is written before the command runs, so that a crash
// leaves a record that MarkLost can find. A zero e.StartedAt is now; e.Status is ignored. An
// unknown sandbox is ErrNotFound, a duplicate ID ErrConflict.
func (s *Store) StartExec(ctx context.Context, e api.Execution) error {
	if e.ID == "" {
		return errdefs.Invalid("id", "an execution needs an ID")
	}
	cmd, err := json.Marshal(e.Command)
	if err != nil {
		return fmt.Errorf("exec %q: encode command: %w", e.ID, err)
	}
	_, err = s.write.ExecContext(ctx,
		`INSERT INTO execs (id, sandbox_id, command, status, started_at) VALUES (?, ?, ?, ?, ?)`,
		e.ID, e.SandboxID, cmd, api.ExecRunning, toNanos(orNow(e.StartedAt)))
	switch {
	case isForeignKeyViolation(err):
		return fmt.Errorf("exec %q: sandbox %q: %w", e.ID, e.SandboxID, errdefs.ErrNotFound)
	}
	return inserted("exec", e.ID, err)
}

// FinishExec records the result of running exec id and marks it done. It is written before the
// result is returned to the client. An unknown exec is ErrNotFound; one that is no longer running
// (finished, or lost) is ErrConflict.
func (s *Store) FinishExec(ctx context.Context, id string, res api.ExecResult, ended time.Time) error {
	result, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("exec %q: encode result: %w", id, err)
	}
	r, err := s.write.ExecContext(ctx,
		`UPDATE execs SET status = ?, ended_at = ?, result = ? WHERE id = ? AND status = ?`,
		api.ExecDone, toNanos(orNow(ended)), result, id, api.ExecRunning)
	if err != nil {
		return fmt.Errorf("finish exec %q: %w", id, err)
	}
	if n, err := r.RowsAffected(); err != nil {
		return fmt.Errorf("finish exec %q: %w", id, err)
	} else if n == 1 {
		return nil
	}
	var status string
	err = s.read.QueryRowContext(ctx, `SELECT status FROM execs WHERE id = ?`, id).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("exec %q: %w", id, errdefs.ErrNotFound)
	} else if err != nil {
		return fmt.Errorf("finish exec %q: %w", id, err)
	}
	return fmt.Errorf("exec %q is %s: %w", id, status, errdefs.ErrConflict)
}

const execColumns = `id, sandbox_id, command, status, started_at, ended_at, result`

func scanExec(row interface{ Scan(...any) error }) (api.Execution, error) {
	var e api.Execution
	var cmd, result []byte
	var started int64
	var ended sql.NullInt64
	if err := row.Scan(&e.ID, &e.SandboxID, &cmd, &e.Status, &started, &ended, &result); err != nil {
		return api.Execution{}, err
	}
	if err := json.Unmarshal(cmd, &e.Command); err != nil {
		return api.Execution{}, fmt.Errorf("exec %q: decode command: %w", e.ID, err)
	}
	e.StartedAt = fromNanos(started)
	if ended.Valid {
		t := fromNanos(ended.Int64)
		e.EndedAt = &t
	}
	if result != nil {
		e.Result = new(api.ExecResult)
		if err := json.Unmarshal(result, e.Result); err != nil {
			return api.Execution{}, fmt.Errorf("exec %q: decode result: %w", e.ID, err)
		}
	}
	return e, nil
}

// Exec returns exec id of sandbox sandboxID.
func (s *Store) Exec(ctx context.Context, sandboxID, id string) (api.Execution, error) {
	row := s.read.QueryRowContext(ctx,
		`SELECT `+execColumns+` FROM execs WHERE id = ? AND sandbox_id = ?`, id, sandboxID)
	e, err := scanExec(row)
	if errors.Is(err, sql.ErrNoRows) {
		return api.Execution{}, fmt.Errorf("exec %q: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return api.Execution{}, fmt.Errorf("exec %q: %w", id, err)
	}
	return e, nil
}

// Execs lists sandbox sandboxID's execs, newest first, at most limit of them (0 = all).
func (s *Store) Execs(ctx context.Context, sandboxID string, limit int) ([]api.Execution, error) {
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	rows, err := s.read.QueryContext(ctx, `SELECT `+execColumns+` FROM execs WHERE sandbox_id = ?
		ORDER BY started_at DESC, rowid DESC LIMIT ?`, sandboxID, limit)
	if err != nil {
		return nil, fmt.Errorf("sandbox %q: list execs: %w", sandboxID, err)
	}
	return collect(rows, fmt.Sprintf("sandbox %q: list execs", sandboxID), scanExec)
}

// MarkLost marks every exec still running as lost and returns how many there were. The daemon
// calls it at start, before it runs anything: those execs were cut off by a crash or a kill, and
// their results are unknown.
func (s *Store) MarkLost(ctx context.Context) (int, error) {
	r, err := s.write.ExecContext(ctx, `UPDATE execs SET status = ? WHERE status = ?`, api.ExecLost, api.ExecRunning)
	if err != nil {
		return 0, fmt.Errorf("mark lost execs: %w", err)
	}
	n, err := r.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("mark lost execs: %w", err)
	}
	if n > 0 {
		s.log.Warn("execs lost by a daemon stop", "count", n)
	}
	return int(n), nil
}

// OutputBytes returns, by tenant, the bytes of its execs' recorded results.
func (s *Store) OutputBytes(ctx context.Context) (map[string]int64, error) {
	return sumByTenant(ctx, s.read, "exec output",
		`SELECT sb.tenant, SUM(length(e.result)) FROM execs e JOIN sandboxes sb ON sb.id = e.sandbox_id WHERE e.result IS NOT NULL GROUP BY sb.tenant`)
}

// DropOutput drops the recorded output of tenant's oldest finished execs (their results keep
// everything else, with OutputDropped set) until at least need bytes are freed or none is left,
// and returns the bytes freed.
func (s *Store) DropOutput(ctx context.Context, tenant string, need int64) (int64, error) {
	var freed, after int64 // after: the rowid the next batch starts past (execs are recorded oldest first)
	for freed < need {
		rows, err := s.write.QueryContext(ctx, `SELECT e.rowid, e.id, e.result FROM execs e JOIN sandboxes sb ON sb.id = e.sandbox_id
			WHERE sb.tenant = ? AND e.status = ? AND e.result IS NOT NULL AND e.rowid > ?
			ORDER BY e.rowid LIMIT 64`, tenant, api.ExecDone, after)
		if err != nil {
			return freed, fmt.Errorf("drop output: %w", err)
		}
		type entry struct {
			id     string
			result []byte
		}
		var batch []entry
		for rows.Next() {
			var e entry
			if err := rows.Scan(&after, &e.id, &e.result); err != nil {
				rows.Close()
				return freed, err
			}
			batch = append(batch, e)
		}
		if err := rows.Close(); err != nil {
			return freed, err
		}
		if len(batch) == 0 {
			return freed, nil
		}
		for _, e := range batch {
			var res api.ExecResult
			if err := json.Unmarshal(e.result, &res); err != nil {
				res = api.ExecResult{ExecutionID: e.id} // unreadable: keep nothing of it
			} else if res.OutputDropped {
				continue
			}
			res.Stdout, res.Stderr, res.OutputDropped = "", "", true
			b, _ := json.Marshal(res)
			if _, err := s.write.ExecContext(ctx, `UPDATE execs SET result = ? WHERE id = ?`, b, e.id); err != nil {
				return freed, fmt.Errorf("drop output of exec %q: %w", e.id, err)
			}
			if freed += int64(len(e.result) - len(b)); freed >= need {
				break
			}
		}
	}
	return freed, nil
}
