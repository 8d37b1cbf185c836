package manager

import (
	"context"
	"io"
	"slices"
	"testing"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/snapshot"
	"github.com/airlockrun/airlock/internal/store"
)

// TestRecoverCollectsBlobs: a snapshot blob that no record names (a daemon killed between
// storing a snapshot's content and its record, or between deleting a record and its content) is
// removed at the next start; the blobs records name stay.
func TestRecoverCollectsBlobs(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	dir := t.TempDir()
	blobs, err := snapshot.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	put := func(content string) string {
		t.Helper()
		b, err := blobs.PutLayer(func(w io.Writer) error { _, err := io.WriteString(w, content); return err })
		if err != nil {
			t.Fatal(err)
		}
		return b.Digest
	}
	kept, orphan := put("recorded"), put("never recorded")
	sn := store.Snapshot{ID: "snap_1", Tenant: "t1", SandboxID: "sbx_1", Name: "s", Spec: sandbox.Spec{Isolation: api.LevelProcess}, LayerDigest: kept}
	if err := st.PutSnapshot(ctx, sn); err != nil {
		t.Fatal(err)
	}
	m := testManagerWith(t, st, drivertest.NewFake(), Config{SnapshotDir: dir})
	if err := m.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := blobs.Digests(); err != nil || !slices.Equal(got, []string{kept}) {
		t.Errorf("blobs after recovery: %q %v, want %q only (not %q)", got, err, kept, orphan)
	}
}
