/**
 * The WebSocket adapter: one small interface over the `ws` package in Node (whose own WebSocket
 * cannot send the Authorization header the daemon requires), and elsewhere the platform's global
 * WebSocket with its `headers` option (Bun, Deno; `ws` under Deno's Node compatibility keeps the
 * process from exiting), or `ws` where there is no global one. A browser's WebSocket cannot send
 * the header: there the key goes as the subprotocol `airlock.bearer.<key>` beside `airlock.v1`,
 * which the daemon answers (docs/api.md), from a page of the daemon's own origin.
 * @module
 */

import { AirlockConnectionError, errorFromBody } from "./errors.js";
import { isNode } from "./http.js";

/** The largest message the daemon may send: an exit frame can carry captured output. */
const maxMessage = 64 << 20;

/** What a socket reports. */
export interface SocketHandlers {
  /** A text message. */
  message(text: string): void;
  /** The connection ended: the close code (1006 when it broke) and reason. */
  close(code: number, reason: string): void;
}

/** An open WebSocket. */
export interface Socket {
  /** Sends a text message; resolves once it is handed to the connection. */
  send(text: string): Promise<void>;
  /** Closes the connection (1000 by default). */
  close(code?: number, reason?: string): void;
}

/** The part of the `ws` package this adapter uses. */
interface WsSocket {
  on(event: "message", fn: (data: Buffer | ArrayBuffer | Buffer[], isBinary: boolean) => void): void;
  on(event: "close", fn: (code: number, reason: Buffer) => void): void;
  once(event: "open", fn: () => void): void;
  once(event: "error", fn: (err: Error) => void): void;
  once(event: "unexpected-response", fn: (req: { destroy(): void }, res: IncomingLike) => void): void;
  on(event: "error", fn: (err: Error) => void): void;
  send(data: string, cb: (err?: Error) => void): void;
  close(code?: number, reason?: string): void;
  terminate(): void;
}
type WsConstructor = new (url: string, opts: Record<string, unknown>) => WsSocket;

/** The part of a Node HTTP response the adapter reads for a refused upgrade. */
interface IncomingLike {
  statusCode?: number;
  headers: Record<string, string | string[] | undefined>;
  setEncoding(e: string): void;
  on(event: "data", fn: (chunk: string) => void): void;
  on(event: "end" | "error", fn: () => void): void;
}

