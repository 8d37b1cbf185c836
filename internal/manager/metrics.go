package manager

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// metricRing keeps a sandbox's recent samples.
type metricRing struct {
	mu      sync.Mutex // guards samples
	samples []api.MetricsSample
	max     int
}

func newMetricRing(max int) *metricRing { return &metricRing{max: max} }

func (r *metricRing) add(s api.MetricsSample) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.samples); n > 0 {
		s.CPUPercent = cpuPercent(r.samples[n-1], s)
	}
	r.samples = append(r.samples, s)
	if len(r.samples) > r.max {
		r.samples = append(r.samples[:0], r.samples[len(r.samples)-r.max:]...)
	}
}

// recent is a copy of the samples: [] when there is none yet, as every list is answered.
func (r *metricRing) recent() []api.MetricsSample {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]api.MetricsSample{}, r.samples...)
}

func cpuPercent(prev, cur api.MetricsSample) float64 {
	wall := cur.Time.Sub(prev.Time)
	if wall <= 0 {
		return 0
	}
	return float64(cur.CPUTimeMs-prev.CPUTimeMs) * float64(time.Millisecond) / float64(wall) * 100
}

// read takes one sample of b's kernel counters.
func (b *box) read(ctx context.Context, now time.Time) (api.MetricsSample, error) {
	status, sb := b.state()
	if sb == nil {
		return api.MetricsSample{}, &sandbox.StateError{ID: b.id, Status: status, Op: "read metrics"}
	}
	st, ok := sb.(driver.Statser)
	if !ok {
		return api.MetricsSample{}, fmt.Errorf("isolation level %s has no metrics: %w", b.level(), errdefs.ErrUnavailable)
	}
	u, err := st.Usage(ctx)
	if err != nil {
		return api.MetricsSample{}, err
	}
	return api.MetricsSample{
		Time: now.UTC(), CPUTimeMs: u.CPUTime.Milliseconds(),
		MemoryBytes: u.MemoryBytes, MemoryPeakBytes: u.MemoryPeakBytes, MemoryLimit: u.MemoryLimitBytes,
		Pids: u.Pids, PidsLimit: u.PidsLimit, DiskUsedBytes: u.DiskUsedBytes, DiskLimitBytes: u.DiskLimitBytes,
		NetworkTxBytes: u.NetTxBytes, NetworkRxBytes: u.NetRxBytes,
	}, nil
}

// sample records one reading of a ready sandbox, for the "recent" of GET .../metrics.
func (m *Manager) sample(b *box, now time.Time) {
	if status, sb := b.state(); sb == nil || status == api.StatusProvisioning {
		return
	}
	if s, err := b.read(context.Background(), now); err == nil {
		b.metrics.add(s)
	}
}

// Metrics returns a live sandbox's current counters and its recent samples, oldest first.
func (m *Manager) Metrics(ctx context.Context, id string) (api.Metrics, error) {
	b, err := m.live(ctx, id, "read metrics")
	if err != nil {
		return api.Metrics{}, err
	}
	cur, err := b.read(ctx, time.Now())
	if err != nil {
		return api.Metrics{}, err
	}
	recent := b.metrics.recent()
	if n := len(recent); n > 0 {
		cur.CPUPercent = cpuPercent(recent[n-1], cur)
	}
	return api.Metrics{SandboxID: id, Current: cur, Recent: recent}, nil
}
