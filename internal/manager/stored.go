package manager

import (
	"context"
	"sync"
	"time"
)

// storedBytes counts what the store keeps for each tenant that the tenant can grow (docs/security.md#who-is-trusted-with-what):
// exec output and snapshots. Past the tenant's maxStoredMb the oldest execs' output is dropped
// (their records stay, marked outputDropped) and new snapshots are refused; snapshots are never
// dropped behind the tenant's back.
type storedBytes struct {
	mu       sync.Mutex // guards everything below
	output   map[string]int64
	snaps    map[string]int64
	dropping map[string]bool // a drop of the tenant's output is under way
}

// execRecordOverhead approximates what an exec's record holds beside its output.
const execRecordOverhead = 256

func newStoredBytes() *storedBytes {
	return &storedBytes{output: map[string]int64{}, snaps: map[string]int64{}, dropping: map[string]bool{}}
}

// loadStored reads the counts from the store, at start.
func (m *Manager) loadStored(ctx context.Context) error {
	output, err := m.store.OutputBytes(ctx)
	if err != nil {
		return err
	}
	snaps, err := m.store.SnapshotBytes(ctx)
	if err != nil {
		return err
	}
	s := m.stored
	s.mu.Lock()
	defer s.mu.Unlock()
	s.output, s.snaps = output, snaps
	return nil
}

// storedOf is the tenant's stored bytes.
func (m *Manager) storedOf(ten string) int64 {
	s := m.stored
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.output[ten] + s.snaps[ten]
}

// execRecorded counts an exec's recorded output, and drops the tenant's oldest output in the
// background once it is past its quota, down to 90 % of it.
func (m *Manager) execRecorded(ten string, n int64) {
	limit := m.cfg.Grants.QuotaOf(ten).MaxStoredMB << 20
	s := m.stored
	s.mu.Lock()
	s.output[ten] += n + execRecordOverhead
	over := s.output[ten] + s.snaps[ten] - limit*9/10
	start := limit > 0 && s.output[ten]+s.snaps[ten] > limit && !s.dropping[ten]
	if start {
		s.dropping[ten] = true
	}
	s.mu.Unlock()
	if !start {
		return
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		freed, err := m.store.DropOutput(ctx, ten, over)
		s.mu.Lock()
		s.output[ten] -= freed
		s.dropping[ten] = false
		s.mu.Unlock()
		if err != nil {
			m.log.Warn("drop old exec output", "tenant", ten, "err", err)
		}
		m.log.Info("dropped old exec output past the tenant's stored quota", "tenant", ten, "freed", freed)
	}()
}

// snapshotRoom refuses a new snapshot when the tenant's snapshots fill its stored quota.
func (m *Manager) snapshotRoom(ten string) error {
	limit := m.cfg.Grants.QuotaOf(ten).MaxStoredMB << 20
	s := m.stored
	s.mu.Lock()
	used := s.snaps[ten]
	s.mu.Unlock()
	if limit > 0 && used >= limit {
		return quotaError("maxStoredMb", "tenant %q's snapshots hold %d MiB, its quota of stored bytes (%d MiB): delete some first", ten, used>>20, limit>>20)
	}
	return nil
}

// snapshotStored counts (n > 0) or uncounts (n < 0) a snapshot's bytes.
func (m *Manager) snapshotStored(ten string, n int64) {
	s := m.stored
	s.mu.Lock()
	s.snaps[ten] = max(0, s.snaps[ten]+n)
	s.mu.Unlock()
}
