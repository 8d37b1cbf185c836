// The client's machinery against a fake fetch: requests as sent, errors as decoded, followed
// streams resumed without duplicates. No daemon needed.

import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, it } from "node:test";
import { AirlockClient, AirlockConnectionError, AirlockError } from "@airlock/sdk";

interface Sent {
  url: string;
  method: string;
  headers: Headers;
  body: string | undefined;
}

type Answer = Response | (() => Response);

/** fake returns a client whose fetch records each request and answers from the list in order. */
function fake(answers: Answer[]): { client: AirlockClient; sent: Sent[] } {
  const sent: Sent[] = [];
  const fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    sent.push({ url: String(input), method: init?.method ?? "GET", headers: new Headers(init?.headers), body: typeof init?.body === "string" ? init.body : undefined });
    const a = answers.shift();
    if (!a) throw new TypeError("fetch failed: no answer left");
    return typeof a === "function" ? a() : a;
  };
  return { client: new AirlockClient({ apiKey: "alk_test", baseUrl: "http://daemon.test:7070/", fetch }), sent };
}

const ok = (data: unknown, status = 200) => new Response(JSON.stringify({ ok: true, data }), { status, headers: { "Content-Type": "application/json" } });
const fail = (status: number, error: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify({ ok: false, error }), { status, headers: { "Content-Type": "application/json", ...headers } });

/** sse answers an event stream of these raw chunks; without `end` it drops at their end. */
function sse(chunks: string[]): () => Response {
  return () =>
    new Response(
      new ReadableStream<Uint8Array>({
        start(c) {
          for (const ch of chunks) c.enqueue(new TextEncoder().encode(ch));
          c.close();
        },
      }),
      { headers: { "Content-Type": "text/event-stream" } },
    );
}

const logEvent = (seq: number) => `id: ${seq}\nevent: log\ndata: ${JSON.stringify({ seq, stream: "stdout", data: `line ${seq}\n`, message: `line ${seq}\n` })}\n\n`;

async function drain<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

