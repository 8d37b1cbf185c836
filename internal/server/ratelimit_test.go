package server

import (
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
)

func TestRateLimits(t *testing.T) {
	l := newRateLimits(func(tenant string) api.Quota {
		if tenant == "free" {
			return api.Quota{}
		}
		return api.Quota{RequestsPerSecond: 10, Burst: 3}
	})
	t0 := time.Unix(1000, 0)
	steps := []struct {
		tenant string
		at     time.Duration
		ok     bool
		wait   time.Duration
	}{
		{"a", 0, true, 0}, {"a", 0, true, 0}, {"a", 0, true, 0}, // the burst
		{"a", 0, false, 100 * time.Millisecond}, // empty: a token in 1/10 s
		{"b", 0, true, 0},                       // another tenant's bucket is its own
		{"a", 50 * time.Millisecond, false, 50 * time.Millisecond},
		{"a", 100 * time.Millisecond, true, 0}, // refilled at 10/s
		{"a", 10 * time.Second, true, 0}, {"a", 10 * time.Second, true, 0}, {"a", 10 * time.Second, true, 0},
		{"a", 10 * time.Second, false, 100 * time.Millisecond}, // never more than the burst
		{"free", 0, true, 0}, {"free", 0, true, 0}, {"free", 0, true, 0}, {"free", 0, true, 0}, // unbounded
	}
	for i, s := range steps {
		ok, wait := l.allow(s.tenant, t0.Add(s.at))
		if ok != s.ok || (wait-s.wait).Abs() > time.Millisecond {
			t.Errorf("step %d (%s at %v): %v %v, want %v %v", i, s.tenant, s.at, ok, wait, s.ok, s.wait)
		}
	}
}
