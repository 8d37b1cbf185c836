/**
 * What the operator lends the tenant: volumes, templates, and its quota. `client.volumes`,
 * `client.templates`, `client.tenants`. A tenant key sees what is granted to it; an admin key
 * sees everything, host paths included.
 * @module
 */

import type { TemplateInfo, Tenant, VolumeInfo } from "./gen/openapi.js";
import type { CallOptions, Transport } from "./transport.js";

/** A read-only list of the daemon's configuration. */
export class Listing<T> {
  readonly #t: Transport;
  readonly #path: string;

  /** @internal */
  constructor(t: Transport, path: string) {
    this.#t = t;
    this.#path = path;
  }

  /** list returns the entries the key may see. */
  list(opts?: CallOptions): Promise<T[]> {
    return this.#t.call({ method: "GET", path: this.#path, ...opts });
  }
}

/** The operator's named volumes a create may mount (`volumes: [{ name, path }]`). */
export type Volumes = Listing<VolumeInfo>;
/** The operator's root filesystem templates a create may name (`template`). */
export type Templates = Listing<TemplateInfo>;
/** The key's tenant's quota and usage (an admin key: every tenant's). */
export type Tenants = Listing<Tenant>;
