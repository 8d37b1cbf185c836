// Streaming exec over the WebSocket: stdin, stdout/stderr chunks, signals, a PTY with resize.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { AirlockError, type AirlockClient, type OutputChunk, type SandboxHandle } from "@airlock/sdk";
import { text, type Daemon } from "./harness.js";

/** collect reads an async iterable of chunks into one string. */
async function collect(it: AsyncIterable<Uint8Array>): Promise<string> {
  let s = "";
  for await (const c of it) s += text(c);
  return s;
}

export function execSuite(d: () => Daemon): void {
  describe("execStream", () => {
    let c: AirlockClient;
    let sb: SandboxHandle;
    before(async () => {
      c = d().client();
      sb = await c.sandboxes.create({ name: "exec-stream" });
    });
    after(async () => {
      await sb?.[Symbol.asyncDispose]();
    });

    it("streams stdin in and stdout and stderr out, then the result", async () => {
      await using s = await c.sandboxes.execStream(sb.id, { command: ["sh", "-c", "while read l; do echo \"out:$l\"; echo \"err:$l\" >&2; done; exit 7"] });
      assert.match(s.executionId, /^exec_/);
      const out = collect(s.stdout);
      const err = collect(s.stderr);
      await s.write("one\n");
      await s.write(new TextEncoder().encode("two\n"));
      await s.closeStdin();
      const res = await s.wait();
      assert.equal(await out, "out:one\nout:two\n");
      assert.equal(await err, "err:one\nerr:two\n");
      assert.equal(res.exitCode, 7);
      assert.equal(res.executionId, s.executionId);
      assert.equal(res.stdout, "out:one\nout:two\n", "the exit frame's result has the captured output");
      const rec = await c.sandboxes.execution(sb.id, s.executionId);
      assert.equal(rec.result?.exitCode, 7);
    });

    it("sends the stdin option whole, then closes it; output interleaves in order", async () => {
      const big = "x".repeat(100_000) + "\n";
      const s = await c.sandboxes.execStream(sb.id, { command: "wc -c; echo done >&2", stdin: big });
      const chunks: OutputChunk[] = [];
      for await (const ch of s.output) chunks.push(ch);
      const res = await s.wait();
      assert.equal(res.exitCode, 0);
      assert.equal(chunks.filter((ch) => ch.stream === "stdout").map((ch) => text(ch.data)).join(""), "100001\n");
      assert.equal(chunks.filter((ch) => ch.stream === "stderr").map((ch) => text(ch.data)).join(""), "done\n");
      assert.throws(() => s.stdout, /either output or stdout/);
    });

    it("signals the command", async () => {
      const s = await c.sandboxes.execStream(sb.id, { command: "echo ready; exec sleep 30" });
      const it = s.stdout[Symbol.asyncIterator]();
      assert.equal(text((await it.next()).value as Uint8Array), "ready\n");
      await s.signal("SIGTERM");
      const res = await s.wait();
      assert.equal(res.exitCode, 128 + 15);
      assert.ok(res.durationMs < 10_000);
    });

    it("runs a PTY session and resizes its terminal", async () => {
      const s = await c.sandboxes.execStream(sb.id, { command: "stty size; read a; stty size; read b; tty", tty: true, rows: 24, cols: 80 });
      const out: string[] = [];
      const reading = (async () => {
        for await (const ch of s.stdout) out.push(text(ch));
      })();
      const seen = async (want: string) => {
        for (let i = 0; i < 100 && !out.join("").includes(want); i++) await new Promise((r) => setTimeout(r, 50));
        assert.ok(out.join("").includes(want), `${JSON.stringify(want)} in ${JSON.stringify(out.join(""))}`);
      };
      await seen("24 80\r\n");
      await s.resize(50, 132);
      await s.write("\n");
      await seen("50 132\r\n");
      await s.write("\n");
      const res = await s.wait();
      await reading;
      assert.equal(res.exitCode, 0);
      assert.match(out.join(""), /\/dev\/pts\/\d+/, "stdin is a terminal");
    });

    it("an error frame rejects with the daemon's AirlockError", async () => {
      const ended = await c.sandboxes.create({});
      await c.sandboxes.terminate(ended.id);
      await assert.rejects(c.sandboxes.execStream(ended.id, { command: "true" }), (e: unknown) => {
        assert.ok(e instanceof AirlockError);
        assert.equal(e.code, "conflict");
        assert.equal(e.status, 409);
        assert.equal(e.sandboxStatus, "terminated");
        return true;
      });
    });

    it("takes the key as a browser sends it: the airlock.bearer.<key> subprotocol, airlock.v1 answered", async () => {
      const { WebSocket } = await import("ws");
      const url = `${d().url.replace(/^http/, "ws")}/api/v1/sandboxes/${sb.id}/exec`;
      const ws = new WebSocket(url, ["airlock.v1", `airlock.bearer.${d().keys.t1}`], { origin: d().url });
      const frames: { type: string; data?: string }[] = [];
      await new Promise<void>((resolve, reject) => {
        ws.once("error", reject);
        ws.once("open", () => ws.send(JSON.stringify({ type: "start", start: { command: ["echo", "hi"] } })));
        ws.on("message", (m) => frames.push(JSON.parse(String(m)) as { type: string }));
        ws.once("close", () => resolve());
      });
      assert.equal(ws.protocol, "airlock.v1");
      assert.deepEqual(frames.map((f) => f.type), ["started", "stdout", "exit"]);
      assert.equal(Buffer.from(frames[1]?.data ?? "", "base64").toString(), "hi\n");
      // From a page of another origin the key is refused, unread.
      const foreign = new WebSocket(url, ["airlock.v1", `airlock.bearer.${d().keys.t1}`], { origin: "http://evil.example" });
      const status = await new Promise<number>((resolve) => {
        foreign.once("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
        foreign.once("open", () => resolve(101));
        foreign.once("error", () => {});
      });
      foreign.terminate();
      assert.equal(status, 403);
    });

    it("close() drops the connection and ends the command", async () => {
      const s = await c.sandboxes.execStream(sb.id, { command: "sleep 30" });
      const id = s.executionId;
      s.close();
      await assert.rejects(s.wait(), { name: "AirlockConnectionError" });
      const rec = await (async () => {
        for (let i = 0; i < 100; i++) {
          const x = await c.sandboxes.execution(sb.id, id);
          if (x.status !== "running") return x;
          await new Promise((r) => setTimeout(r, 100));
        }
        throw new Error("the command still runs");
      })();
      assert.notEqual(rec.result?.exitCode, 0);
    });
  });
}
