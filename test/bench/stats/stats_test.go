package stats

import (
	"math"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	oneToTen := []float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1} // unsorted on purpose
	tests := []struct {
		name string
		xs   []float64
		p    float64
		want float64
	}{
		{"empty is NaN", nil, 50, math.NaN()},
		{"NaN p is NaN", []float64{1}, math.NaN(), math.NaN()},
		{"single value", []float64{7}, 90, 7},
		{"p0 is min", oneToTen, 0, 1},
		{"p100 is max", oneToTen, 100, 10},
		{"p50 of even count interpolates", oneToTen, 50, 5.5},
		{"p90 interpolates", oneToTen, 90, 9.1},
		{"p50 of odd count is the middle", []float64{3, 1, 2}, 50, 2},
		{"p below 0 clamps", oneToTen, -5, 1},
		{"p above 100 clamps", oneToTen, 150, 10},
		{"duplicates", []float64{2, 2, 2, 2}, 90, 2},
		{"two values p25", []float64{0, 4}, 25, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Percentile(tc.xs, tc.p)
			if math.IsNaN(tc.want) {
				if !math.IsNaN(got) {
					t.Fatalf("Percentile(%v, %v) = %v, want NaN", tc.xs, tc.p, got)
				}
				return
			}
			if math.Abs(got-tc.want) > 1e-9 {
				t.Fatalf("Percentile(%v, %v) = %v, want %v", tc.xs, tc.p, got, tc.want)
			}
		})
	}
}

// TestPercentileDoesNotMutate guards the "pure" promise: callers keep samples in run order
// (the JSON report relies on it), so sorting in place would silently reorder them.
func TestPercentileDoesNotMutate(t *testing.T) {
	xs := []float64{3, 1, 2}
	Percentile(xs, 50)
	if xs[0] != 3 || xs[1] != 1 || xs[2] != 2 {
		t.Fatalf("percentile reordered its input: %v", xs)
	}
}

func TestSummarize(t *testing.T) {
	ms := time.Millisecond
	got := Summarize([]time.Duration{4 * ms, 1 * ms, 3 * ms, 2 * ms})
	want := Summary{P50: 2.5, P90: 3.7, Min: 1, Mean: 2.5}
	if math.Abs(got.P50-want.P50) > 1e-9 || math.Abs(got.P90-want.P90) > 1e-9 ||
		got.Min != want.Min || got.Mean != want.Mean {
		t.Fatalf("summarize = %+v, want %+v", got, want)
	}
	if s := Summarize(nil); !math.IsNaN(s.P50) || !math.IsNaN(s.Mean) {
		t.Fatalf("Summarize(nil) = %+v, want NaNs", s)
	}
}

func TestRatio(t *testing.T) {
	if r := Ratio(3, 2); r != 1.5 {
		t.Fatalf("Ratio(3, 2) = %v", r)
	}
	if r := Ratio(1, 0); !math.IsNaN(r) {
		t.Fatalf("Ratio(1, 0) = %v, want NaN", r)
	}
}
