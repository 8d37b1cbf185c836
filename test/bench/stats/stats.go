// Package stats reduces benchmark samples to the figures the reports print.
package stats

import (
	"math"
	"sort"
	"time"
)

// Percentile returns the p-th percentile (0 ≤ p ≤ 100) of xs, interpolating linearly between
// the two closest ranks (the definition numpy and most spreadsheets use by default). Linear
// interpolation is chosen over nearest-rank because with ~30 samples nearest-rank makes p90
// jump between neighbouring samples, which reads as noise when runs are compared side by side.
// xs is not modified; an empty xs gives NaN so a missing runner cannot pass for a zero time.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 || math.IsNaN(p) {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	p = math.Max(0, math.Min(100, p))
	rank := p / 100 * float64(len(s)-1)
	lo := int(math.Floor(rank))
	hi := int(math.Ceil(rank))
	return s[lo] + (s[hi]-s[lo])*(rank-float64(lo))
}

// Summary is what the table and the JSON report say about one runner's samples.
type Summary struct {
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	Min  float64 `json:"min_ms"`
	Mean float64 `json:"mean_ms"`
}

// Summarize reduces samples to milliseconds statistics; milliseconds because every runner
// here takes between about one and a few hundred of them.
func Summarize(samples []time.Duration) Summary {
	ms := Millis(samples)
	if len(ms) == 0 {
		nan := math.NaN()
		return Summary{nan, nan, nan, nan, nan}
	}
	sum, lo := 0.0, math.Inf(1)
	for _, v := range ms {
		sum += v
		lo = math.Min(lo, v)
	}
	return Summary{
		P50:  Percentile(ms, 50),
		P90:  Percentile(ms, 90),
		P99:  Percentile(ms, 99),
		Min:  lo,
		Mean: sum / float64(len(ms)),
	}
}

// Millis converts durations to milliseconds.
func Millis(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = float64(d) / float64(time.Millisecond)
	}
	return out
}

// Ratio is a/b, or NaN when b is not a usable denominator, so the report prints "n/a"
// instead of a misleading infinity.
func Ratio(a, b float64) float64 {
	if b <= 0 || math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return a / b
}
