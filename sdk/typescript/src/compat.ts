/**
 * Seed 002's compatibility surface, `/api/sandbox/...`: snake_case objects exactly as the daemon
 * answers them, without the envelope. `client.compat`. Errors (`{"error": {...}}`) are
 * AirlockErrors as everywhere else.
 * @module
 */

import type { CompatCreateRequestInput, CompatRun, CompatRunRequest, CompatSandbox } from "./gen/openapi.js";
import { pathOf, type CallOptions, type Transport } from "./transport.js";

/** The `/api/sandbox` surface. */
export class Compat {
  readonly #t: Transport;

  /** @internal */
  constructor(t: Transport) {
    this.#t = t;
  }

  /**
   * create provisions a sandbox: `{ agent_id, mode: "container" | "wasm", config: { image,
   * filesystem, network, resources: { cpu: "0.5", memory: "512m", timeout } } }` →
   * `{ sandbox_id, status, mode, created_at, expires_at }`.
   */
  create(req: CompatCreateRequestInput, opts?: CallOptions): Promise<CompatSandbox> {
    return this.#t.bare({ method: "POST", path: "/api/sandbox/create", json: req, ...opts });
  }

  /** get returns a sandbox; `status` is provisioning, ready, running, destroyed or error. */
  get(id: string, opts?: CallOptions): Promise<CompatSandbox> {
    return this.#t.bare({ method: "GET", path: pathOf`/api/sandbox/${id}`, ...opts });
  }

  /** delete destroys a sandbox (204); its record stays, `destroyed`. */
  async delete(id: string, opts?: CallOptions): Promise<void> {
    await this.#t.bare({ method: "DELETE", path: pathOf`/api/sandbox/${id}`, ...opts });
  }

  /**
   * run executes Python code (`python3 -c`): `{ run_id, status: "done", result: { exit_code,
   * stdout, ... } }`, or with `async: true` at once `{ run_id, status: "running" }` to poll with
   * getRun.
   */
  run(id: string, req: CompatRunRequest, opts?: CallOptions): Promise<CompatRun> {
    return this.#t.bare({ method: "POST", path: pathOf`/api/sandbox/${id}/run`, json: req, ...opts });
  }

  /** getRun polls a run until its `status` is done (or failed). */
  getRun(id: string, runId: string, opts?: CallOptions): Promise<CompatRun> {
    return this.#t.bare({ method: "GET", path: pathOf`/api/sandbox/${id}/run/${runId}`, ...opts });
  }
}
