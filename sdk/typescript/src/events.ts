/**
 * The tenant's audit events, a page at a time or followed. `client.events`; a sandbox's own are
 * `client.sandboxes.events` and `followEvents`.
 * @module
 */

import type { AuditVerification, Event, EventPage } from "./gen/openapi.js";
import { follow } from "./sse.js";
import type { CallOptions, Query, Transport } from "./transport.js";

/** Filters of a sandbox's events. */
export interface EventFilter extends CallOptions {
  /** A type prefix, e.g. "network." or "exec.exited". */
  type?: string;
  /** The events of one execution. */
  executionId?: string;
  /** Events at or after this time. */
  since?: Date | string;
  /** Events before this time. */
  until?: Date | string;
  /** The cursor: events after this seq (the previous page's `next`, or the last seq seen). */
  after?: number;
  /** At most this many per page (default 1000, at most 10000). */
  limit?: number;
}

/** Filters of the tenant's events. */
export interface TenantEventFilter extends EventFilter {
  /** Keep this sandbox's events. */
  sandboxId?: string;
}

/** eventQuery is the query string of an event filter. */
export function eventQuery(f: TenantEventFilter, follow = false): Query {
  const time = (t: Date | string | undefined) => (t instanceof Date ? t.toISOString() : t);
  return {
    sandboxId: f.sandboxId,
    type: f.type,
    executionId: f.executionId,
    since: time(f.since),
    until: time(f.until),
    after: f.after,
    limit: f.limit,
    follow: follow ? "true" : undefined,
  };
}

/**
 * followEvents yields the events of a followed events route, resuming a dropped stream with
 * Last-Event-ID (the last seq delivered).
 */
export function followEvents(t: Transport, path: string, what: string, filter: TenantEventFilter): AsyncGenerator<Event, void, undefined> {
  const query = eventQuery(filter, true);
  return follow<Event>({
    what,
    event: "event",
    seq: (e) => e.seq ?? 0,
    page: (data) => (data as EventPage).events,
    after: filter.after,
    signal: filter.signal,
    open: (last, signal) =>
      t.send({
        method: "GET",
        path,
        query,
        accept: "text/event-stream",
        headers: last !== undefined ? { "Last-Event-ID": String(last) } : undefined,
        signal,
      }),
  });
}

/** The tenant's audit events: every sandbox's, and its API calls. `client.events`. */
export class Events {
  readonly #t: Transport;

  /** @internal */
  constructor(t: Transport) {
    this.#t = t;
  }

  /** list returns one page of the tenant's events, oldest first; pass `next` as `after` for the next. */
  list(filter: TenantEventFilter = {}): Promise<EventPage> {
    return this.#t.call({ method: "GET", path: "/api/v1/events", query: eventQuery(filter), signal: filter.signal });
  }

  /**
   * verify walks the daemon's audit log's hash chain (every tenant's events are one chain) and
   * says whether every event is what the daemon wrote, or where it first breaks. A tenant key's
   * answer may be up to a minute old and names none of another tenant's events; an admin key's
   * is fresh.
   */
  verify(opts?: CallOptions): Promise<AuditVerification> {
    return this.#t.call({ method: "GET", path: "/api/v1/audit/verify", ...opts });
  }

  /**
   * follow yields the tenant's events as they are written (after `filter.after`), until the loop
   * is left or the signal aborts; a dropped stream is resumed with Last-Event-ID.
   */
  follow(filter: TenantEventFilter = {}): AsyncGenerator<Event, void, undefined> {
    return followEvents(this.#t, "/api/v1/events", "the tenant's events", filter);
  }
}
