package audit

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/store"
)

// BenchmarkLog measures the cost of one event in the log (ns/op is per event): Add, then a
// Flush every 1024 events (the Log's batch) that marshals, hashes and commits them to a real
// store on disk, with each of the store's sync modes.
func BenchmarkLog(b *testing.B) {
	// A network.connect event as the egress proxy reports it: 11 data fields, about 480 bytes
	// of JSON once stored.
	ev := store.TenantEvent{Tenant: "acme", Event: api.Event{Type: api.EventNetworkConnect, SandboxID: "sbx_01JD4Z6Q8R2M5N7P9T3V",
		ExecutionID: "exec_01JD4Z7A2B4C6D8E0F1G", Message: "tls api.github.com:443: allow (the domain is in allowedDomains)",
		Data: map[string]any{"proto": "tls", "name": "api.github.com", "address": "140.82.112.5", "port": 443,
			"decision": "allow", "rule": "api.github.com", "reason": "the domain is in allowedDomains", "bytesOut": 18234,
			"bytesIn": 734112, "credentialHeader": "", "runningExecutions": []string{"exec_01JD4Z7A2B4C6D8E0F1G"}}}}
	for _, sync := range []string{store.SyncNormal, store.SyncFull} {
		b.Run("sync="+sync, func(b *testing.B) {
			quiet := slog.New(slog.DiscardHandler)
			st, err := store.Open(context.Background(), filepath.Join(b.TempDir(), "airlock.db"), store.Options{Sync: sync}, quiet)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			var written int
			l := New(st, Config{Written: func(n int) { written += n }}, quiet)
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				l.Add(ev)
				if n++; n%eventBatch == 0 {
					l.Flush()
				}
			}
			l.Flush()
			if written != n {
				b.Fatalf("%d events written, %d added", written, n)
			}
		})
	}
}
