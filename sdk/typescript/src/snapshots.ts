/**
 * Snapshots: a sandbox's state saved, restored, forked. `client.snapshots`. A snapshot belongs to
 * the tenant and outlives the sandbox it was taken of, until it is deleted; a new sandbox starts
 * from one with `client.sandboxes.create({ fromSnapshot })`.
 * @module
 */

import type { Fork, ForkRequest, Restore, Snapshot, SnapshotRequest } from "./gen/openapi.js";
import { pathOf, type CallOptions, type Transport } from "./transport.js";

/** Snapshots of the key's tenant. */
export class Snapshots {
  readonly #t: Transport;

  /** @internal */
  constructor(t: Transport) {
    this.#t = t;
  }

  /**
   * create saves sandbox id's state (its files; its memory too where the level can, or as
   * `memory` says) and resolves to the snapshot. Every field may be left out.
   */
  create(id: string, req: SnapshotRequest = {}, opts?: CallOptions): Promise<Snapshot> {
    return this.#t.call({ method: "POST", path: pathOf`/api/v1/sandboxes/${id}/snapshots`, json: req, ...opts });
  }

  /** list returns a sandbox's snapshots, newest first; without an id, every snapshot of the tenant. */
  list(sandboxId?: string, opts?: CallOptions): Promise<Snapshot[]> {
    const path = sandboxId === undefined ? "/api/v1/snapshots" : pathOf`/api/v1/sandboxes/${sandboxId}/snapshots`;
    return this.#t.call({ method: "GET", path, ...opts });
  }

  /** get returns one snapshot; an unknown one (or another tenant's) is an AirlockError 404. */
  get(snapshotId: string, opts?: CallOptions): Promise<Snapshot> {
    return this.#t.call({ method: "GET", path: pathOf`/api/v1/snapshots/${snapshotId}`, ...opts });
  }

  /** delete deletes a snapshot and resolves to it as it was. */
  delete(snapshotId: string, opts?: CallOptions): Promise<Snapshot> {
    return this.#t.call({ method: "DELETE", path: pathOf`/api/v1/snapshots/${snapshotId}`, ...opts });
  }

  /**
   * restore puts sandbox id back in the state of a snapshot and resolves to seed 000's answer:
   * `{ id, state: "ready", restoredFrom, restoredAt }` beside the sandbox's other fields.
   */
  restore(id: string, snapshotId: string, opts?: CallOptions): Promise<Restore> {
    return this.#t.call({ method: "POST", path: pathOf`/api/v1/sandboxes/${id}/restore`, json: { snapshotId }, ...opts });
  }

  /**
   * fork snapshots sandbox id now and starts `count` sandboxes (1 by default, at most 64) from
   * that snapshot, named `<name>-<i>`; the snapshot is kept until deleted.
   */
  fork(id: string, req: ForkRequest = {}, opts?: CallOptions): Promise<Fork> {
    return this.#t.call({ method: "POST", path: pathOf`/api/v1/sandboxes/${id}/fork`, json: req, ...opts });
  }
}
