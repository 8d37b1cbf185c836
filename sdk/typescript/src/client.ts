/**
 * The client: one daemon, one API key, and the API's resources as properties.
 * @module
 */

import { Compat } from "./compat.js";
import { Events } from "./events.js";
import type { Capabilities, Health, TemplateInfo, Tenant, VolumeInfo } from "./gen/openapi.js";
import { Images } from "./images.js";
import { Pools } from "./pools.js";
import type { Files } from "./files.js";
import { Sandboxes, type SandboxNetwork } from "./sandboxes.js";
import { Snapshots } from "./snapshots.js";
import { Listing } from "./tenancy.js";
import { Transport, env, hostUrl, readText, type CallOptions } from "./transport.js";
import { Mcp, Tools } from "./tools.js";
import { Webhooks } from "./webhooks.js";

/** How to reach the daemon. */
export interface ClientOptions {
  /** The API key (`airlock keys create`); default: the environment's AIRLOCK_TOKEN. */
  apiKey?: string;
  /**
   * The daemon's address, e.g. "http://127.0.0.1:7070" (a path prefix is kept); default: the
   * environment's AIRLOCK_HOST ("HOST:PORT" means http), else http://127.0.0.1:7070.
   */
  baseUrl?: string;
  /** The fetch to send requests with (a proxy's, a test's); default: the global fetch. */
  fetch?: typeof fetch;
}

/**
 * AirlockClient talks to one airlock daemon with one API key. Its methods are grouped by
 * resource: `client.sandboxes`, `client.snapshots`, `client.events`, ... Every method takes an
 * optional `{ signal }` (in its options object, or last) to abort it.
 *
 * ```ts
 * const client = new AirlockClient(); // AIRLOCK_TOKEN, AIRLOCK_HOST
 * await using sb = await client.sandboxes.create({ resources: { memoryMb: 512 } });
 * const res = await client.sandboxes.exec(sb.id, { command: "python3 -c 'print(6*7)'" });
 * console.log(res.stdout); // 42
 * ```
 */
export class AirlockClient {
  /** The daemon's address as the client uses it. */
  readonly baseUrl: string;
  /** Sandboxes: create, list, exec, logs, files, network, ... */
  readonly sandboxes: Sandboxes;
  /** Files inside sandboxes (the same as `client.sandboxes.files`, where the Python SDK has them too). */
  readonly files: Files;
  /** Live network policy changes (the same as `client.sandboxes.network`). */
  readonly network: SandboxNetwork;
  /** Snapshots: create, list, get, delete, restore, fork. */
  readonly snapshots: Snapshots;
  /** The tenant's audit events: list, follow. */
  readonly events: Events;
  /** Warm pools (making one needs an admin key). */
  readonly pools: Pools;
  /** The host's images (pulling and removing need an admin key). */
  readonly images: Images;
  /** The tenant's webhooks. */
  readonly webhooks: Webhooks;
  /** The operator's volumes the key may mount. */
  readonly volumes: Listing<VolumeInfo>;
  /** The operator's rootfs templates the key may use. */
  readonly templates: Listing<TemplateInfo>;
  /** The key's tenant's quota and usage (an admin key: every tenant's). */
  readonly tenants: Listing<Tenant>;
  /** Seed 002's `/api/sandbox` surface, in its snake_case shapes. */
  readonly compat: Compat;
  /** The tool gateway: tools this key may call, calls, the tenant's tools, servers and policies. */
  readonly tools: Tools;
  /** The daemon's MCP endpoint (/mcp) at the wire level, and its URL for an MCP client. */
  readonly mcp: Mcp;
  readonly #t: Transport;

  /**
   * @throws Error when there is no API key (neither `apiKey` nor AIRLOCK_TOKEN), TypeError when
   * the base URL is not an http(s) URL.
   */
  constructor(opts: ClientOptions = {}) {
    const apiKey = opts.apiKey ?? env("AIRLOCK_TOKEN");
    if (!apiKey) {
      throw new Error("airlock: no API key: pass new AirlockClient({ apiKey }) or set AIRLOCK_TOKEN (make one with `airlock keys create --tenant NAME`)");
    }
    this.#t = new Transport({ baseUrl: opts.baseUrl ?? hostUrl(env("AIRLOCK_HOST")), apiKey, fetch: opts.fetch });
    this.baseUrl = this.#t.baseUrl;
    this.sandboxes = new Sandboxes(this.#t);
    this.files = this.sandboxes.files;
    this.network = this.sandboxes.network;
    this.snapshots = new Snapshots(this.#t);
    this.events = new Events(this.#t);
    this.pools = new Pools(this.#t);
    this.images = new Images(this.#t);
    this.webhooks = new Webhooks(this.#t);
    this.volumes = new Listing(this.#t, "/api/v1/volumes");
    this.templates = new Listing(this.#t, "/api/v1/templates");
    this.tenants = new Listing(this.#t, "/api/v1/tenants");
    this.compat = new Compat(this.#t);
    this.tools = new Tools(this.#t);
    this.mcp = new Mcp(this.#t);
  }

  /** capabilities returns the isolation levels and features this host offers, and why not. */
  capabilities(opts?: CallOptions): Promise<Capabilities> {
    return this.#t.call({ method: "GET", path: "/api/v1/capabilities", ...opts });
  }

  /** health asks the daemon's /healthz (which needs no key). */
  health(opts?: CallOptions): Promise<Health> {
    return this.#t.call({ method: "GET", path: "/healthz", ...opts });
  }

  /** openapi returns the daemon's OpenAPI document (not enveloped), from which this SDK's types are made. */
  openapi(opts?: CallOptions): Promise<Record<string, unknown>> {
    return this.#t.bare({ method: "GET", path: "/api/v1/openapi.json", ...opts });
  }

  /** prometheusMetrics returns the daemon's Prometheus metrics (GET /metrics) as exposition text. */
  async prometheusMetrics(opts?: CallOptions): Promise<string> {
    const ans = await this.#t.send({ method: "GET", path: "/metrics", accept: "text/plain", ...opts });
    return readText(ans, opts?.signal);
  }
}
