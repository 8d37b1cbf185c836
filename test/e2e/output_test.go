package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

const (
	outputLimit = 10 << 20 // bytes of each stream kept by --json (sandbox.DefaultOutputLimit)
	flood       = 300_000_000
	maxRSSKiB   = 80 << 10 // airlock's own memory must stay bounded whatever the command prints
)

// TestOutputBoundedJSON checks that --json keeps at most 10 MiB of a stream, says truncated, and
// that airlock's memory stays bounded while the command writes 300 MB.
func TestOutputBoundedJSON(t *testing.T) {
	tests := []struct {
		name   string
		script string
		stream string
		chars  string // every byte kept is one of these
	}{
		{"stdout zeros", "head -c 300000000 /dev/zero", "stdout", "\x00"},
		{"stdout text", "yes | head -c 300000000", "stdout", "y\n"},
		{"stderr text", "yes | head -c 300000000 >&2", "stderr", "y\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd, rss := measuredCmd(t, ctx, "run", "--json", "--", "sh", "-c", tc.script)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Errorf("airlock run --json: %v (stderr %.300q)", err, stderr.String())
			}
			var res struct {
				Stdout, Stderr string
				Truncated      bool
				LimitEvents    []struct{ Type string }
			}
			if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
				t.Fatalf("--json output: %v", err)
			}
			got := res.Stdout
			if tc.stream == "stderr" {
				got = res.Stderr
			}
			if len(got) != outputLimit {
				t.Errorf("len(%s) = %d, want %d", tc.stream, len(got), outputLimit)
			}
			if strings.Trim(got, tc.chars) != "" {
				t.Errorf("%s holds bytes other than %q", tc.stream, tc.chars)
			}
			if !res.Truncated {
				t.Errorf("truncated = false, want true")
			}
			found := false
			for _, e := range res.LimitEvents {
				found = found || e.Type == "limit.output"
			}
			if !found {
				t.Errorf("limitEvents = %v, want a limit.output event", res.LimitEvents)
			}
			kib := rss()
			t.Logf("airlock max RSS %d KiB, JSON output %d bytes", kib, stdout.Len())
			if kib > maxRSSKiB {
				t.Errorf("airlock max RSS = %d KiB (%.0f MiB), want < %d KiB", kib, float64(kib)/1024, maxRSSKiB)
			}
		})
	}
}

// countWriter counts and discards what is written to it.
type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// TestOutputStreamedBounded checks that without --json every byte reaches the reader of
// airlock's stdout (nothing kept, nothing dropped) and airlock's memory stays bounded.
func TestOutputStreamedBounded(t *testing.T) {
	tests := []struct {
		name   string
		script string
		stderr bool
	}{
		{"stdout", "head -c 300000000 /dev/zero", false},
		{"stderr", "head -c 300000000 /dev/zero >&2", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd, rss := measuredCmd(t, ctx, "run", "--", "sh", "-c", tc.script)
			var out, errw countWriter
			cmd.Stdout, cmd.Stderr = &out, &errw
			if err := cmd.Run(); err != nil {
				t.Fatalf("airlock run: %v", err)
			}
			got := out.n
			if tc.stderr {
				got = errw.n
			}
			if got != flood {
				t.Errorf("%d bytes arrived, want %d", got, flood)
			}
			kib := rss()
			t.Logf("airlock max RSS %d KiB", kib)
			if kib > maxRSSKiB {
				t.Errorf("airlock max RSS = %d KiB, want < %d KiB", kib, maxRSSKiB)
			}
		})
	}
}
