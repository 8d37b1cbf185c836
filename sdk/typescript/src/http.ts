/**
 * The two ways the transport sends an HTTP request: node:http with a keep-alive agent in Node
 * (undici's fetch costs about a millisecond more per call, half of an exec's round trip), and
 * fetch everywhere else (Bun, Deno, a fetch the caller passes). Both answer an {@link Answer}.
 * @module
 */

/** A request body sent as it is. */
export type RawBody = string | Uint8Array | Blob | ReadableStream<Uint8Array>;

/** One request as an exchange sends it. */
export interface Outgoing {
  method: string;
  headers: Record<string, string>;
  body?: RawBody;
  signal?: AbortSignal;
}

/** An answer's status, headers and body, whichever way it was fetched. */
export interface Answer {
  readonly status: number;
  readonly url: string;
  /** A header's value, or null. */
  header(name: string): string | null;
  /** The whole body as UTF-8 text. */
  text(): Promise<string>;
  /** The whole body. */
  bytes(): Promise<Uint8Array>;
  /** The body as a stream (downloads). */
  stream(): ReadableStream<Uint8Array>;
  /** The body chunk by chunk (event streams); leaving the loop closes it. */
  chunks(): AsyncIterable<Uint8Array>;
}

/** An exchange sends one request and resolves once the answer's head has come. */
export type Exchange = (url: string, req: Outgoing) => Promise<Answer>;

/** fetchExchange sends requests with a fetch. */
export function fetchExchange(f: typeof fetch): Exchange {
  return async (url, req) => {
    const init: RequestInit & { duplex?: "half" } = { method: req.method, headers: req.headers, body: req.body as RequestInit["body"], signal: req.signal };
    if (req.body instanceof ReadableStream) init.duplex = "half"; // fetch streams a request body only half-duplex
    const resp = await f(url, init);
    const empty = () => new ReadableStream<Uint8Array>({ start: (c) => c.close() });
    return {
      status: resp.status,
      url: resp.url || url,
      header: (name) => resp.headers.get(name),
      text: () => resp.text(),
      bytes: async () => new Uint8Array(await resp.arrayBuffer()),
      stream: () => resp.body ?? empty(),
      chunks: () => iterate(resp.body ?? empty()),
    };
  };
}

/** iterate reads a stream chunk by chunk; leaving the loop cancels it. */
async function* iterate(s: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array> {
  const reader = s.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      yield value;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}

/** isNode says whether this is Node itself (Bun and Deno imitate its process object). */
export function isNode(): boolean {
  const p = (globalThis as { process?: { versions?: Record<string, string> } }).process;
  return typeof p?.versions?.node === "string" && !p.versions.bun && !("Deno" in globalThis);
}

/**
 * defaultExchange is node:http's in Node, else the global fetch's. It is made on first use, so
 * that the module loads where node:http does not exist.
 */
export async function defaultExchange(): Promise<Exchange> {
  if (!isNode()) return fetchExchange(globalThis.fetch.bind(globalThis));
  const [http, https, { Readable }] = await Promise.all([import("node:http"), import("node:https"), import("node:stream")]);
  const agents: Record<string, import("node:http").Agent> = {
    "http:": new http.Agent({ keepAlive: true }),
    "https:": new https.Agent({ keepAlive: true }),
  };
  const send = (url: string, req: Outgoing, retried = false): Promise<Answer> =>
    new Promise<Answer>((resolve, reject) => {
      const u = new URL(url);
      const headers = { ...req.headers };
      const body = req.body;
      if (body === undefined) {
        if (req.method !== "GET" && req.method !== "HEAD") headers["Content-Length"] = "0";
      } else if (typeof body === "string" || body instanceof Uint8Array) {
        headers["Content-Length"] = String(Buffer.byteLength(body));
      } else if (body instanceof Blob) {
        headers["Content-Length"] = String(body.size);
      }
      let answered = false;
      const request = (u.protocol === "https:" ? https : http).request(u, { method: req.method, headers, agent: agents[u.protocol], signal: req.signal }, (res) => {
        answered = true;
        resolve({
          status: res.statusCode ?? 0,
          url,
          header: (name) => {
            const v = res.headers[name.toLowerCase()];
            return v === undefined ? null : Array.isArray(v) ? v.join(", ") : v;
          },
          bytes: async () => {
            const parts: Buffer[] = [];
            for await (const c of res) parts.push(c as Buffer);
            return Buffer.concat(parts);
          },
          text: async () => {
            let s = "";
            res.setEncoding("utf8");
            for await (const c of res) s += c as string;
            return s;
          },
          stream: () => Readable.toWeb(res) as ReadableStream<Uint8Array>,
          chunks: () => res,
        });
      });
      request.on("error", (err) => {
        // The daemon closed a kept-alive connection as the request went out on it: sent again on
        // a new one, but only when that cannot do it twice (an idempotent method, a body that can
        // be replayed; an exec's POST is not).
        const replayable = body === undefined || typeof body === "string" || body instanceof Uint8Array;
        if (request.reusedSocket && !answered && !retried && idempotent.has(req.method) && replayable && !req.signal?.aborted) {
          resolve(send(url, req, true));
          return;
        }
        reject(err);
      });
      if (body === undefined || typeof body === "string" || body instanceof Uint8Array) {
        request.end(body);
        return;
      }
      const src = Readable.fromWeb((body instanceof Blob ? body.stream() : body) as import("node:stream/web").ReadableStream<Uint8Array>);
      src.on("error", (err) => request.destroy(err));
      src.pipe(request);
    });
  return (url, req) => send(url, req);
}

/** Methods whose request may be sent twice (RFC 9110 §9.2.2); a POST (an exec) is not. */
const idempotent = new Set(["GET", "HEAD", "PUT", "DELETE", "OPTIONS"]);
