/**
 * Warm pools: sandboxes made ahead of time, claimed by creates of their shape. `client.pools`.
 * Every key lists them; making and removing one needs an admin key (403 otherwise).
 * @module
 */

import type { PoolInput, PoolStatus } from "./gen/openapi.js";
import { pathOf, type CallOptions, type Transport } from "./transport.js";

/** The daemon's warm pools. */
export class Pools {
  readonly #t: Transport;

  /** @internal */
  constructor(t: Transport) {
    this.#t = t;
  }

  /** list returns every pool with its counters, sorted by name. */
  list(opts?: CallOptions): Promise<PoolStatus[]> {
    return this.#t.call({ method: "GET", path: "/api/v1/pools", ...opts });
  }

  /** get returns one pool; an unknown one is an AirlockError 404. */
  get(name: string, opts?: CallOptions): Promise<PoolStatus> {
    return this.#t.call({ method: "GET", path: pathOf`/api/v1/pools/${name}`, ...opts });
  }

  /**
   * put makes or replaces a pool (admin key): `{ spec, size, refillPerSecond, maxAgeSeconds }`. A
   * claim-time field in spec (environment, name, agentId, ...) is a 400 naming it; a pool of the
   * configuration file a 409.
   */
  put(name: string, pool: PoolInput, opts?: CallOptions): Promise<PoolStatus> {
    return this.#t.call({ method: "PUT", path: pathOf`/api/v1/pools/${name}`, json: pool, ...opts });
  }

  /** delete removes a pool made through the API, ending its unclaimed sandboxes (admin key); resolves to its last status. */
  delete(name: string, opts?: CallOptions): Promise<PoolStatus> {
    return this.#t.call({ method: "DELETE", path: pathOf`/api/v1/pools/${name}`, ...opts });
  }
}
