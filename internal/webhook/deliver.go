package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/store"
)

// worker sends one webhook's pending deliveries, one at a time, in order.
type worker struct {
	d      *Dispatcher
	h      *hook
	wake   chan struct{} // new pending deliveries (capacity 1)
	ctx    context.Context
	cancel context.CancelFunc
}

// pageSize is how many pending deliveries a worker reads at a time.
const pageSize = 100

// startWorker starts h's worker. d.mu must be held.
func (d *Dispatcher) startWorker(h *hook) {
	ctx, cancel := context.WithCancel(d.ctx)
	w := &worker{d: d, h: h, wake: make(chan struct{}, 1), ctx: ctx, cancel: cancel}
	d.workers[h.id] = w
	d.wg.Add(1)
	go w.run()
}

// signal tells the worker that it has new pending deliveries.
func (w *worker) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *worker) run() {
	defer w.d.wg.Done()
	for {
		dls, err := w.d.st.PendingWebhookDeliveries(w.ctx, w.h.id, pageSize)
		if err != nil {
			if w.ctx.Err() != nil {
				return
			}
			w.d.log.Error("webhook: reading pending deliveries", "webhook", w.h.id, "err", err)
			if !sleep(w.ctx, time.Second) {
				return
			}
			continue
		}
		if len(dls) == 0 {
			select {
			case <-w.wake:
				continue
			case <-w.ctx.Done():
				return
			}
		}
		for _, dl := range dls {
			if !w.deliver(dl) {
				return
			}
		}
	}
}

// deliver tries dl until it is final; false means the worker is stopping (dl stays pending,
// the attempt in flight not counted).
func (w *worker) deliver(dl store.WebhookDelivery) bool {
	for {
		if wait := time.Until(dl.NextAttemptAt); wait > 0 && !sleep(w.ctx, wait) {
			return false
		}
		r := w.d.attempt(w.ctx, w.h, dl)
		if w.ctx.Err() != nil {
			return false
		}
		final := w.d.settle(&dl, r, time.Now().UTC())
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := w.d.st.UpdateWebhookDelivery(ctx, dl)
		cancel()
		if err != nil {
			// The row still says what it said before; go on from memory, but do not spin on a
			// store that fails.
			w.d.log.Error("webhook: recording an attempt", "webhook", w.h.id, "delivery", dl.ID, "err", err)
			if !sleep(w.ctx, time.Second) {
				return false
			}
		}
		switch dl.Status {
		case api.DeliveryDelivered:
			w.d.log.Debug("webhook delivered", "webhook", w.h.id, "delivery", dl.ID, "event", dl.EventType, "attempts", dl.Attempts)
		case api.DeliveryPending:
			w.d.log.Debug("webhook attempt failed, retrying", "webhook", w.h.id, "delivery", dl.ID, "attempts", dl.Attempts,
				"next", dl.NextAttemptAt, "err", dl.Error)
		default:
			w.d.log.Warn("webhook delivery failed", "webhook", w.h.id, "delivery", dl.ID, "event", dl.EventType,
				"attempts", dl.Attempts, "status", dl.ResponseStatus, "err", dl.Error)
		}
		if final {
			w.d.mu.Lock()
			w.d.unreserve(w.h.id)
			w.d.mu.Unlock()
			return true
		}
	}
}

// result is one attempt's outcome.
type result struct {
	ok         bool
	retry      bool // the failure may pass: a network error, timeout, 408, 429, 5xx
	status     int  // the HTTP status, 0 without an answer
	err        string
	dur        time.Duration
	retryAfter time.Duration // the receiver's Retry-After
}

// maxErrorBody is how much of a failed answer is quoted in the delivery's error.
const maxErrorBody = 200

