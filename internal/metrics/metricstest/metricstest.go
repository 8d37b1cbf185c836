// Package metricstest holds helpers for tests that scrape airlock's /metrics.
package metricstest

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families is a parsed exposition: the metric families by name.
type Families map[string]*dto.MetricFamily

// Scrape GETs url as Prometheus does, without a key, and parses the answer. It fails the test
// unless the answer is a 200 in the text exposition format.
func Scrape(t testing.TB, url string) Families {
	t.Helper()
	// A transport of its own, closed after: no keep-alive connection outlives the scrape.
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/plain") {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		t.Fatalf("GET %s without a key: %s, Content-Type %q, want 200 text/plain: %s", url, resp.Status, ct, body)
	}
	return Parse(t, resp.Body)
}

// Parse reads a text exposition from r, failing the test if it does not parse.
func Parse(t testing.TB, r io.Reader) Families {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		t.Fatalf("parse exposition: %v", err)
	}
	return fams
}

// Series returns the first series of family name whose labels include labels, or nil when there
// is none. As in Prometheus, a label the series lacks has the empty value. A nil labels matches
// the family's first series.
func (f Families) Series(name string, labels map[string]string) *dto.Metric {
next:
	for _, m := range f[name].GetMetric() {
		have := make(map[string]string, len(m.GetLabel()))
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		return m
	}
	return nil
}

// Value is the value of a counter or gauge series, or -1 when there is no such series or it is
// neither a counter nor a gauge.
func (f Families) Value(name string, labels map[string]string) float64 {
	m := f.Series(name, labels)
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	}
	return -1
}

// Histogram is a histogram series, or nil when there is no such series or it is not a histogram.
func (f Families) Histogram(name string, labels map[string]string) *dto.Histogram {
	return f.Series(name, labels).GetHistogram()
}