export function offlineSuite(): void {
  describe("offline: requests", () => {
    it("sends the key, escapes paths and builds queries", async () => {
      const { client, sent } = fake([ok([]), ok({}), ok({}), ok({}), ok({})]);
      await client.sandboxes.list({ status: ["ready", "paused"], agentId: "ag", metadata: { b: "2", a: "1=x" } });
      await client.sandboxes.get("a/b?c");
      await client.images.get("ghcr.io/org/app:v1");
      await client.sandboxes.create({ name: "n", resources: { cpu: "2.0" } }, { wait: false });
      await client.sandboxes.create({});
      assert.equal(sent[0]?.url, "http://daemon.test:7070/api/v1/sandboxes?status=ready&status=paused&agentId=ag&metadata=a%3D1%3Dx&metadata=b%3D2");
      assert.equal(sent[0]?.headers.get("Authorization"), "Bearer alk_test");
      assert.equal(sent[1]?.url, "http://daemon.test:7070/api/v1/sandboxes/a%2Fb%3Fc");
      assert.equal(sent[2]?.url, "http://daemon.test:7070/api/v1/images/ghcr.io/org/app:v1");
      assert.equal(sent[3]?.url, "http://daemon.test:7070/api/v1/sandboxes");
      assert.deepEqual(JSON.parse(sent[3]?.body ?? ""), { name: "n", resources: { cpu: "2.0" } });
      assert.equal(sent[3]?.headers.get("Content-Type"), "application/json");
      assert.equal(sent[4]?.url, "http://daemon.test:7070/api/v1/sandboxes?wait=true");
    });

    it("takes its key and host from the environment, and refuses to start without a key", () => {
      const saved = { token: process.env.AIRLOCK_TOKEN, host: process.env.AIRLOCK_HOST };
      try {
        delete process.env.AIRLOCK_TOKEN;
        delete process.env.AIRLOCK_HOST;
        assert.throws(() => new AirlockClient(), /no API key.*AIRLOCK_TOKEN/);
        process.env.AIRLOCK_TOKEN = "alk_env";
        assert.equal(new AirlockClient().baseUrl, "http://127.0.0.1:7070");
        process.env.AIRLOCK_HOST = "10.0.0.1:8080";
        assert.equal(new AirlockClient().baseUrl, "http://10.0.0.1:8080");
        assert.equal(new AirlockClient({ baseUrl: "https://gw.example.com/airlock/" }).baseUrl, "https://gw.example.com/airlock");
        assert.throws(() => new AirlockClient({ baseUrl: "ftp://x" }), TypeError);
      } finally {
        for (const [k, v] of [["AIRLOCK_TOKEN", saved.token], ["AIRLOCK_HOST", saved.host]] as const) {
          if (v === undefined) delete process.env[k];
          else process.env[k] = v;
        }
      }
    });
  });

  describe("offline: errors", () => {
    it("decodes the envelope, the compatibility surface's bare error, and answers without either", async () => {
      const { client } = fake([
        fail(409, { code: "conflict", message: "sandbox s is paused: cannot exec", status: "paused" }),
        fail(429, { code: "quota_exceeded", message: "slow down" }, { "Retry-After": "3" }),
        new Response(JSON.stringify({ error: { code: "invalid_argument", message: "bad", field: "config.resources.memory" } }), { status: 400 }),
        new Response("<html>bad gateway</html>", { status: 502 }),
        fail(501, { code: "not_implemented", message: "the front API serves no pools" }),
        new Response("", { status: 501 }),
      ]);
      await assert.rejects(client.sandboxes.exec("s", { command: "true" }), (e: unknown) => {
        assert.ok(e instanceof AirlockError);
        assert.deepEqual([e.status, e.code, e.sandboxStatus, e.message], [409, "conflict", "paused", "sandbox s is paused: cannot exec"]);
        return true;
      });
      await assert.rejects(client.sandboxes.list(), { status: 429, code: "quota_exceeded", retryAfter: 3 });
      await assert.rejects(client.compat.create({}), { status: 400, code: "invalid_argument", field: "config.resources.memory" });
      await assert.rejects(client.health(), { name: "AirlockError", status: 502, code: "unavailable", message: "<html>bad gateway</html>" });
      await assert.rejects(client.pools.list(), { status: 501, code: "not_implemented" });
      await assert.rejects(client.health(), { status: 501, code: "not_implemented" });
    });

    it("a transport failure is an AirlockConnectionError; an abort is the signal's reason", async () => {
      const { client } = fake([]);
      await assert.rejects(client.health(), (e: unknown) => e instanceof AirlockConnectionError && !(e instanceof AirlockError));
      const never = new AirlockClient({
        apiKey: "k",
        fetch: (_i, init) =>
          new Promise((_, reject) => {
            if (init?.signal?.aborted) reject(init.signal.reason);
            init?.signal?.addEventListener("abort", () => reject(init.signal?.reason));
          }),
      });
      const ctl = new AbortController();
      const p = never.sandboxes.get("s", { signal: ctl.signal });
      setTimeout(() => ctl.abort(new Error("stop")), 10);
      await assert.rejects(p, { message: "stop" });
    });
  });

  describe("offline: kept-alive connections (node:http)", () => {
    // A server that answers a connection's first request and drops it at its second, as a daemon
    // closing an idle connection while a request goes out on it.
    async function dropping(): Promise<{ url: string; seen: string[]; close(): Promise<void> }> {
      const seen: string[] = [];
      const server = createServer((req, res) => {
        seen.push(`${req.method} ${req.url}`);
        const n = (perSocket.get(req.socket) ?? 0) + 1;
        perSocket.set(req.socket, n);
        if (n > 1) {
          req.socket.destroy();
          return;
        }
        res.setHeader("Content-Type", "application/json");
        res.end(JSON.stringify({ ok: true, data: { id: "sbx_1", status: "ready", exitCode: 0 } }));
      });
      const perSocket = new WeakMap<object, number>();
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      const { port } = server.address() as AddressInfo;
      return { url: `http://127.0.0.1:${port}`, seen, close: () => new Promise((r) => server.close(() => r())) };
    }

    it("sends a GET again on a new connection when the kept-alive one was dropped", async () => {
      const srv = await dropping();
      try {
        const client = new AirlockClient({ apiKey: "alk_test", baseUrl: srv.url });
        await client.sandboxes.get("sbx_1");
        assert.equal((await client.sandboxes.get("sbx_1")).id, "sbx_1");
        assert.deepEqual(srv.seen, ["GET /api/v1/sandboxes/sbx_1", "GET /api/v1/sandboxes/sbx_1", "GET /api/v1/sandboxes/sbx_1"]);
      } finally {
        await srv.close();
      }
    });

    it("never sends a POST twice: an exec the daemon may have run is a connection error", async () => {
      const srv = await dropping();
      try {
        const client = new AirlockClient({ apiKey: "alk_test", baseUrl: srv.url });
        await client.sandboxes.get("sbx_1");
        await assert.rejects(client.sandboxes.exec("sbx_1", { command: ["true"] }), AirlockConnectionError);
        assert.deepEqual(srv.seen, ["GET /api/v1/sandboxes/sbx_1", "POST /api/v1/sandboxes/sbx_1/exec"]);
      } finally {
        await srv.close();
      }
    });
  });

  describe("offline: followed streams", () => {
    it("parses SSE split anywhere, with CRLF, comments and multi-line data", async () => {
      const raw = `: airlock logs\r\n\r\n${logEvent(1)}: keep-alive\n\nid: 2\nevent: log\ndata: {"seq":2,\ndata: "message":"two"}\n\nevent: end\ndata: \n\n`;
      const { client } = fake([sse(raw.split(""))]);
      const got = await drain(client.sandboxes.logs("s", { follow: true }));
      assert.deepEqual(got.map((e) => [e.seq, e.message]), [[1, "line 1\n"], [2, "two"]]);
    });

    it("resumes a dropped log stream after the last entry, without duplicates", async () => {
      const { client, sent } = fake([sse([logEvent(1), logEvent(2)]), sse([logEvent(2), logEvent(3), "event: end\ndata:\n\n"])]);
      const got = await drain(client.sandboxes.logs("s", { follow: true }));
      assert.deepEqual(got.map((e) => e.seq), [1, 2, 3]);
      assert.equal(sent.length, 2);
      assert.match(sent[0]!.url, /\/logs\?follow=true$/);
      assert.match(sent[1]!.url, /\/logs\?since=2&follow=true$/);
      assert.equal(sent[1]!.headers.get("Accept"), "text/event-stream");
    });

    it("resumes a dropped event stream with Last-Event-ID", async () => {
      const ev = (seq: number) => `id: ${seq}\nevent: event\ndata: ${JSON.stringify({ id: `evt_${seq}`, seq, type: "exec.started", time: "", sandboxId: "s" })}\n\n`;
      const { client, sent } = fake([sse([ev(7)]), () => new Response(null, { status: 200, headers: { "Content-Type": "text/event-stream" } }), sse([ev(8), "event: end\ndata:\n\n"])]);
      const got = await drain(client.events.follow({ sandboxId: "s", after: 6 }));
      assert.deepEqual(got.map((e) => e.seq), [7, 8]);
      assert.equal(sent[0]?.headers.get("Last-Event-ID"), "6");
      assert.equal(sent[1]?.headers.get("Last-Event-ID"), "7");
      assert.equal(sent[2]?.headers.get("Last-Event-ID"), "7");
      assert.match(sent[0]!.url, /\/api\/v1\/events\?sandboxId=s&after=6&follow=true$/);
    });

    it("does not retry a refusal, and gives up on a stream that keeps dropping", async () => {
      const refused = fake([fail(404, { code: "not_found", message: "sandbox s: not found" })]);
      await assert.rejects(drain(refused.client.sandboxes.logs("s", { follow: true })), { name: "AirlockError", status: 404 });
      assert.equal(refused.sent.length, 1);

      const empty = () => new Response(null, { headers: { "Content-Type": "text/event-stream" } });
      const flaky = fake([empty, empty, empty, empty, empty, empty, empty]);
      await assert.rejects(drain(flaky.client.sandboxes.logs("s", { follow: true })), AirlockConnectionError);
      assert.equal(flaky.sent.length, 6, "the first connection and 5 reconnections");
    });

    it("reads a non-following answer as a page", async () => {
      const { client } = fake([ok([{ seq: 1, message: "a" }, { seq: 2, message: "b" }])]);
      assert.deepEqual((await drain(client.sandboxes.logs("s"))).map((e) => e.message), ["a", "b"]);
    });
  });
}
