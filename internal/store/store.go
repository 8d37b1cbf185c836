// Package store is airlock's persistence: tenants and API keys, sandboxes and their lifecycle
// transitions, and exec records, in one embedded SQLite database (pure Go, no cgo).
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/airlockrun/airlock/internal/errdefs"
)

// Sync modes of Options.Sync.
const (
	// SyncNormal is WAL with synchronous=NORMAL: a committed record survives a crash or a kill -9
	// of the daemon (it is in the WAL file, in the kernel's page cache), not a power loss.
	SyncNormal = "normal"
	// SyncFull fsyncs the WAL at every commit: a committed record survives a power loss.
	SyncFull = "full"
)

// busyTimeout is how long a connection waits for another's lock before failing with
// SQLITE_BUSY. Inside the daemon writes never contend (there is one writer connection); this is
// for other processes on the same file, such as `airlock keys create`, and for checkpoints.
const busyTimeout = 10 * time.Second

// Options tune the database.
type Options struct {
	// Sync is "normal" (the default: WAL with synchronous=NORMAL: a committed record survives a
	// crash or kill -9 of the daemon, not a power loss) or "full" (fsync per commit: survives
	// power loss, slower).
	Sync string
	// SealKey, when set (SealKeySize bytes, LoadSealKey), seals webhook secrets at rest; those
	// stored in the clear by an earlier airlock are sealed at open.
	SealKey []byte
}

// Validate reports an unknown sync mode.
func (o Options) Validate() error {
	if o.SealKey != nil && len(o.SealKey) != SealKeySize {
		return fmt.Errorf("store: a seal key has %d bytes (got %d)", SealKeySize, len(o.SealKey))
	}
	switch o.Sync {
	case "", SyncNormal, SyncFull:
		return nil
	}
	return errdefs.Invalid("sync", "must be %q or %q, not %q", SyncNormal, SyncFull, o.Sync)
}

// Store is an open database. Its methods are safe for concurrent use.
type Store struct {
	// write is the only connection that writes (SetMaxOpenConns(1)): writers queue in
	// database/sql rather than in SQLite's busy handler, so they never see SQLITE_BUSY. Its
	// statements' errors go through health (a full disk is ErrStoreFull).
	write writer
	// read is a pool of read-only connections; in WAL mode readers never wait for the writer.
	read *sql.DB
	log  *slog.Logger

	authMu sync.Mutex
	auth   map[string]authEntry // Authenticate's recent answers, by the secret's hash

	sealKey []byte // seals webhook secrets; nil stores them as they are

	health health // whether writes work (health.go)
}

// Open opens (creating if needed) the database at path (file mode 0600, parent dir 0700), sets
// WAL mode, foreign keys, busy_timeout and the sync mode, and runs the migrations.
func Open(ctx context.Context, path string, opts Options, log *slog.Logger) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("database path: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("database directory: %w", err)
	}
	// Create the file ourselves so that its mode is 0600 whatever the umask; SQLite gives the
	// -wal and -shm files the mode of the database file.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("database file: %w", err)
	}
	f.Close()

	sync := "NORMAL"
	if opts.Sync == SyncFull {
		sync = "FULL"
	}
	// journal_size_limit: a WAL that grew (a burst of writes, or checkpoints held back while the
	// disk was full) is truncated back to 16 MiB at its next reset, so the disk gets the room back.
	write, err := sql.Open("sqlite", dsn(path, true,
		"journal_mode(WAL)", "synchronous("+sync+")", "foreign_keys(1)", "journal_size_limit(16777216)"))
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)

	read, err := sql.Open("sqlite", dsn(path, false, "query_only(1)", "foreign_keys(1)"))
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	read.SetMaxOpenConns(n)
	read.SetMaxIdleConns(n) // keep them: opening one runs the pragmas again
	read.SetConnMaxIdleTime(0)

	s := &Store{read: read, log: log, auth: map[string]authEntry{}, sealKey: opts.SealKey}
	s.write = writer{DB: write, health: &s.health}
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("database %s: %w", path, err)
	}
	if err := s.sealStored(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("database %s: %w", path, err)
	}
	return s, nil
}

// dsn is the modernc.org/sqlite data source name of the database at the absolute path, with the
// busy timeout and the given pragmas; write transactions of a writer begin IMMEDIATE, so they take
// the write lock at BEGIN (waiting in the busy handler) instead of failing when they upgrade.
func dsn(path string, writer bool, pragmas ...string) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	if writer {
		q.Set("_txlock", "immediate")
	}
	u := url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}
	return u.String()
}

// Close closes the database. Closing the last connection checkpoints the WAL into the database
// file.
func (s *Store) Close() error {
	return errors.Join(s.read.Close(), s.write.Close())
}

// writeTx runs fn in one write transaction (BEGIN IMMEDIATE) on the writer connection and commits
// it if fn returns nil. A failure of the disk is an errdefs.ErrStoreFull (health.wrote).
func (s *Store) writeTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return s.health.wrote(err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback() // fn's error is the one that says what went wrong
		return s.health.wrote(err)
	}
	if err := tx.Commit(); err != nil {
		// SQLite may keep the transaction open after a COMMIT that failed for the disk
		// (SQLITE_FULL, SQLITE_IOERR); database/sql keeps the connection, so end it here or the
		// next BEGIN fails. There is one writer connection: this is that one.
		// It fails, harmlessly, when SQLite ended the transaction itself.
		_, _ = s.write.DB.ExecContext(context.WithoutCancel(ctx), `ROLLBACK`)
		return s.health.wrote(err)
	}
	return s.health.wrote(nil)
}

// inserted is the error of inserting row id of kind ("sandbox", "exec", ...): nil, ErrConflict
// where a row of that id exists, or err wrapped.
func inserted(kind, id string, err error) error {
	switch {
	case err == nil:
		return nil
	case isUniqueViolation(err):
		return fmt.Errorf("%s %q already exists: %w", kind, id, errdefs.ErrConflict)
	default:
		return fmt.Errorf("insert %s %q: %w", kind, id, err)
	}
}

// sqliteCode is the extended SQLite result code of err, or 0.
func sqliteCode(err error) int {
	if e, ok := errors.AsType[*sqlite.Error](err); ok {
		return e.Code()
	}
	return 0
}

// isUniqueViolation reports a duplicate primary key or unique column.
func isUniqueViolation(err error) bool {
	c := sqliteCode(err)
	return c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY || c == sqlite3.SQLITE_CONSTRAINT_UNIQUE
}

// isForeignKeyViolation reports a reference to a row that does not exist.
func isForeignKeyViolation(err error) bool {
	return sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
}

// Timestamps are stored as integer nanoseconds since the Unix epoch (UTC by definition), which
// sort and compare as numbers.

func toNanos(t time.Time) int64 { return t.UnixNano() }

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// orNow is t, or the current time if t is zero.
func orNow(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}

// collect scans every row with scan, closing rows; errors carry what. No rows is an empty
// slice, not nil (the API's lists are arrays, never null).
func collect[T any](rows *sql.Rows, what string, scan func(interface{ Scan(...any) error }) (T, error)) ([]T, error) {
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}
