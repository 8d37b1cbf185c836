package metricstest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
)

const exposition = `# TYPE hits_total counter
hits_total{kind="dns",decision="deny"} 3
hits_total{kind="connect",decision="allow"} 5
# TYPE up gauge
up 1
# TYPE took_seconds histogram
took_seconds_bucket{level="process",le="1"} 1
took_seconds_bucket{level="process",le="+Inf"} 2
took_seconds_sum{level="process"} 4.5
took_seconds_count{level="process"} 2
`

func TestLookups(t *testing.T) {
	fams := Parse(t, strings.NewReader(exposition))
	values := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"hits_total", map[string]string{"kind": "dns"}, 3},
		{"hits_total", map[string]string{"kind": "connect", "decision": "allow"}, 5},
		{"hits_total", map[string]string{"kind": "connect", "decision": "deny"}, -1},
		{"hits_total", map[string]string{"kind": "dns", "pool": "py"}, -1}, // a label the series lacks
		{"hits_total", map[string]string{"kind": "dns", "pool": ""}, 3},    // … is empty
		{"up", nil, 1},
		{"down", nil, -1},
		{"took_seconds", map[string]string{"level": "process"}, -1}, // neither counter nor gauge
	}
	for _, tt := range values {
		if got := fams.Value(tt.name, tt.labels); got != tt.want {
			t.Errorf("Value(%s%v) = %v, want %v", tt.name, tt.labels, got, tt.want)
		}
	}
	if h := fams.Histogram("took_seconds", map[string]string{"level": "process"}); h.GetSampleCount() != 2 || h.GetSampleSum() != 4.5 {
		t.Errorf("Histogram(took_seconds) = %v, want count 2 sum 4.5", h)
	}
	for _, name := range []string{"hits_total", "up", "down"} {
		if h := fams.Histogram(name, nil); h != nil {
			t.Errorf("Histogram(%s) = %v, want nil", name, h)
		}
	}
	if fams.Series("took_seconds", map[string]string{"level": "container"}) != nil {
		t.Error("Series matched a series with another label value")
	}
}

func TestScrape(t *testing.T) {
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write([]byte(exposition)) // a failure is the scraper's to see
	}))
	t.Cleanup(srv.Close)
	fams := Scrape(t, srv.URL)
	if got := fams.Value("up", nil); got != 1 {
		t.Errorf("up = %v, want 1", got)
	}
	if auth != "" {
		t.Errorf("Scrape sent Authorization %q, want none", auth)
	}
}

// fatalTB records a Fatalf and stops the goroutine as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestScrapeRefuses: an answer that is not a 200 in the text format, or not an exposition, fails.
func TestScrapeRefuses(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		contentType string
		body        string
	}{
		{"503", http.StatusServiceUnavailable, "text/plain", exposition},
		{"json", http.StatusOK, "application/json", `{"ok":true}`},
		{"garbage", http.StatusOK, "text/plain", "up{ 1\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			}))
			t.Cleanup(srv.Close)
			tb := &fatalTB{TB: t}
			done := make(chan struct{})
			go func() {
				defer close(done)
				Scrape(tb, srv.URL)
			}()
			<-done
			if tb.msg == "" {
				t.Error("Scrape accepted the answer")
			}
		})
	}
}