/** The standard WebSocket, with the `headers` option of Bun and Deno. */
interface GlobalSocket {
  readyState: number;
  binaryType: string;
  onopen: (() => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  send(data: string): void;
  close(code?: number, reason?: string): void;
}
type GlobalConstructor = new (url: string, opts: { headers: Record<string, string> } | string[]) => GlobalSocket;

/** The subprotocol of the API's WebSockets, which the daemon answers. */
export const wsProtocol = "airlock.v1";
/** Prefixes the key among a browser's subprotocols. */
export const wsBearer = "airlock.bearer.";

/** isBrowserLike says whether the global WebSocket is the standard one, without a headers option. */
function isBrowserLike(): boolean {
  return !isNode() && !("Bun" in globalThis) && !("Deno" in globalThis);
}

/**
 * browserProtocols are the subprotocols that carry the Authorization header's bearer key where a
 * WebSocket cannot send headers: `airlock.v1` (answered) and `airlock.bearer.<key>` (never echoed).
 */
export function browserProtocols(headers: Record<string, string>): string[] {
  const key = /^Bearer (.+)$/.exec(headers["Authorization"] ?? "")?.[1];
  return key ? [wsProtocol, wsBearer + key] : [wsProtocol];
}

let wsModule: Promise<WsConstructor | undefined> | undefined;

/** loadWs imports the `ws` package once; undefined where it cannot be loaded. */
function loadWs(): Promise<WsConstructor | undefined> {
  wsModule ??= import("ws").then(
    (m: { default?: unknown; WebSocket?: unknown }) => (m.WebSocket ?? m.default) as WsConstructor,
    () => undefined,
  );
  return wsModule;
}

/**
 * openSocket connects to a WebSocket URL with headers. A refused upgrade is the AirlockError of
 * the daemon's answer (with `ws`); a connection that cannot be made is an AirlockConnectionError.
 * Aborting the signal closes the socket.
 */
export async function openSocket(url: string, headers: Record<string, string>, handlers: SocketHandlers, signal?: AbortSignal): Promise<Socket> {
  signal?.throwIfAborted();
  let sock: Socket | undefined;
  const onAbort = () => sock?.close(1000, "aborted");
  const h: SocketHandlers = {
    message: handlers.message,
    close(code, reason) {
      signal?.removeEventListener("abort", onAbort);
      handlers.close(code, reason);
    },
  };
  const Ws = isNode() || !("WebSocket" in globalThis) ? await loadWs() : undefined;
  sock = Ws ? await openWs(Ws, url, headers, h) : await openGlobal(url, headers, h);
  if (signal?.aborted) sock.close(1000, "aborted");
  else signal?.addEventListener("abort", onAbort, { once: true });
  return sock;
}

function openWs(Ws: WsConstructor, url: string, headers: Record<string, string>, handlers: SocketHandlers): Promise<Socket> {
  const ws = new Ws(url, { headers, maxPayload: maxMessage, perMessageDeflate: false });
  return new Promise((resolve, reject) => {
    let opened = false;
    ws.once("unexpected-response", (req, res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c) => (body += c));
      const done = () => {
        req.destroy();
        const retry = res.headers["retry-after"];
        reject(errorFromBody(res.statusCode ?? 0, body, Array.isArray(retry) ? retry[0] : retry));
      };
      res.on("end", done);
      res.on("error", done);
    });
    ws.on("error", (err) => {
      if (!opened) reject(new AirlockConnectionError(`airlock: WebSocket ${url}: ${err.message}`, { cause: err }));
      // After the open, a broken connection shows as its close (1006).
    });
    ws.once("open", () => {
      opened = true;
      ws.on("message", (data) => handlers.message(Array.isArray(data) ? Buffer.concat(data).toString("utf8") : Buffer.from(data as ArrayBuffer).toString("utf8")));
      ws.on("close", (code, reason) => handlers.close(code, reason.toString("utf8")));
      resolve({
        send: (text) => new Promise((ok, fail) => ws.send(text, (err) => (err ? fail(new AirlockConnectionError(`airlock: WebSocket send: ${err.message}`, { cause: err })) : ok()))),
        close: (code = 1000, reason = "") => ws.close(code, reason),
      });
    });
  });
}

function openGlobal(url: string, headers: Record<string, string>, handlers: SocketHandlers): Promise<Socket> {
  const G = (globalThis as { WebSocket?: GlobalConstructor }).WebSocket;
  if (!G) {
    return Promise.reject(new AirlockConnectionError("airlock: no WebSocket: install the ws package (npm install ws)"));
  }
  const ws = isBrowserLike() ? new G(url, browserProtocols(headers)) : new G(url, { headers });
  ws.binaryType = "arraybuffer";
  return new Promise((resolve, reject) => {
    // The standard API says nothing of a refused upgrade's answer: only that it failed.
    ws.onerror = (ev) => reject(new AirlockConnectionError(`airlock: WebSocket ${url}: the connection failed (a refused upgrade, or no daemon)`, { cause: ev }));
    ws.onopen = () => {
      ws.onclose = (ev) => handlers.close(ev.code, ev.reason);
      ws.onmessage = (ev) => handlers.message(typeof ev.data === "string" ? ev.data : new TextDecoder().decode(ev.data as ArrayBuffer));
      resolve({
        send: async (text) => ws.send(text),
        close: (code = 1000, reason = "") => ws.close(code, reason),
      });
    };
  });
}
