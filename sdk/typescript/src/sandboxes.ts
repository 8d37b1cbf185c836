/**
 * Sandboxes: create, list, run commands, stream logs, end. `client.sandboxes`.
 * @module
 */

import { AirlockError } from "./errors.js";
import { eventQuery, followEvents, type EventFilter } from "./events.js";
import { execStream, type ExecSession, type ExecStreamOptions } from "./exec-stream.js";
import { Files } from "./files.js";
import type { AgentStdin, Event, EventPage, ExecRequest, ExecResult, Execution, LogEntry, Metrics, Network, Replay, Sandbox, SpecInput } from "./gen/openapi.js";
import { follow } from "./sse.js";
import { pathOf, type CallOptions, type Transport } from "./transport.js";

// Symbol.asyncDispose is in Node from 20.4 and in Bun and Deno; where it is not, `await using`
// needs it defined (TypeScript's emitted helpers look it up).
(Symbol as { asyncDispose?: symbol }).asyncDispose ??= Symbol.for("Symbol.asyncDispose");

/** A sandbox's status. */
export type SandboxStatus = Sandbox["status"];

/**
 * The sandbox `create` resolves to: its data, and `[Symbol.asyncDispose]` (not enumerable, so
 * JSON.stringify shows only the data), so that `await using sb = await client.sandboxes.create(...)`
 * terminates it when the block leaves, also when it throws.
 */
export type SandboxHandle = Sandbox & AsyncDisposable;

/** Options of create. */
export interface CreateOptions extends CallOptions {
  /**
   * Wait until the sandbox is ready (the default, `?wait=true`; a provisioning failure is the
   * error). `false` answers at once with the sandbox `provisioning` (or `ready` from a warm pool);
   * operations sent to it meanwhile wait for it.
   */
  wait?: boolean;
}

/** Filters of list; without any, every sandbox of the key's tenant, terminated ones included. */
export interface ListOptions extends CallOptions {
  /** Any of these statuses. */
  status?: SandboxStatus | readonly SandboxStatus[];
  /** Created with this agentId. */
  agentId?: string;
  /** Carrying every one of these metadata pairs. */
  metadata?: Record<string, string>;
}

/** Options of logs. */
export interface LogsOptions extends CallOptions {
  /** Keep delivering entries as they come, until the sandbox ends (its agent exits, or it is terminated). */
  follow?: boolean;
  /** Start after the entry with this seq (0: from the first). */
  since?: number;
}

/** Options of agentStdin. */
export interface AgentStdinOptions extends CallOptions {
  /** Close the agent's stdin after the data. */
  eof?: boolean;
}

/** Live changes of a sandbox's network. `client.sandboxes.network`. */
export class SandboxNetwork {
  readonly #t: Transport;

  /** @internal */
  constructor(t: Transport) {
    this.#t = t;
  }

  /**
   * update replaces the sandbox's network policy (egressPolicy, allowedDomains,
   * blockLocalNetwork, credentials); it is in force when the call returns. Resolves to the
   * sandbox.
   */
  update(id: string, policy: Network, opts?: CallOptions): Promise<Sandbox> {
    return this.#t.call({ method: "PUT", path: pathOf`/api/v1/sandboxes/${id}/network`, json: policy, ...opts });
  }
}

/** The sandboxes of the key's tenant. `client.sandboxes`. */
export class Sandboxes {
  readonly #t: Transport;
  /** Files inside sandboxes: read, write, list, upload a directory. */
  readonly files: Files;
  /** A sandbox's network policy, changed live. */
  readonly network: SandboxNetwork;

  /** @internal */
  constructor(t: Transport) {
    this.#t = t;
    this.files = new Files(t);
    this.network = new SandboxNetwork(t);
  }

