/**
 * Webhooks: the tenant's lifecycle and limit events POSTed to a URL, signed with HMAC-SHA256.
 * `client.webhooks`.
 * @module
 */

import type { Event, Webhook, WebhookDelivery, WebhookRequest } from "./gen/openapi.js";
import { pathOf, type CallOptions, type Transport } from "./transport.js";

/** Options of deliveries. */
export interface DeliveriesOptions extends CallOptions {
  /** At most this many, newest first (default 100, at most 1000). */
  limit?: number;
}

/** The tenant's webhooks. */
export class Webhooks {
  readonly #t: Transport;

  /** @internal */
  constructor(t: Transport) {
    this.#t = t;
  }

  /** create registers a webhook; its `secret` is in this answer only. */
  create(req: WebhookRequest, opts?: CallOptions): Promise<Webhook> {
    return this.#t.call({ method: "POST", path: "/api/v1/webhooks", json: req, ...opts });
  }

  /** list returns the tenant's webhooks with their delivery counters. */
  list(opts?: CallOptions): Promise<Webhook[]> {
    return this.#t.call({ method: "GET", path: "/api/v1/webhooks", ...opts });
  }

  /** get returns one webhook. */
  get(webhookId: string, opts?: CallOptions): Promise<Webhook> {
    return this.#t.call({ method: "GET", path: pathOf`/api/v1/webhooks/${webhookId}`, ...opts });
  }

  /** delete removes a webhook and its delivery log; resolves to it as it was. */
  delete(webhookId: string, opts?: CallOptions): Promise<Webhook> {
    return this.#t.call({ method: "DELETE", path: pathOf`/api/v1/webhooks/${webhookId}`, ...opts });
  }

  /** deliveries returns a webhook's delivery log, newest first. */
  deliveries(webhookId: string, opts: DeliveriesOptions = {}): Promise<WebhookDelivery[]> {
    const { limit, signal } = opts;
    return this.#t.call({ method: "GET", path: pathOf`/api/v1/webhooks/${webhookId}/deliveries`, query: { limit }, signal });
  }

  /** test sends a `webhook.test` event now and resolves to its delivery. */
  test(webhookId: string, opts?: CallOptions): Promise<WebhookDelivery> {
    return this.#t.call({ method: "POST", path: pathOf`/api/v1/webhooks/${webhookId}/test`, ...opts });
  }
}

/** The body of a webhook delivery (Go's api.WebhookPayload). */
export interface WebhookPayload {
  /** dlv_…: the same at every attempt of one delivery; deduplicate on it. */
  deliveryId: string;
  /** whk_… */
  webhookId: string;
  /** The event, as the events API shows it. */
  event: Event;
}

/** Why {@link verifyWebhook} refused a delivery. */
export class WebhookVerificationError extends Error {
  /** "signature": missing, malformed or not the body's; "timestamp": missing or too far from now. */
  readonly reason: "signature" | "timestamp";

  constructor(reason: "signature" | "timestamp", message: string) {
    super(message);
    this.name = "WebhookVerificationError";
    this.reason = reason;
  }
}

/** Options of verifyWebhook. */
export interface VerifyWebhookOptions {
  /** How far the delivery's timestamp may be from now, in seconds (default 300). */
  toleranceSeconds?: number;
  /** The time to check against (default: now). */
  now?: Date;
}

/**
 * verifyWebhook checks a delivery of an airlock webhook, for receivers: that its
 * Airlock-Timestamp is within the tolerance of now (so a captured delivery cannot be replayed
 * later) and that its Airlock-Signature is `v1=` and the HMAC-SHA256, keyed with the webhook's
 * secret, of the timestamp, ".", and the body, compared in constant time. Pass the body exactly
 * as received, before parsing it. Resolves to the parsed payload; rejects with a
 * WebhookVerificationError. Uses Web Crypto (Node 20, Bun, Deno, browsers).
 */
export async function verifyWebhook(
  secret: string,
  headers: Headers | Record<string, string | string[] | undefined>,
  body: string | Uint8Array,
  opts: VerifyWebhookOptions = {},
): Promise<WebhookPayload> {
  const header = (name: string): string => {
    if (headers instanceof Headers) return headers.get(name) ?? "";
    const v = Object.entries(headers).find(([k]) => k.toLowerCase() === name.toLowerCase())?.[1];
    return (Array.isArray(v) ? v.join(",") : v) ?? "";
  };
  const ts = header("Airlock-Timestamp");
  const tolerance = opts.toleranceSeconds ?? 300;
  const now = (opts.now ?? new Date()).getTime() / 1000;
  if (!/^\d+$/.test(ts) || Math.abs(now - Number(ts)) > tolerance) {
    throw new WebhookVerificationError("timestamp", `Airlock-Timestamp ${JSON.stringify(ts)} is not within ${tolerance} s of now`);
  }
  const enc = new TextEncoder();
  const raw = typeof body === "string" ? enc.encode(body) : body;
  const key = await crypto.subtle.importKey("raw", enc.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["verify"]);
  const signed = new Uint8Array([...enc.encode(`${ts}.`), ...raw]);
  // The header may carry several signatures (while a secret changes); one that matches is enough.
  for (const part of header("Airlock-Signature").split(",")) {
    const hex = part.trim().replace(/^v1=/, "");
    if (!/^([0-9a-f]{2})+$/i.test(hex) || hex === part.trim()) continue;
    const sig = new Uint8Array(hex.match(/../g)!.map((h) => parseInt(h, 16)));
    if (await crypto.subtle.verify("HMAC", key, sig, signed)) return JSON.parse(new TextDecoder().decode(raw)) as WebhookPayload;
  }
  throw new WebhookVerificationError("signature", "Airlock-Signature does not match the body under this secret");
}
