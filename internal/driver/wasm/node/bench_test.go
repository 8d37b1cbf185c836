package node

import (
	"context"
	"io"
	"sort"
	"testing"
	"time"
)

// BenchmarkRunConsoleLog is a warm `node -e 'console.log(1)'`: one Run on a shared Runner. It
// also reports the median and 90th percentile of single runs.
func BenchmarkRunConsoleLog(b *testing.B) {
	r := testRunner(b)
	ctx := context.Background()
	cfg := Config{Args: []string{"-e", "console.log(1)"}, Stdout: io.Discard, Stderr: io.Discard}
	times := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		res, err := r.Run(ctx, cfg)
		times = append(times, time.Since(start))
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("run: %v %+v", err, res)
		}
	}
	b.StopTimer()
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	b.ReportMetric(float64(times[len(times)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(times[len(times)*9/10].Microseconds()), "p90-µs")
}

// BenchmarkNewRunner is the one-time cost: two compilations and the snapshot.
func BenchmarkNewRunner(b *testing.B) {
	testRunner(b) // skips without quickjs.wasm
	wasm := mustReadWasm(b)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		rt := newTestRuntime(ctx, 0)
		if _, err := NewRunner(ctx, rt, wasm); err != nil {
			b.Fatal(err)
		}
		rt.Close(ctx)
	}
}
