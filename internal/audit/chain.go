// Package audit is airlock's record of what happened: one append-only log of every event of
// every sandbox (lifecycle, API actions, execs, files, network decisions, limits, policy
// changes), kept in the store's events table as a hash chain.
//
// Each event's hash covers the hash of the event before it and every stored field of its own, so
// editing, deleting, reordering or cutting off events breaks the chain where it happened; Verify
// walks it and names the first bad event. The chain record (internal/store.Chain) holds the head,
// which makes a truncated tail visible, and the anchor from which the chain starts once retention
// has removed older events (retention appends an audit.pruned event saying so).
//
// Log is the writer: producers Add events without waiting; one goroutine assigns sequence
// numbers, hashes and writes them in batches, then hands each committed batch to the Sinks
// (webhooks, metrics) and wakes followers of the events API.
package audit

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"

	"github.com/airlockrun/airlock/internal/store"
)

// Genesis is the "previous hash" of the first event of a log that was never pruned.
var Genesis = make([]byte, sha256.Size)

// Hash is the chain hash of row r after the event whose hash is prev: SHA-256 over prev and
// r's stored fields, each length-prefixed so that no two rows hash the same input.
func Hash(prev []byte, r store.EventRow) []byte {
	h := sha256.New()
	h.Write(prev)
	var n [8]byte
	putInt := func(h hash.Hash, v int64) {
		binary.BigEndian.PutUint64(n[:], uint64(v))
		h.Write(n[:])
	}
	putBytes := func(h hash.Hash, b []byte) {
		putInt(h, int64(len(b)))
		h.Write(b)
	}
	putInt(h, r.Seq)
	putBytes(h, []byte(r.ID))
	putBytes(h, []byte(r.Tenant))
	putBytes(h, []byte(r.SandboxID))
	putBytes(h, []byte(r.ExecutionID))
	putBytes(h, []byte(r.Type))
	putInt(h, r.At)
	putBytes(h, r.Body)
	return h.Sum(nil)
}

// decodeHash reads a stored hex hash; "" (no anchor yet) is the genesis.
func decodeHash(s string) ([]byte, bool) {
	if s == "" {
		return Genesis, true
	}
	b, err := hex.DecodeString(s)
	return b, err == nil && len(b) == sha256.Size
}
