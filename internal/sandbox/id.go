package sandbox

import (
	"crypto/rand"
	"encoding/hex"
)

// NewID returns an opaque, unguessable ID with the given prefix (sbx_, exec_, snap_, evt_).
func NewID(prefix string) string {
	var b [10]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
