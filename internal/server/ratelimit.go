package server

import (
	"math"
	"sync"
	"time"

	"github.com/airlockrun/airlock/api"
)

// rateLimits holds each tenant's token bucket of API requests (docs/security.md#who-is-trusted-with-what: a tenant's request rate
// is bounded). Only authenticated requests reach it, so it holds one bucket per tenant with a
// key.
type rateLimits struct {
	quota func(tenant string) api.Quota

	mu      sync.Mutex // guards buckets
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newRateLimits(quota func(string) api.Quota) *rateLimits {
	return &rateLimits{quota: quota, buckets: map[string]*bucket{}}
}

// allow takes one request of tenant's bucket at now. When it is empty it says how long until a
// token is back (the Retry-After).
func (l *rateLimits) allow(tenant string, now time.Time) (bool, time.Duration) {
	q := l.quota(tenant)
	if q.RequestsPerSecond <= 0 {
		return true, 0
	}
	burst := float64(max(q.Burst, 1))
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[tenant]
	if !ok {
		b = &bucket{tokens: burst, at: now}
		l.buckets[tenant] = b
	}
	b.tokens = math.Min(burst, b.tokens+now.Sub(b.at).Seconds()*q.RequestsPerSecond)
	b.at = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / q.RequestsPerSecond * float64(time.Second))
}
