package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ToolTenant is the tool label of a tenant's own tools (and those of a tenant's upstream MCP
// servers): their names are tenant data, which no label carries. Built-in and operator tools are
// labelled by name.
const ToolTenant = "tenant"

// toolBuckets span a validation-only refusal (microseconds) to a long tool run.
var toolBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// toolMetrics are the tool gateway's (docs/tools.md).
type toolMetrics struct {
	calls   *prometheus.CounterVec   // tool, decision
	denials *prometheus.CounterVec   // tool, code
	seconds *prometheus.HistogramVec // tool
}

func newToolMetrics() toolMetrics {
	return toolMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_tool_calls_total",
			Help: "Tool calls by tool (built-in and operator tools by name, tenants' own as \"tenant\") and decision: allow (run) or deny (refused).",
		}, []string{"tool", "decision"}),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_tool_denials_total",
			Help: "Refused tool calls by tool and code: tool_not_allowed, invalid_arguments, rate_limited, or another error before the tool ran.",
		}, []string{"tool", "code"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "airlock_tool_call_seconds",
			Help:    "Duration of tool calls through the gateway (allowlist, validation, rate limit, run and audit), by tool and decision.",
			Buckets: toolBuckets,
		}, []string{"tool", "decision"}),
	}
}

func (t toolMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{t.calls, t.denials, t.seconds}
}

// ToolCall counts one tool call of tool (its label), allowed or denied (with the refusal's
// code), and times it.
func (m *Metrics) ToolCall(tool string, allowed bool, code string, d time.Duration) {
	if m == nil {
		return
	}
	decision := "allow"
	if !allowed {
		decision = "deny"
		m.tools.denials.WithLabelValues(tool, code).Inc()
	}
	m.tools.calls.WithLabelValues(tool, decision).Inc()
	m.tools.seconds.WithLabelValues(tool, decision).Observe(d.Seconds())
}
