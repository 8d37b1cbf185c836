package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// migrations are the schema's history: migrations[i] takes the schema from version i to i+1.
// Append only; never edit one that has shipped.
var migrations = []string{
	// 1: the initial schema.
	`
CREATE TABLE tenants (
	name       TEXT PRIMARY KEY,
	created_at INTEGER NOT NULL
);

CREATE TABLE api_keys (
	id         TEXT PRIMARY KEY,
	tenant     TEXT NOT NULL REFERENCES tenants(name),
	hash       BLOB NOT NULL UNIQUE, -- SHA-256 of the secret; the secret itself is never stored
	created_at INTEGER NOT NULL,
	revoked_at INTEGER
);

CREATE TABLE sandboxes (
	id         TEXT PRIMARY KEY,
	tenant     TEXT NOT NULL,
	agent_id   TEXT NOT NULL, -- copied from spec for the index
	spec       TEXT NOT NULL, -- api.Spec as JSON
	status     TEXT NOT NULL,
	reason     TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	host       TEXT           -- the level's host facts as JSON
);
CREATE INDEX sandboxes_tenant_created ON sandboxes(tenant, created_at);
CREATE INDEX sandboxes_created ON sandboxes(created_at);
CREATE INDEX sandboxes_tenant_status ON sandboxes(tenant, status);
CREATE INDEX sandboxes_status ON sandboxes(status);
CREATE INDEX sandboxes_agent ON sandboxes(agent_id) WHERE agent_id != '';

CREATE TABLE transitions (
	seq         INTEGER PRIMARY KEY,
	sandbox_id  TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,
	from_status TEXT NOT NULL,
	to_status   TEXT NOT NULL,
	reason      TEXT NOT NULL,
	at          INTEGER NOT NULL
);
CREATE INDEX transitions_sandbox ON transitions(sandbox_id, seq);

CREATE TABLE execs (
	id         TEXT PRIMARY KEY,
	sandbox_id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,
	command    TEXT NOT NULL, -- JSON array
	status     TEXT NOT NULL,
	started_at INTEGER NOT NULL,
	ended_at   INTEGER,
	result     TEXT           -- api.ExecResult as JSON
);
CREATE INDEX execs_sandbox ON execs(sandbox_id, started_at);
CREATE INDEX execs_running ON execs(status) WHERE status = 'running';
`,
	// 2: sandbox events (network decisions first; the audit log builds on it).
	`
CREATE TABLE events (
	seq          INTEGER PRIMARY KEY,
	id           TEXT NOT NULL UNIQUE,
	tenant       TEXT NOT NULL,
	sandbox_id   TEXT NOT NULL,
	execution_id TEXT NOT NULL,
	type         TEXT NOT NULL,
	at           INTEGER NOT NULL,
	body         TEXT NOT NULL -- api.Event as JSON
);
CREATE INDEX events_sandbox ON events(sandbox_id, seq);
`,
	// 3: warm pools made through the API (the configuration file's pools are not stored).
	`
CREATE TABLE pools (
	name       TEXT PRIMARY KEY,
	body       TEXT NOT NULL, -- api.Pool as JSON
	updated_at INTEGER NOT NULL
);
`,
	// 4: snapshots, and the driver-level instance a restored sandbox runs as.
	`
CREATE TABLE snapshots (
	id           TEXT PRIMARY KEY,
	tenant       TEXT NOT NULL,
	sandbox_id   TEXT NOT NULL,
	name         TEXT NOT NULL,
	description  TEXT NOT NULL,
	spec         TEXT NOT NULL,  -- the sandbox's api.Spec as JSON, credentials' values removed
	layer_digest TEXT NOT NULL,  -- the compressed layer's blob
	layer_size   INTEGER NOT NULL,
	layer_bytes  INTEGER NOT NULL,
	memory       TEXT,           -- {file name: blob digest} of a memory image, or NULL
	memory_size  INTEGER NOT NULL,
	created_at   INTEGER NOT NULL
);
CREATE INDEX snapshots_tenant ON snapshots(tenant, created_at);
CREATE INDEX snapshots_sandbox ON snapshots(sandbox_id, created_at);
CREATE INDEX snapshots_layer ON snapshots(layer_digest);
ALTER TABLE sandboxes ADD COLUMN instance TEXT NOT NULL DEFAULT '';
`,
	// 5: the audit log: every event hashes the one before it (internal/audit). The chain row
	// holds the head (the last event written) and the anchor (the last event retention removed,
	// from which the remaining chain starts).
	`
ALTER TABLE events ADD COLUMN hash TEXT NOT NULL DEFAULT '';
CREATE INDEX events_tenant ON events(tenant, seq);
CREATE TABLE audit_chain (
	id          INTEGER PRIMARY KEY CHECK (id = 1),
	head_seq    INTEGER NOT NULL,
	head_hash   TEXT NOT NULL,
	anchor_seq  INTEGER NOT NULL,
	anchor_hash TEXT NOT NULL
);
`,
	// 6: webhooks and their delivery logs (internal/webhook). The counters are kept on the
	// webhook because the log is pruned; pending deliveries are never pruned.
	`
CREATE TABLE webhooks (
	id          TEXT PRIMARY KEY,
	tenant      TEXT NOT NULL,
	url         TEXT NOT NULL,
	events      TEXT NOT NULL, -- JSON array of event selectors
	secret      TEXT NOT NULL, -- the HMAC-SHA256 key; returned only by the create
	description TEXT NOT NULL,
	created_at  INTEGER NOT NULL,
	delivered   INTEGER NOT NULL DEFAULT 0,
	failed      INTEGER NOT NULL DEFAULT 0,
	dropped     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX webhooks_tenant ON webhooks(tenant, created_at);
CREATE TABLE webhook_deliveries (
	id              TEXT PRIMARY KEY,
	webhook_id      TEXT NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
	tenant          TEXT NOT NULL,
	event_id        TEXT NOT NULL,
	event_type      TEXT NOT NULL,
	payload         BLOB NOT NULL, -- the exact body that is signed and sent
	status          TEXT NOT NULL, -- pending, delivered, failed, dropped
	attempts        INTEGER NOT NULL,
	response_status INTEGER NOT NULL,
	error           TEXT NOT NULL,
	duration_ms     INTEGER NOT NULL,
	created_at      INTEGER NOT NULL,
	last_attempt_at INTEGER,
	next_attempt_at INTEGER,
	delivered_at    INTEGER
);
CREATE INDEX webhook_deliveries_hook ON webhook_deliveries(webhook_id, created_at);
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries(webhook_id, created_at, next_attempt_at) WHERE status = 'pending';
`,
	// 7: the level's sandboxes that restores replaced and whose teardown, which runs after the
	// restore's answer, has not finished: a daemon killed meanwhile reclaims them at its next
	// start (manager.Recover).
	`
CREATE TABLE retired_instances (
	level_id   TEXT PRIMARY KEY,
	sandbox_id TEXT NOT NULL,
	isolation  TEXT NOT NULL,
	retired_at INTEGER NOT NULL
);
`,
	// 8: admin keys, the operator's (docs/security.md#who-is-trusted-with-what): daemon-wide resources change only with one.
	`
ALTER TABLE api_keys ADD COLUMN admin INTEGER NOT NULL DEFAULT 0;
`,
	// 9: teardowns recorded before they happen: the level's instance to destroy and the end to
	// record once it is gone (manager.release). One left after a kill is finished at the next
	// start (manager.Recover), by a retried DELETE, or at a clean stop.
	`
CREATE TABLE teardowns (
	sandbox_id  TEXT PRIMARY KEY,
	level_id    TEXT NOT NULL,
	isolation   TEXT NOT NULL,
	end_status  TEXT NOT NULL, -- terminated or failed
	reason      TEXT NOT NULL,
	recorded_at INTEGER NOT NULL
);
`,
	// 10: what tenants (and admin keys) define for the tool gateway through the API: tools,
	// upstream MCP servers and policies (internal/tools). The configuration's are not stored.
	`
CREATE TABLE tool_objects (
	tenant     TEXT NOT NULL,
	kind       TEXT NOT NULL, -- tool, server or policy
	name       TEXT NOT NULL,
	body       TEXT NOT NULL, -- the definition as JSON
	source     TEXT NOT NULL, -- tenant or admin: which kind of key made it
	created_by TEXT NOT NULL, -- that key's ID
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (tenant, kind, name)
);
`,
}

// migrate brings the schema up to date, one migration per transaction. Each transaction reads the
// version itself, so two processes opening a new database at once apply every migration once.
func (s *Store) migrate(ctx context.Context) error {
	for {
		var applied bool
		var version int
		err := s.writeTx(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx,
				`CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
				return err
			}
			err := tx.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&version)
			if errors.Is(err, sql.ErrNoRows) {
				if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (0)`); err != nil {
					return err
				}
			} else if err != nil {
				return err
			}
			if version > len(migrations) {
				return fmt.Errorf("schema version %d is newer than this airlock's (%d)", version, len(migrations))
			}
			if version == len(migrations) {
				return nil
			}
			if _, err := tx.ExecContext(ctx, migrations[version]); err != nil {
				return fmt.Errorf("migration %d: %w", version+1, err)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE schema_version SET version = ?`, version+1); err != nil {
				return err
			}
			applied = true
			return nil
		})
		if err != nil {
			return err
		}
		if !applied {
			return nil
		}
		s.log.Info("database migrated", "version", version+1)
	}
}
