package tools

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Rate is a rate limit "N/DURATION": a token bucket that holds N calls and refills N over
// DURATION, so that a burst of N is allowed and then one call every DURATION/N.
type Rate struct {
	N   int
	Per time.Duration
}

// Bounds of a rate.
const (
	maxRateN   = 1_000_000
	maxRatePer = 31 * 24 * time.Hour
)

// ParseRate parses "10/60s", "100/1h", "5/s" (a bare unit is one of it).
func ParseRate(s string) (Rate, error) {
	n, per, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Rate{}, fmt.Errorf("%q: want N/DURATION, e.g. 10/60s", s)
	}
	count, err := strconv.Atoi(n)
	if err != nil || count < 1 || count > maxRateN {
		return Rate{}, fmt.Errorf("%q: N must be a whole number from 1 to %d", s, maxRateN)
	}
	if per != "" && (per[0] < '0' || per[0] > '9') {
		per = "1" + per // "5/s"
	}
	d, err := time.ParseDuration(per)
	if err != nil || d < time.Millisecond || d > maxRatePer {
		return Rate{}, fmt.Errorf("%q: DURATION must be between 1ms and 744h (e.g. 60s, 1h)", s)
	}
	return Rate{N: count, Per: d}, nil
}

func (r Rate) String() string { return fmt.Sprintf("%d/%s", r.N, r.Per) }

// perSecond is the refill rate.
func (r Rate) perSecond() float64 { return float64(r.N) / r.Per.Seconds() }

// limiter holds token buckets by key (tool and caller, policy rule and caller). Buckets that
// have refilled are dropped when the map grows past maxBuckets, so its size follows the callers
// active within a window, not every caller ever seen.
type limiter struct {
	maxBuckets int

	mu      sync.Mutex // guards buckets
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
	rate   Rate
}

func newLimiter(maxBuckets int) *limiter {
	return &limiter{maxBuckets: maxBuckets, buckets: map[string]*bucket{}}
}

// limit is one bucket a call takes a token from: its key, its rate, and the rule that set it.
type limit struct {
	key  string
	rate Rate
	rule string
}

// take takes one token from every bucket of ls at now, or from none: when one is empty it
// returns that limit's rule and how long until it has a token again.
func (l *limiter) take(ls []limit, now time.Time) (ok bool, rule string, wait time.Duration) {
	if len(ls) == 0 {
		return true, "", 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	bs := make([]*bucket, len(ls))
	for i, lm := range ls {
		b := l.buckets[lm.key]
		if b == nil || b.rate != lm.rate {
			b = &bucket{tokens: float64(lm.rate.N), at: now, rate: lm.rate}
			l.buckets[lm.key] = b
		}
		b.tokens = math.Min(float64(b.rate.N), b.tokens+now.Sub(b.at).Seconds()*b.rate.perSecond())
		b.at = now
		if b.tokens < 1 {
			w := time.Duration((1 - b.tokens) / b.rate.perSecond() * float64(time.Second))
			return false, lm.rule, w
		}
		bs[i] = b
	}
	for _, b := range bs {
		b.tokens--
	}
	if len(l.buckets) > l.maxBuckets {
		l.sweepLocked(now)
	}
	return true, "", 0
}

// sweepLocked drops the buckets that are full again (forgetting them changes nothing).
func (l *limiter) sweepLocked(now time.Time) {
	for k, b := range l.buckets {
		if b.tokens+now.Sub(b.at).Seconds()*b.rate.perSecond() >= float64(b.rate.N) {
			delete(l.buckets, k)
		}
	}
}

// size is how many buckets are held (tests).
func (l *limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}
