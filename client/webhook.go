package client

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/airlockrun/airlock/api"
)

// DefaultWebhookTolerance is how far a delivery's timestamp may be from the receiver's clock
// when VerifyWebhook is given no tolerance.
const DefaultWebhookTolerance = 5 * time.Minute

// Errors of VerifyWebhook, which wraps one of them.
var (
	// ErrWebhookSignature: the signature is missing, malformed or not the body's under the
	// secret (the body was changed, or it was not signed with this secret).
	ErrWebhookSignature = errors.New("webhook signature does not match")
	// ErrWebhookTimestamp: the timestamp is missing, malformed or too far from now (a replay
	// of an old delivery).
	ErrWebhookTimestamp = errors.New("webhook timestamp is not acceptable")
)

// VerifyWebhook checks a delivery of an airlock webhook: that its Airlock-Timestamp is within
// tolerance of now (zero: DefaultWebhookTolerance; a zero now: the current time), so that a
// captured delivery cannot be replayed later, and that its Airlock-Signature is the HMAC-SHA256,
// keyed with the webhook's secret, of the timestamp, ".", and the body, compared in constant
// time. Pass the body exactly as received, before decoding it:
//
//	body, _ := io.ReadAll(r.Body)
//	if err := client.VerifyWebhook(secret, r.Header, body, 0, time.Time{}); err != nil {
//		http.Error(w, "bad signature", http.StatusUnauthorized)
//		return
//	}
//	var p api.WebhookPayload
//	json.Unmarshal(body, &p)
//
// A delivery may arrive more than once (a retry after an answer that was lost): its
// Airlock-Delivery header, also p.DeliveryID, is the same every time.
func VerifyWebhook(secret string, header http.Header, body []byte, tolerance time.Duration, now time.Time) error {
	if tolerance <= 0 {
		tolerance = DefaultWebhookTolerance
	}
	if now.IsZero() {
		now = time.Now()
	}
	ts := header.Get(api.WebhookTimestampHeader)
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%s %q: %w", api.WebhookTimestampHeader, ts, ErrWebhookTimestamp)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%s is %s away from now (tolerance %s): %w", api.WebhookTimestampHeader, d.Round(time.Second), tolerance, ErrWebhookTimestamp)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts))
	mac.Write([]byte("."))
	mac.Write(body)
	want := mac.Sum(nil)
	// The header may carry several signatures (comma separated), e.g. while a secret changes;
	// one that matches is enough.
	for _, s := range strings.Split(header.Get(api.WebhookSignatureHeader), ",") {
		v, ok := strings.CutPrefix(strings.TrimSpace(s), "v1=")
		if !ok {
			continue
		}
		got, err := hex.DecodeString(v)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return fmt.Errorf("%s: %w", api.WebhookSignatureHeader, ErrWebhookSignature)
}
