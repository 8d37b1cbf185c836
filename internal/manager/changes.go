package manager

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/fsdiff"
)

// layerScans records which files each exec changed (exec.files events) from scans of the
// sandbox's writable layer, off the exec's path: an exec's answer never waits for a scan.
//
// The scans of a sandbox are made one at a time, in order, by a goroutine that runs while there
// are some to make: one after each exec, and one after each use of the files API. Each is
// compared with the one before it, so every change is reported once: by the exec after which it
// was seen, or (files.changed, no exec) when it came from the files API or a background process
// between execs. A scan is made just after its exec ended; an exec that started meanwhile is named
// in the event (concurrentExecutions), since its first changes may be in it. Only the very first
// scan of a sandbox (or of a restored instance) is made before an exec runs. Execs that end
// while a scan is being made share the next one: their changes are reported together, by the
// first of them, naming the others (a scan may take seconds where the sandbox makes it itself, a
// VM under TCG: one scan per exec would keep its vCPU busy scanning).
type layerScans struct {
	mu          sync.Mutex // guards everything below
	layer       *driver.Layer
	last        *fsdiff.Tree // the newest scan: the next comparison's "before"
	unavailable bool         // the level cannot read this sandbox's layer: never ask again
	gen         int          // counts instances (restores): a scan of an old one is dropped
	queue       []scanJob
	idle        chan struct{} // non-nil while a goroutine works the queue; closed when it stops
	// recent are the last execs' changes by exec ID, order their IDs oldest first
	// (rememberLocked, for ExecFiles).
	recent map[string]fsdiff.Changes
	order  []string
}

// scanJob is one scan to make: after exec execID ended at end, or after the files API ("").
type scanJob struct {
	execID, tenant string
	end            time.Time
}

// drop forgets the layer and its scans: a restore replaced the sandbox's instance.
func (s *layerScans) drop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.layer, s.last, s.unavailable, s.queue = nil, nil, false, nil
	s.recent, s.order = nil, nil
	s.gen++
}

// scanBefore makes sure b's layer is known and has a first scan before an exec runs; false
// means no change is recorded (audit off, or a level that cannot read the layer).
func (m *Manager) scanBefore(ctx context.Context, b *box, sb driver.Sandbox) bool {
	l, can := sb.(driver.Layerer)
	if !can || !m.events.Enabled() {
		return false
	}
	s := &b.scans
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unavailable {
		return false
	}
	if s.layer == nil {
		lay, err := l.Layer(ctx)
		if err != nil {
			s.unavailable = errors.Is(err, errdefs.ErrUnavailable)
			m.log.Info("exec file changes not recorded", "sandbox", b.id, "err", err)
			return false
		}
		s.layer = &lay
	}
	if s.last == nil && s.idle == nil {
		t, err := scanLayer(ctx, *s.layer)
		if err != nil {
			m.log.Warn("scan the writable layer", "sandbox", b.id, "err", err)
			return false
		}
		s.last = &t
	}
	return true
}

// scanTimeout bounds one scan: a level whose sandbox scans its own layer (a VM's guest agent)
// answers within it or the scan is dropped, and the next exec scans afresh before it runs.
const scanTimeout = time.Minute

// scanLayer scans layer, within scanTimeout.
func scanLayer(ctx context.Context, layer driver.Layer) (fsdiff.Tree, error) {
	ctx, cancel := context.WithTimeout(ctx, scanTimeout)
	defer cancel()
	return layer.Scan(ctx)
}

// queueScan asks for a scan of b's layer after job, made in the background in order.
func (m *Manager) queueScan(b *box, job scanJob) {
	s := &b.scans
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.layer == nil || s.unavailable {
		return
	}
	s.queue = append(s.queue, job)
	if s.idle == nil {
		s.idle = make(chan struct{})
		go m.scanLoop(b)
	}
}

// scanLoop makes b's queued scans and records what each found changed.
func (m *Manager) scanLoop(b *box) {
	s := &b.scans
	for {
		s.mu.Lock()
		if len(s.queue) == 0 || s.layer == nil {
			close(s.idle)
			s.idle, s.queue = nil, nil
			s.mu.Unlock()
			return
		}
		// One scan answers every job asked for so far.
		jobs, layer, before, gen := s.queue, *s.layer, s.last, s.gen
		s.queue = nil
		s.mu.Unlock()
		job := jobs[0]
		for _, j := range jobs {
			if j.execID != "" {
				job = j // the changes go to the first exec of the batch
				break
			}
		}

		after, err := scanLayer(context.Background(), layer)
		done := time.Now()
		s.mu.Lock()
		current := gen == s.gen
		if current {
			s.last = nil
			if err == nil {
				s.last = &after
			}
		}
		s.mu.Unlock()
		if err != nil || !current || before == nil {
			if errors.Is(err, fsdiff.ErrBadTree) {
				// A tree the sandbox's own kernel made, refused: a broken or hostile guest.
				m.log.Warn("scan the writable layer", "sandbox", b.id, "exec", job.execID, "err", err)
			} else if err != nil {
				m.log.Info("scan the writable layer", "sandbox", b.id, "exec", job.execID, "err", err)
			}
			continue
		}
		ch := fsdiff.CompareOver(*before, after, layer.Lowers)
		s.mu.Lock()
		for _, j := range jobs {
			s.rememberLocked(j.execID, ch) // each exec of a batch: the batch's changes
		}
		s.mu.Unlock()
		if ch.Empty() && !ch.Partial {
			continue
		}
		var others []string
		for _, j := range jobs {
			if j.execID != "" && j.execID != job.execID {
				others = append(others, j.execID)
			}
		}
		m.recordChanges(b, job, others, ch, done)
	}
}

// recordChanges records the changes a scan after job found; others are the execs whose scan it
// also was (they ended while the scan before it was made).
func (m *Manager) recordChanges(b *box, job scanJob, others []string, ch fsdiff.Changes, scanned time.Time) {
	d := map[string]any{"created": ch.Created, "modified": ch.Modified, "deleted": ch.Deleted,
		"nCreated": ch.NCreated, "nModified": ch.NModified, "nDeleted": ch.NDeleted}
	if ch.Truncated {
		d["truncated"] = true
	}
	if ch.Partial {
		d["partial"] = true
	}
	msg := "files: " + strconv.Itoa(ch.NCreated) + " created, " + strconv.Itoa(ch.NModified) + " modified, " + strconv.Itoa(ch.NDeleted) + " deleted"
	e := api.Event{Type: api.EventExecFiles, ExecutionID: job.execID, Message: msg, Data: d}
	if job.execID == "" {
		e.Type = api.EventFilesChanged
		e.Message += " between execs (files API or background processes)"
	} else {
		ids := b.execsStartedBetween(job.end, scanned)
		for _, id := range others {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		if len(ids) > 0 {
			d["concurrentExecutions"] = ids
		}
	}
	m.recordEvent(b, job.tenant, e)
}

// waitScans waits (up to timeout) until b's queued scans are made, so that a reader of its
// events sees the file changes of the execs that have answered.
func (b *box) waitScans(ctx context.Context, timeout time.Duration) {
	b.scans.mu.Lock()
	idle := b.scans.idle
	b.scans.mu.Unlock()
	if idle == nil {
		return
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	case <-ctx.Done():
	}
}
