/**
 * The HTTP transport of the SDK: the daemon's address and key, requests (through http.ts), the
 * {ok, data} envelope, errors and query strings. Every resource module talks through it.
 * @module
 */

import { AirlockConnectionError, errorFromBody } from "./errors.js";
import { defaultExchange, fetchExchange, type Answer, type Exchange, type RawBody } from "./http.js";

export type { Answer, RawBody };

/** Where the client looks for the daemon when neither baseUrl nor AIRLOCK_HOST says. */
export const DEFAULT_HOST = "http://127.0.0.1:7070";

/** Options every method takes last. */
export interface CallOptions {
  /** Aborts the call (and a stream it opened) with the signal's reason. */
  signal?: AbortSignal;
}

/** A query string's values: arrays repeat the key, undefined and null leave it out. */
export type Query = Record<string, string | number | boolean | readonly string[] | undefined | null>;

/** One HTTP exchange with the daemon. */
export interface ApiRequest extends CallOptions {
  method: string;
  /** The path, already escaped (see {@link pathOf}). */
  path: string;
  query?: Query;
  /** Marshalled into a JSON body. */
  json?: unknown;
  /** Sent as it is. */
  body?: RawBody;
  contentType?: string;
  accept?: string;
  headers?: Record<string, string>;
}

/** env reads an environment variable where there is a process environment (Node, Bun, Deno). */
export function env(name: string): string | undefined {
  const p = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  const v = p?.env?.[name];
  return v === "" ? undefined : v;
}

/** hostUrl turns an AIRLOCK_HOST value into a base URL: "HOST:PORT" gets "http://". */
export function hostUrl(host: string | undefined): string {
  const h = (host ?? "").trim();
  if (h === "") return DEFAULT_HOST;
  return h.includes("://") ? h : `http://${h}`;
}

/**
 * pathOf builds an API path from a template's literal parts and its parameters, escaping each
 * parameter as one path segment: pathOf`/api/v1/sandboxes/${id}/exec`.
 */
export function pathOf(parts: TemplateStringsArray, ...params: string[]): string {
  let out = parts[0] ?? "";
  params.forEach((p, i) => {
    out += encodeURIComponent(p) + (parts[i + 1] ?? "");
  });
  return out;
}

/** queryString encodes a query, "" when it is empty. */
export function queryString(q: Query | undefined): string {
  if (!q) return "";
  const s = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) {
    if (v === undefined || v === null) continue;
    if (Array.isArray(v)) for (const x of v as readonly string[]) s.append(k, x);
    else s.append(k, String(v));
  }
  const text = s.toString();
  return text ? `?${text}` : "";
}

/** The parts of a Transport. */
export interface TransportInit {
  baseUrl: string;
  apiKey: string;
  fetch?: typeof fetch;
}

/** Transport sends requests to one daemon with one key. */
export class Transport {
  /** The daemon's address without a trailing slash, e.g. "http://127.0.0.1:7070". */
  readonly baseUrl: string;
  readonly #apiKey: string;
  #exchange: Promise<Exchange> | undefined;

  constructor(init: TransportInit) {
    let u: URL;
    try {
      u = new URL(init.baseUrl);
    } catch (cause) {
      throw new TypeError(`airlock: base URL ${JSON.stringify(init.baseUrl)} is not a URL`, { cause });
    }
    if ((u.protocol !== "http:" && u.protocol !== "https:") || u.search || u.hash || u.username) {
      throw new TypeError(`airlock: base URL ${JSON.stringify(init.baseUrl)}: want http(s)://HOST:PORT[/PREFIX]`);
    }
    this.baseUrl = u.href.replace(/\/+$/, "");
    this.#apiKey = init.apiKey;
    if (init.fetch) this.#exchange = Promise.resolve(fetchExchange(init.fetch));
  }

  /** url is the absolute address of an API path with a query. */
  url(path: string, query?: Query): string {
    return this.baseUrl + path + queryString(query);
  }

  /** headers are the headers every request carries: the key. */
  authHeaders(): Record<string, string> {
    return { Authorization: `Bearer ${this.#apiKey}` };
  }

  /**
   * send performs a request and returns the answer when its status is 2xx; any other answer is
   * read and thrown as an AirlockError. A failure to reach the daemon is an
   * AirlockConnectionError; an abort is the signal's reason.
   */
  async send(r: ApiRequest): Promise<Answer> {
    const headers: Record<string, string> = { Accept: r.accept ?? "application/json", ...this.authHeaders(), ...r.headers };
    let body: RawBody | undefined = r.body;
    if (r.json !== undefined) {
      body = JSON.stringify(r.json);
      headers["Content-Type"] = "application/json";
    } else if (r.contentType) {
      headers["Content-Type"] = r.contentType;
    }
    this.#exchange ??= defaultExchange();
    let ans: Answer;
    try {
      r.signal?.throwIfAborted();
      ans = await (await this.#exchange)(this.url(r.path, r.query), { method: r.method, headers, body, signal: r.signal });
    } catch (err) {
      if (r.signal?.aborted) throw r.signal.reason ?? err;
      throw new AirlockConnectionError(`airlock: ${r.method} ${this.baseUrl}${r.path}: ${(err as Error).message}`, { cause: err });
    }
    if (ans.status >= 200 && ans.status <= 299) return ans;
    throw errorFromBody(ans.status, await readText(ans, r.signal), ans.header("Retry-After"));
  }

  /** call performs a request and returns the data of its {ok, data} envelope. */
  async call<T>(r: ApiRequest): Promise<T> {
    const ans = await this.send(r);
    return decodeEnvelope<T>(ans, await readText(ans, r.signal));
  }

  /**
   * bare performs a request whose answer is the object itself, not an envelope (the
   * compatibility surface, the OpenAPI document); undefined for an answer without a body (204).
   */
  async bare<T>(r: ApiRequest): Promise<T> {
    const ans = await this.send(r);
    const text = await readText(ans, r.signal);
    if (text === "") return undefined as T;
    return parseJSON<T>(ans, text);
  }
}

/** decodeEnvelope returns the data of a success envelope. */
export function decodeEnvelope<T>(ans: Answer, text: string): T {
  const env = parseJSON<{ ok?: unknown; data?: unknown; error?: unknown }>(ans, text);
  if (env.ok !== true) {
    // A 2xx with ok: false should not happen; say what came rather than invent a status.
    throw errorFromBody(ans.status, text);
  }
  return env.data as T;
}

function parseJSON<T>(ans: Answer, text: string): T {
  try {
    return JSON.parse(text) as T;
  } catch (cause) {
    // A 2xx that is not JSON is no answer of airlock's (a proxy's page?): not an AirlockError.
    throw new Error(`airlock: ${ans.url}: the answer is not JSON: ${text.slice(0, 100)}`, { cause });
  }
}

/** readText reads an answer's body; a connection lost meanwhile is an AirlockConnectionError. */
export async function readText(ans: Answer, signal?: AbortSignal): Promise<string> {
  try {
    return await ans.text();
  } catch (err) {
    if (signal?.aborted) throw signal.reason ?? err;
    throw new AirlockConnectionError(`airlock: reading the answer of ${ans.url}: ${(err as Error).message}`, { cause: err });
  }
}
