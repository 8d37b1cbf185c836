package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"time"
)

// NewID returns an opaque, unguessable ID with the given prefix (sbx_, exec_, snap_, evt_).
func NewID(prefix string) string {
	var b [10]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// NewOrderedID returns prefix followed by 20 hex digits: the time in milliseconds (48 bits),
// then 32 random bits. IDs made later sort later, so a unique index over them (the audit log's)
// grows at its end instead of at random pages.
func NewOrderedID(prefix string) string {
	var b [10]byte
	ms := uint64(time.Now().UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	rand.Read(b[6:])
	return prefix + hex.EncodeToString(b[:])
}
