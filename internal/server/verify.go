package server

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/audit"
	"github.com/airlockrun/airlock/internal/store"
	"github.com/airlockrun/airlock/internal/tenant"
)

// verifyMaxAge is how old an answer of GET /api/v1/audit/verify may be for a tenant key. A walk
// reads every event of the daemon, every tenant's, so one walk serves every tenant for this
// long: no tenant can make the daemon walk the log more often than that. An admin key (the
// operator's) always gets a walk that started after its request.
const verifyMaxAge = time.Minute

// chainCheck runs the audit log's verification for the API, one walk at a time.
type chainCheck struct {
	mu      sync.Mutex // guards last, started and at; held through a walk, so that callers meanwhile wait for it and share it
	last    audit.Report
	started time.Time // when the last walk began (zero: none yet)
	at      time.Time // when it ended
}

// report returns the result of a walk that started at notBefore or later, making one if the last
// one is older.
func (c *chainCheck) report(ctx context.Context, st *store.Store, notBefore time.Time) (audit.Report, time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.started.IsZero() && !c.started.Before(notBefore) {
		return c.last, c.at, nil
	}
	started := time.Now()
	rep, err := audit.Verify(ctx, st)
	if err != nil {
		return audit.Report{}, time.Time{}, err
	}
	c.last, c.started, c.at = rep, started, time.Now()
	return c.last, c.at, nil
}

// verifyAudit answers GET /api/v1/audit/verify: whether the audit log's hash chain is whole. The
// log is one chain over every tenant's events, so the answer is the same for every key, but a
// tenant key is told nothing of another tenant's event (its ID, what is wrong with it) beyond
// its place in the chain (docs/security.md).
func verifyAudit(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	ctx := r.Context()
	admin := tenant.IsAdmin(ctx)
	notBefore := time.Now()
	if !admin {
		notBefore = notBefore.Add(-verifyMaxAge)
	}
	rep, at, err := s.chain.report(ctx, s.store, notBefore)
	if err != nil {
		return nil, err
	}
	v := api.AuditVerification{Intact: rep.Problem == nil, Events: rep.Events, FromSeq: rep.Chain.AnchorSeq + 1,
		HeadSeq: rep.Chain.HeadSeq, HeadHash: rep.Chain.HeadHash, CheckedAt: at.UTC()}
	if p := rep.Problem; p != nil {
		v.Problem = &api.AuditProblem{Seq: p.Seq, ID: p.ID, Reason: p.Reason}
		// A problem without an ID is a missing event, whose reason names sequence numbers only.
		if p.ID != "" && !admin && !s.ownEvent(ctx, p.Seq, p.ID) {
			v.Problem.ID, v.Problem.Reason = "", "the event there is not one of this tenant's: it was changed, or added or moved by hand (an admin key's answer says more)"
		}
	}
	return v, nil
}

// ownEvent reports whether the stored event seq, of ID id, is the caller's tenant's.
func (s *Server) ownEvent(ctx context.Context, seq int64, id string) bool {
	rows, err := s.store.EventRows(ctx, seq-1, 1)
	return err == nil && len(rows) == 1 && rows[0].Seq == seq && rows[0].ID == id && rows[0].Tenant == tenant.From(ctx)
}
