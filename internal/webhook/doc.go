// Package webhook delivers a tenant's events to the URLs it registered, signed, retried and
// logged, without ever holding up the daemon.
//
// The path of an event:
//
//	audit log writer ─▶ Dispatcher.Publish: match the tenant's hooks (in memory), append to a
//	                    bounded queue, return (never blocks; a full queue drops, counted)
//	loop             ─▶ one transaction per batch: a pending row per delivery in
//	                    webhook_deliveries, with the exact body that will be signed; wake the
//	                    webhook's worker
//	worker (one per webhook) ─▶ its pending rows in order, one at a time: POST, signed afresh at
//	                    every attempt; 2xx delivered; network error, timeout, 408, 429, 5xx
//	                    retried after an exponential backoff with jitter (Retry-After honoured,
//	                    up to the cap) until the last attempt; any other answer fails at once
//
// Design choices:
//
//   - Durable: a delivery is a row before it is attempted, and every attempt is recorded, so a
//     restarted daemon (Start) resumes every pending delivery where it was. Delivery is at least
//     once: an answer lost to a crash means the receiver sees the delivery again, with the same
//     Airlock-Delivery ID to deduplicate on.
//   - Ordered per webhook: a worker sends its webhook's deliveries one at a time in the order
//     their events happened, and a delivery being retried holds back those after it. A dead
//     receiver then costs one request per backoff step, not one per event, and its backlog is
//     capped (Config.MaxPending; newer deliveries are recorded as dropped).
//   - Isolated: each webhook has its own worker, and every attempt is bounded by Config.Timeout,
//     so a slow or hanging receiver stalls only its own webhook; Publish only takes a mutex.
//   - Safe to point at the network: the dialer checks the address it actually connects to (after
//     DNS) — cloud metadata addresses never, loopback, private and link-local ones only with
//     Config.AllowPrivateNetworks — no proxy from the environment is used, and redirects are
//     not followed.
//   - Signed over the timestamp and the body (api.WebhookSignatureHeader): a receiver that checks
//     both (client.VerifyWebhook) refuses a changed body and a replayed old delivery.
//   - Bounded log: each webhook keeps its Config.LogSize most recent finished deliveries; its
//     counters (delivered, failed, dropped) are kept on the webhook and survive the pruning.
package webhook
