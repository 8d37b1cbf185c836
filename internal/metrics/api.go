package metrics

// Why an API request was refused before its key was accepted (airlock_api_unauthenticated_total{reason}).
const (
	UnauthenticatedMissing = "missing" // no Authorization: Bearer key (401)
	UnauthenticatedInvalid = "invalid" // a key the store does not know, or a revoked one (401)
	// UnauthenticatedProtocol: a WebSocket's key sent as a subprotocol that was refused unread:
	// from a page of another origin (403), or without airlock.v1 offered beside it (400).
	UnauthenticatedProtocol = "protocol"
)

// Which cap an API connection was over when it was closed (airlock_api_connections_refused_total{reason}).
const (
	RefusedClient = "client" // server.maxConnectionsPerClient, from its address
	RefusedTotal  = "total"  // server.maxConnections
)

// Unauthenticated counts one API request refused before its key was accepted (401, or a
// refused WebSocket subprotocol key). Such requests are counted, never
// stored (docs/security.md#who-is-trusted-with-what): a stranger must not be able to grow the database.
func (m *Metrics) Unauthenticated(reason string) {
	if m == nil {
		return
	}
	m.unauthn.WithLabelValues(reason).Inc()
}

// RateLimited counts one API request refused because its tenant was past its request rate;
// like a stranger's, it is counted, never stored.
func (m *Metrics) RateLimited() {
	if m == nil {
		return
	}
	m.rateLimited.Inc()
}

// ConnectionRefused counts one API connection closed because it was over a cap (RefusedClient,
// RefusedTotal).
func (m *Metrics) ConnectionRefused(reason string) {
	if m == nil {
		return
	}
	m.connRefused.WithLabelValues(reason).Inc()
}

// SetConnectionSource sets what airlock_api_connections reports: f is called at every scrape.
func (m *Metrics) SetConnectionSource(f func() int) {
	if m == nil {
		return
	}
	m.state.mu.Lock()
	m.state.connFn = f
	m.state.mu.Unlock()
}
