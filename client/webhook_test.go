package client

import (
	"errors"
	"net/http"
	"testing"
	"time"
)

// TestVerifyWebhook checks a signature computed elsewhere (Python's hmac), the tolerance on both
// sides of the timestamp, and every refusal.
func TestVerifyWebhook(t *testing.T) {
	const (
		secret = "whsec-test-0123456789"
		sig    = "v1=ba8ec7f38c4e076a99176a1bf98ae9f2f3f4e18412b46a5913ddcf5685932c6a"
	)
	body := []byte(`{"a":1}`)
	at := time.Unix(1700000000, 0)
	header := func(ts, sig string) http.Header {
		h := http.Header{}
		if ts != "" {
			h.Set("Airlock-Timestamp", ts)
		}
		if sig != "" {
			h.Set("Airlock-Signature", sig)
		}
		return h
	}
	for _, c := range []struct {
		name      string
		header    http.Header
		body      []byte
		tolerance time.Duration
		now       time.Time
		want      error
	}{
		{"valid", header("1700000000", sig), body, time.Minute, at, nil},
		{"valid, at the tolerance's edge", header("1700000000", sig), body, time.Minute, at.Add(time.Minute), nil},
		{"one of several signatures", header("1700000000", "v1=00ff, "+sig), body, time.Minute, at, nil},
		{"default tolerance (5 min)", header("1700000000", sig), body, 0, at.Add(4 * time.Minute), nil},
		{"past the default tolerance", header("1700000000", sig), body, 0, at.Add(6 * time.Minute), ErrWebhookTimestamp},
		{"too old", header("1700000000", sig), body, time.Minute, at.Add(61 * time.Second), ErrWebhookTimestamp},
		{"from the future", header("1700000000", sig), body, time.Minute, at.Add(-61 * time.Second), ErrWebhookTimestamp},
		{"no timestamp", header("", sig), body, time.Minute, at, ErrWebhookTimestamp},
		{"timestamp not a number", header("soon", sig), body, time.Minute, at, ErrWebhookTimestamp},
		{"changed body", header("1700000000", sig), []byte(`{"a":2}`), time.Minute, at, ErrWebhookSignature},
		{"changed timestamp", header("1700000001", sig), body, time.Minute, at, ErrWebhookSignature},
		{"no signature", header("1700000000", ""), body, time.Minute, at, ErrWebhookSignature},
		{"unknown scheme", header("1700000000", "v0="+sig[3:]), body, time.Minute, at, ErrWebhookSignature},
		{"not hex", header("1700000000", "v1=zz"), body, time.Minute, at, ErrWebhookSignature},
	} {
		err := VerifyWebhook(secret, c.header, c.body, c.tolerance, c.now)
		if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if err := VerifyWebhook("another-secret-0123", header("1700000000", sig), body, time.Minute, at); !errors.Is(err, ErrWebhookSignature) {
		t.Errorf("another secret: %v", err)
	}
}
