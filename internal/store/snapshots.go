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

// Snapshot is a snapshot's stored record; its content is in the snapshot store's blobs.
type Snapshot struct {
	ID, Tenant, SandboxID string
	Name, Description     string
	Spec                  api.Spec // the sandbox's, credentials' values removed
	LayerDigest           string
	LayerSize             int64             // compressed
	LayerBytes            int64             // the tar stream
	Memory                map[string]string // a memory image: file name → blob digest; nil for none
	MemorySize            int64
	CreatedAt             time.Time
}

// Digests are the blobs the snapshot uses.
func (sn Snapshot) Digests() []string {
	out := []string{sn.LayerDigest}
	for _, d := range sn.Memory {
		out = append(out, d)
	}
	return out
}

const snapshotColumns = `id, tenant, sandbox_id, name, description, spec, layer_digest, layer_size, layer_bytes, memory, memory_size, created_at`

// PutSnapshot stores a new snapshot; a duplicate ID is ErrConflict.
func (s *Store) PutSnapshot(ctx context.Context, sn Snapshot) error {
	spec, err := json.Marshal(sn.Spec)
	if err != nil {
		return fmt.Errorf("snapshot %q: encode spec: %w", sn.ID, err)
	}
	var mem any
	if sn.Memory != nil {
		b, err := json.Marshal(sn.Memory)
		if err != nil {
			return fmt.Errorf("snapshot %q: encode memory: %w", sn.ID, err)
		}
		mem = string(b)
	}
	_, err = s.write.ExecContext(ctx, `INSERT INTO snapshots (`+snapshotColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		sn.ID, sn.Tenant, sn.SandboxID, sn.Name, sn.Description, spec, sn.LayerDigest, sn.LayerSize, sn.LayerBytes,
		mem, sn.MemorySize, toNanos(orNow(sn.CreatedAt)))
	return inserted("snapshot", sn.ID, err)
}

// Snapshot returns snapshot id of tenant ("" = any tenant); another tenant's is ErrNotFound.
func (s *Store) Snapshot(ctx context.Context, tenant, id string) (Snapshot, error) {
	sn, err := scanSnapshot(s.read.QueryRowContext(ctx, `SELECT `+snapshotColumns+` FROM snapshots
		WHERE id = ? AND (? = '' OR tenant = ?)`, id, tenant, tenant))
	if errors.Is(err, sql.ErrNoRows) {
		return Snapshot{}, fmt.Errorf("snapshot %s: %w", id, errdefs.ErrNotFound)
	}
	return sn, err
}

// Snapshots returns tenant's snapshots, newest first: those of sandboxID, or all when it is "".
func (s *Store) Snapshots(ctx context.Context, tenant, sandboxID string) ([]Snapshot, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+snapshotColumns+` FROM snapshots
		WHERE (? = '' OR tenant = ?) AND (? = '' OR sandbox_id = ?) ORDER BY created_at DESC, id`,
		tenant, tenant, sandboxID, sandboxID)
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	return collect(rows, "list snapshots", scanSnapshot)
}

// DeleteSnapshot removes snapshot id of tenant and returns it, with the blobs of it no other
// snapshot uses (for the caller to remove), in one transaction.
func (s *Store) DeleteSnapshot(ctx context.Context, tenant, id string) (sn Snapshot, unused []string, err error) {
	err = s.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		sn, err = scanSnapshot(tx.QueryRowContext(ctx, `SELECT `+snapshotColumns+` FROM snapshots
			WHERE id = ? AND (? = '' OR tenant = ?)`, id, tenant, tenant))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("snapshot %s: %w", id, errdefs.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM snapshots WHERE id = ?`, id); err != nil {
			return err
		}
		for _, d := range sn.Digests() {
			var n int
			// A memory image's files are few; a LIKE over the JSON is enough to find a shared one.
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM snapshots WHERE layer_digest = ? OR memory LIKE ?`,
				d, "%"+d+"%").Scan(&n); err != nil {
				return err
			}
			if n == 0 {
				unused = append(unused, d)
			}
		}
		return nil
	})
	return sn, unused, err
}

// SnapshotDigests returns every blob digest a snapshot uses, for the store's garbage collection.
func (s *Store) SnapshotDigests(ctx context.Context) (map[string]bool, error) {
	all, err := s.Snapshots(ctx, "", "")
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, sn := range all {
		for _, d := range sn.Digests() {
			out[d] = true
		}
	}
	return out, nil
}

func scanSnapshot(row interface{ Scan(...any) error }) (Snapshot, error) {
	var sn Snapshot
	var spec []byte
	var mem sql.NullString
	var created int64
	if err := row.Scan(&sn.ID, &sn.Tenant, &sn.SandboxID, &sn.Name, &sn.Description, &spec, &sn.LayerDigest,
		&sn.LayerSize, &sn.LayerBytes, &mem, &sn.MemorySize, &created); err != nil {
		return Snapshot{}, err
	}
	if err := json.Unmarshal(spec, &sn.Spec); err != nil {
		return Snapshot{}, fmt.Errorf("snapshot %q: decode spec: %w", sn.ID, err)
	}
	if mem.Valid {
		if err := json.Unmarshal([]byte(mem.String), &sn.Memory); err != nil {
			return Snapshot{}, fmt.Errorf("snapshot %q: decode memory: %w", sn.ID, err)
		}
	}
	sn.CreatedAt = fromNanos(created)
	return sn, nil
}

// SnapshotBytes returns, by tenant, the bytes its snapshots hold (compressed layer and memory
// image).
func (s *Store) SnapshotBytes(ctx context.Context) (map[string]int64, error) {
	return sumByTenant(ctx, s.read, "snapshot bytes", `SELECT tenant, SUM(layer_size + memory_size) FROM snapshots GROUP BY tenant`)
}

// sumByTenant runs a query of (tenant, sum) rows into a map.
func sumByTenant(ctx context.Context, db *sql.DB, what, query string) (map[string]int64, error) {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var t string
		var n sql.NullInt64
		if err := rows.Scan(&t, &n); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out[t] = n.Int64
	}
	return out, rows.Err()
}
