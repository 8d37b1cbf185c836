package audit

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/store"
)

// Report is what Verify found.
type Report struct {
	// Events is how many stored events were checked.
	Events int64 `json:"events"`
	// Chain is the chain record: the head and the anchor the remaining events start after.
	Chain store.Chain `json:"chain"`
	// Problem is the first bad event, nil when the chain is whole.
	Problem *Problem `json:"problem,omitempty"`
}

// Problem names the first place where the log is not what airlock wrote.
type Problem struct {
	// Seq is the first bad event's place in the log (for missing events: the first missing one).
	Seq int64 `json:"seq"`
	// ID is the bad event's ID ("" when it is missing).
	ID     string `json:"id,omitempty"`
	Reason string `json:"reason"`
}

func (p *Problem) String() string {
	if p.ID != "" {
		return fmt.Sprintf("event %d (%s): %s", p.Seq, p.ID, p.Reason)
	}
	return fmt.Sprintf("event %d: %s", p.Seq, p.Reason)
}

// Verify walks the stored log from its anchor to its head and reports the first event that is
// not what airlock wrote: an edited event (its hash no longer matches its content and the event
// before it), a deleted one (a gap in the sequence), reordered ones (hashes out of place), a cut
// off tail (the chain record's head is beyond the last event), events added outside airlock, and
// any damage the daemon found and recorded when it started (audit.recovered). It reads the store
// only; a running daemon may go on writing meanwhile (the check then ends at the head it read).
func Verify(ctx context.Context, st *store.Store) (Report, error) {
	c, err := st.ChainState(ctx)
	if err != nil {
		return Report{}, err
	}
	rep := Report{Chain: c}
	prev, ok := decodeHash(c.AnchorHash)
	if !ok {
		rep.Problem = &Problem{Seq: c.AnchorSeq + 1, Reason: "the chain record's anchor hash is not a hash"}
		return rep, nil
	}
	expect := c.AnchorSeq + 1
	for {
		rows, err := st.EventRows(ctx, expect-1, pruneChunk)
		if err != nil {
			return rep, err
		}
		if len(rows) == 0 {
			break
		}
		for _, r := range rows {
			if c.Present && r.Seq > c.HeadSeq {
				// Written after the chain record was read (a live daemon), or added outside airlock:
				// the record read again tells which.
				return rep, verifyTail(ctx, st, &rep, r)
			}
			if p := checkRow(prev, expect, r); p != nil {
				rep.Problem = p
				return rep, nil
			}
			prev, _ = hex.DecodeString(r.Hash)
			expect = r.Seq + 1
			rep.Events++
		}
	}
	last := expect - 1
	switch {
	case !c.Present && rep.Events > 0:
		rep.Problem = &Problem{Seq: 1, Reason: "the chain record is missing, so the log's end cannot be checked: it was removed"}
	case last < c.HeadSeq:
		rep.Problem = &Problem{Seq: last + 1, Reason: fmt.Sprintf("events %d to %d are missing: the log was cut off after event %d (the chain record's head is %d)", last+1, c.HeadSeq, last, c.HeadSeq)}
	case c.Present && hex.EncodeToString(prev) != c.HeadHash && !(last == c.AnchorSeq && c.HeadHash == c.AnchorHash):
		rep.Problem = &Problem{Seq: last, Reason: "the chain record's head hash is not the last event's: the record was changed"}
	}
	return rep, nil
}

// verifyTail handles a stored event beyond the head the check began with.
func verifyTail(ctx context.Context, st *store.Store, rep *Report, r store.EventRow) error {
	c, err := st.ChainState(ctx)
	if err != nil {
		return err
	}
	if r.Seq > c.HeadSeq {
		rep.Problem = &Problem{Seq: r.Seq, ID: r.ID, Reason: fmt.Sprintf("it is beyond the chain record's head %d: added outside airlock", c.HeadSeq)}
	}
	return nil
}

// checkRow checks stored event r, expected at sequence number expect after the event whose hash
// is prev.
func checkRow(prev []byte, expect int64, r store.EventRow) *Problem {
	switch {
	case r.Seq == expect+1:
		return &Problem{Seq: expect, Reason: fmt.Sprintf("it is missing (deleted): the log goes from event %d to %d", expect-1, r.Seq)}
	case r.Seq > expect:
		return &Problem{Seq: expect, Reason: fmt.Sprintf("events %d to %d are missing (deleted): the log goes from event %d to %d", expect, r.Seq-1, expect-1, r.Seq)}
	case r.Hash == "":
		return &Problem{Seq: r.Seq, ID: r.ID, Reason: "it has no hash: it was written outside airlock"}
	}
	if h := hex.EncodeToString(Hash(prev, r)); h != r.Hash {
		return &Problem{Seq: r.Seq, ID: r.ID, Reason: "its hash does not match its content and the event before it: it was edited, or events were reordered"}
	}
	var e api.Event
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	if err := dec.Decode(&e); err != nil {
		return &Problem{Seq: r.Seq, ID: r.ID, Reason: "its body is not an event: " + err.Error()}
	}
	if e.ID != r.ID || e.Type != r.Type || e.SandboxID != r.SandboxID || e.ExecutionID != r.ExecutionID || (e.Seq != 0 && e.Seq != r.Seq) || e.Time.UnixNano() != r.At {
		return &Problem{Seq: r.Seq, ID: r.ID, Reason: "its columns and its body disagree: it was edited (and the chain rehashed after it)"}
	}
	if e.Type == EventRecovered {
		return &Problem{Seq: r.Seq, ID: r.ID, Reason: e.Message}
	}
	return nil
}