  /**
   * create makes a sandbox and, unless `{ wait: false }`, waits until it is ready. Every field of
   * spec may be left out (the daemon's defaults); seed 000's request is taken as written
   * (`resources: { cpu: "2.0", memoryMb: 4096 }`). An invalid field is an AirlockError 400 naming
   * it in `field`; a level this host lacks a 422 `isolation_unavailable`.
   *
   * The sandbox it resolves to terminates itself at the end of an `await using` block.
   */
  async create(spec: SpecInput = {}, opts: CreateOptions = {}): Promise<SandboxHandle> {
    const { wait = true, signal } = opts;
    const sb = await this.#t.call<Sandbox>({ method: "POST", path: "/api/v1/sandboxes", query: { wait: wait ? "true" : undefined }, json: spec, signal });
    return disposable(sb, () => this.terminate(sb.id));
  }

  /** get returns one sandbox, with its recorded transitions. */
  get(id: string, opts?: CallOptions): Promise<Sandbox> {
    return this.#sandboxCall("GET", pathOf`/api/v1/sandboxes/${id}`, opts);
  }

  /** list returns the tenant's sandboxes that match, newest first. */
  list(opts: ListOptions = {}): Promise<Sandbox[]> {
    const { status, agentId, metadata, signal } = opts;
    const query = {
      status: typeof status === "string" ? [status] : status,
      agentId,
      metadata: Object.entries(metadata ?? {})
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([k, v]) => `${k}=${v}`),
    };
    return this.#t.call({ method: "GET", path: "/api/v1/sandboxes", query, signal });
  }

  /**
   * start starts the sandbox's agent (its `agentId`'s command, `agent`, or its image's
   * entrypoint): the sandbox is `running` while it runs, then `completed` when it exits 0 or
   * `failed` (reason `agent_exit`). Its output is the sandbox's log. A sandbox without an agent
   * is a 409 naming the field `agent`.
   */
  start(id: string, opts?: CallOptions): Promise<Sandbox> {
    return this.#sandboxCall("POST", pathOf`/api/v1/sandboxes/${id}/start`, opts);
  }

  /** terminate ends a sandbox and releases its resources; its record is kept (`terminated`). */
  terminate(id: string, opts?: CallOptions): Promise<Sandbox> {
    return this.#sandboxCall("DELETE", pathOf`/api/v1/sandboxes/${id}`, opts);
  }

  /** pause freezes every process of a sandbox. */
  pause(id: string, opts?: CallOptions): Promise<Sandbox> {
    return this.#sandboxCall("POST", pathOf`/api/v1/sandboxes/${id}/pause`, opts);
  }

  /** resume thaws a paused sandbox. */
  resume(id: string, opts?: CallOptions): Promise<Sandbox> {
    return this.#sandboxCall("POST", pathOf`/api/v1/sandboxes/${id}/resume`, opts);
  }

  /**
   * exec runs a command to completion and resolves to its result: exit code, output, limits hit.
   * `command` is a shell line (`/bin/sh -c`) or an argv array; `timeout` is in seconds. A command
   * that fails, times out or is OOM-killed is no error: see `exitCode`, `timedOut`, `oomKilled`.
   */
  exec(id: string, req: ExecRequest, opts?: CallOptions): Promise<ExecResult> {
    return this.#t.call({ method: "POST", path: pathOf`/api/v1/sandboxes/${id}/exec`, json: req, ...opts });
  }

  /**
   * execStream runs a command over a WebSocket and resolves once it has started: stream its
   * output, write its stdin, signal it, resize its terminal (`tty: true`), and `wait()` for its
   * result. See {@link ExecSession}.
   */
  execStream(id: string, opts: ExecStreamOptions): Promise<ExecSession> {
    return execStream(this.#t, id, opts);
  }

  /** execs lists a sandbox's executions, running and finished. */
  execs(id: string, opts?: CallOptions): Promise<Execution[]> {
    return this.#t.call({ method: "GET", path: pathOf`/api/v1/sandboxes/${id}/execs`, ...opts });
  }

  /** execution returns one execution of a sandbox; its `result` is there once it has ended. */
  execution(id: string, executionId: string, opts?: CallOptions): Promise<Execution> {
    return this.#t.call({ method: "GET", path: pathOf`/api/v1/sandboxes/${id}/execs/${executionId}`, ...opts });
  }

  /**
   * logs yields a sandbox's log entries (output chunks and events) oldest first: those there are,
   * or with `follow` also those to come, until the sandbox ends. A followed stream that drops is
   * resumed after the last entry yielded, so none comes twice. Breaking out of the loop closes
   * the connection.
   *
   * ```ts
   * for await (const line of client.sandboxes.logs(id, { follow: true })) console.log(`[${line.timestamp}] ${line.message}`);
   * ```
   */
  logs(id: string, opts: LogsOptions = {}): AsyncGenerator<LogEntry, void, undefined> {
    const { since, signal } = opts;
    const path = pathOf`/api/v1/sandboxes/${id}/logs`;
    const page = (data: unknown) => data as LogEntry[];
    if (!opts.follow) {
      const t = this.#t;
      return (async function* () {
        yield* page(await t.call({ method: "GET", path, query: { since: since || undefined }, signal }));
      })();
    }
    return follow<LogEntry>({
      what: `logs of ${id}`,
      event: "log",
      seq: (e) => e.seq,
      page,
      after: since || undefined,
      signal,
      open: (last, s) => this.#t.send({ method: "GET", path, query: { since: last, follow: "true" }, accept: "text/event-stream", signal: s }),
    });
  }

  /** events returns one page of a sandbox's audit events, oldest first; pass `next` as `after` for the next. */
  events(id: string, filter: EventFilter = {}): Promise<EventPage> {
    return this.#t.call({ method: "GET", path: pathOf`/api/v1/sandboxes/${id}/events`, query: eventQuery(filter), signal: filter.signal });
  }

  /**
   * followEvents yields a sandbox's audit events as they are written (after `filter.after`),
   * until the sandbox is terminated; a dropped stream is resumed with Last-Event-ID.
   */
  followEvents(id: string, filter: EventFilter = {}): AsyncGenerator<Event, void, undefined> {
    return followEvents(this.#t, pathOf`/api/v1/sandboxes/${id}/events`, `events of ${id}`, filter);
  }

  /** metrics returns a sandbox's current and recent (1 s samples, last 5 min) resource readings. */
  metrics(id: string, opts?: CallOptions): Promise<Metrics> {
    return this.#t.call({ method: "GET", path: pathOf`/api/v1/sandboxes/${id}/metrics`, ...opts });
  }

  /** replay returns a sandbox's whole recorded history, ordered for display. */
  replay(id: string, opts?: CallOptions): Promise<Replay> {
    return this.#t.call({ method: "GET", path: pathOf`/api/v1/sandboxes/${id}/replay`, ...opts });
  }

  /**
   * agentStdin appends data to the stdin of the sandbox's running agent; `eof` closes it after.
   * The daemon holds at most 1 MiB the agent has not read: past it a 429 (retry later).
   */
  agentStdin(id: string, data: string | Uint8Array, opts: AgentStdinOptions = {}): Promise<AgentStdin> {
    const { eof, signal } = opts;
    return this.#t.call({
      method: "POST",
      path: pathOf`/api/v1/sandboxes/${id}/agent/stdin`,
      query: { eof: eof ? "true" : undefined },
      body: data,
      contentType: "application/octet-stream",
      signal,
    });
  }

  #sandboxCall(method: string, path: string, opts?: CallOptions): Promise<Sandbox> {
    return this.#t.call({ method, path, ...opts });
  }
}

/**
 * disposable gives a sandbox a non-enumerable `[Symbol.asyncDispose]` that ends it; one that has
 * ended already (404, 409) is no error.
 */
export function disposable(sb: Sandbox, end: () => Promise<unknown>): SandboxHandle {
  Object.defineProperty(sb, Symbol.asyncDispose, {
    enumerable: false,
    value: async () => {
      try {
        await end();
      } catch (err) {
        if (!(err instanceof AirlockError && (err.status === 404 || err.status === 409))) throw err;
      }
    },
  });
  return sb as SandboxHandle;
}