// attempt POSTs dl's payload to h once, signed now, within Timeout.
func (d *Dispatcher) attempt(ctx context.Context, h *hook, dl store.WebhookDelivery) result {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(dl.Payload))
	if err != nil {
		return result{err: "bad URL: " + err.Error()}
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "airlock-webhook/1")
	req.Header.Set(api.WebhookIDHeader, h.id)
	req.Header.Set(api.WebhookDeliveryHeader, dl.ID)
	req.Header.Set(api.WebhookEventHeader, dl.EventType)
	req.Header.Set(api.WebhookTimestampHeader, ts)
	req.Header.Set(api.WebhookSignatureHeader, "v1="+sign(h.secret, ts, dl.Payload))
	t0 := time.Now()
	resp, err := d.hc.Do(req)
	if err != nil {
		r := result{dur: time.Since(t0), retry: true, err: describe(err, d.cfg.Timeout)}
		if errors.Is(err, errBlocked) {
			r.retry = false
		}
		return r
	}
	// Read a little of the answer: to quote it, and so that the connection can be reused.
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	r := result{status: resp.StatusCode, dur: time.Since(t0)}
	switch s := resp.StatusCode; {
	case s >= 200 && s <= 299:
		r.ok = true
		return r
	case s >= 300 && s <= 399:
		r.err = fmt.Sprintf("HTTP %d: redirects are not followed (Location: %s)", s, resp.Header.Get("Location"))
		return r
	case s == http.StatusRequestTimeout || s == http.StatusTooManyRequests || s >= 500:
		r.retry = true
		r.retryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	r.err = fmt.Sprintf("HTTP %d", resp.StatusCode)
	if q := quote(body); q != "" {
		r.err += ": " + q
	}
	return r
}

// settle records attempt r of dl, made at now, in dl: its status, times and error, and tells
// OnDelivery. It reports whether dl is final.
func (d *Dispatcher) settle(dl *store.WebhookDelivery, r result, now time.Time) bool {
	dl.Attempts++
	dl.LastAttemptAt, dl.DurationMs, dl.ResponseStatus, dl.Error = now, r.dur.Milliseconds(), r.status, r.err
	dl.NextAttemptAt = time.Time{}
	switch {
	case r.ok:
		dl.Status, dl.DeliveredAt = api.DeliveryDelivered, now
		d.outcome(OutcomeDelivered, 1)
		return true
	case r.retry && dl.Attempts < d.cfg.MaxAttempts:
		dl.Status, dl.NextAttemptAt = api.DeliveryPending, now.Add(d.backoff(dl.Attempts, r.retryAfter))
		d.outcome(OutcomeRetried, 1)
		return false
	case r.retry && dl.Attempts > 1:
		dl.Error = fmt.Sprintf("%s (gave up after %d attempts)", dl.Error, dl.Attempts)
	}
	dl.Status = api.DeliveryFailed
	d.outcome(OutcomeFailed, 1)
	return true
}

// backoff is the wait after the attempts-th failed attempt: BackoffBase × 3^(attempts-1), at
// most BackoffMax, ±25% at random (so that receivers coming back are not hit by every webhook
// at once), or the receiver's Retry-After when that is longer (still at most BackoffMax).
func (d *Dispatcher) backoff(attempts int, retryAfter time.Duration) time.Duration {
	b := d.cfg.BackoffBase
	for i := 1; i < attempts && b < d.cfg.BackoffMax; i++ {
		b *= 3
	}
	b = min(b, d.cfg.BackoffMax)
	b = time.Duration(float64(b) * (0.75 + rand.Float64()/2))
	if retryAfter > b {
		b = min(retryAfter, d.cfg.BackoffMax)
	}
	return b
}

// retryAfter parses a Retry-After header: seconds or an HTTP date; 0 when absent or malformed.
func retryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.Atoi(h); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// sign is the signature of a delivery: hex HMAC-SHA256 keyed with secret of ts "." body.
func sign(secret, ts string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts))
	mac.Write([]byte("."))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// describe says why a request got no answer, without the URL (the delivery names its webhook).
func describe(err error, timeout time.Duration) string {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		if ue.Timeout() {
			return fmt.Sprintf("no answer within %s", timeout)
		}
		err = ue.Err
	}
	return err.Error()
}

// quote is the start of an answer's body, as one line of valid UTF-8.
func quote(b []byte) string {
	if len(b) > maxErrorBody {
		b = b[:maxErrorBody]
	}
	return strings.Join(strings.Fields(strings.ToValidUTF8(string(b), "")), " ")
}

// newHTTPClient is the client of every delivery: the address policy checked on the address
// each connection is made to (after DNS, so a name cannot lead around it), no proxy from the
// environment (it would be the address checked), no redirects.
func (d *Dispatcher) newHTTPClient() *http.Client {
	dialer := d.guard().Dialer(d.cfg.Timeout)
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   d.cfg.Timeout,
		ResponseHeaderTimeout: d.cfg.Timeout,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
}

// sleep waits for d or ctx; false means ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
