// client.sandboxes: the lifecycle, exec, logs, the agent, and what a sandbox records.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { LogEntry } from "@airlock/sdk";
import { eventually, type Daemon } from "./harness.js";

export function sandboxesSuite(d: () => Daemon): void {
  describe("sandboxes", () => {
    it("creates with wait (ready) or without (provisioning), lists with filters, pauses and resumes", async () => {
      const c = d().client();
      const tag = `list-${Date.now()}`;
      const ready = await c.sandboxes.create({ name: "a", metadata: { suite: tag, kind: "ready" }, resources: { cpu: 0.5, memoryMb: 256 } });
      assert.equal(ready.status, "ready");
      assert.equal(ready.resources.cpu, "0.5", "cpu as a number is answered as seed 000's string");
      assert.match(ready.endpoints.exec ?? "", /^ws:\/\/127\.0\.0\.1:\d+\/api\/v1\/sandboxes\/sbx_\w+\/exec$/);
      // The handle is the plain sandbox: JSON and a spread show its fields only.
      assert.deepEqual({ ...ready }, JSON.parse(JSON.stringify(ready)));
      assert.equal(typeof ready[Symbol.asyncDispose], "function");
      assert.equal(Object.getOwnPropertyDescriptor(ready, Symbol.asyncDispose)?.enumerable, false);

      const later = await c.sandboxes.create({ name: "b", metadata: { suite: tag, kind: "later" } }, { wait: false });
      assert.equal(later.status, "provisioning");
      await eventually(async () => assert.equal((await c.sandboxes.get(later.id)).status, "ready"));

      const mine = await c.sandboxes.list({ metadata: { suite: tag } });
      assert.deepEqual(mine.map((s) => s.id), [later.id, ready.id], "newest first");
      const byKind = await c.sandboxes.list({ metadata: { suite: tag, kind: "later" } });
      assert.deepEqual(byKind.map((s) => s.id), [later.id]);

      const paused = await c.sandboxes.pause(ready.id);
      assert.equal(paused.status, "paused");
      const pausedList = await c.sandboxes.list({ status: ["paused"], metadata: { suite: tag } });
      assert.deepEqual(pausedList.map((s) => s.id), [ready.id]);
      assert.equal((await c.sandboxes.resume(ready.id)).status, "running");

      for (const sb of [ready, later]) assert.equal((await c.sandboxes.terminate(sb.id)).status, "terminated");
      const gone = await c.sandboxes.list({ status: "terminated", metadata: { suite: tag } });
      assert.equal(gone.length, 2);
    });

    it("execs a shell line or an argv, and records the execution", async () => {
      const c = d().client();
      await using sb = await c.sandboxes.create({ resources: { memoryMb: 256 } });
      const r = await c.sandboxes.exec(sb.id, { command: "echo out; echo err >&2; exit 3", timeout: 10 });
      assert.equal(r.exitCode, 3);
      assert.equal(r.stdout, "out\n");
      assert.equal(r.stderr, "err\n");
      assert.equal(r.timedOut, false);
      assert.match(r.executionId, /^exec_/);
      assert.equal(typeof r.resourceUsage.peakMemoryMb, "number");

      const argv = await c.sandboxes.exec(sb.id, { command: ["printf", "%s|", "a b", "$HOME"], env: { X: "1" } });
      assert.equal(argv.stdout, "a b|$HOME|", "an argv is not a shell line");
      const stdin = await c.sandboxes.exec(sb.id, { command: "tr a-z A-Z", stdin: "shout" });
      assert.equal(stdin.stdout, "SHOUT");
      const timed = await c.sandboxes.exec(sb.id, { command: "sleep 5", timeout: 0.5 });
      assert.equal(timed.timedOut, true);
      assert.equal(timed.exitCode, 124);

      const execs = await c.sandboxes.execs(sb.id);
      assert.ok(execs.some((x) => x.id === r.executionId && x.status === "done"));
      const one = await c.sandboxes.execution(sb.id, r.executionId);
      assert.equal(one.result?.exitCode, 3);
      assert.deepEqual(one.command, ["/bin/sh", "-c", "echo out; echo err >&2; exit 3"]);

      const m = await c.sandboxes.metrics(sb.id);
      assert.equal(m.sandboxId, sb.id);
      assert.ok(Array.isArray(m.recent));
      const replay = await c.sandboxes.replay(sb.id);
      assert.equal(replay.sandbox.id, sb.id);
      assert.ok(replay.entries.some((e) => e.type === "exec.exited" && e.exec?.id === r.executionId));
    });

    it("reads logs whole, from a seq, and followed until the agent's end", async () => {
      const c = d().client();
      await using sb = await c.sandboxes.create({ agentId: "echo" });
      assert.equal((await c.sandboxes.start(sb.id)).status, "running");
      const sent = await c.sandboxes.agentStdin(sb.id, "hello agent\n");
      assert.deepEqual(sent, { bytes: 12, eof: false });
      assert.deepEqual(await c.sandboxes.agentStdin(sb.id, new TextEncoder().encode("bye\n"), { eof: true }), { bytes: 4, eof: true });

      const followed: LogEntry[] = [];
      for await (const e of c.sandboxes.logs(sb.id, { follow: true })) followed.push(e);
      const out = followed.filter((e) => e.stream === "stdout").map((e) => e.data).join("");
      assert.equal(out, "hello agent\nbye\n");
      assert.deepEqual(followed.map((e) => e.seq), followed.map((_, i) => i + 1), "every entry once, in order");
      assert.equal((await c.sandboxes.get(sb.id)).status, "completed");

      const whole: LogEntry[] = [];
      for await (const e of c.sandboxes.logs(sb.id)) whole.push(e);
      assert.deepEqual(whole.map((e) => e.seq), followed.map((e) => e.seq));
      const tail: number[] = [];
      for await (const e of c.sandboxes.logs(sb.id, { since: 3 })) tail.push(e.seq);
      assert.deepEqual(tail, followed.slice(3).map((e) => e.seq));
      assert.equal(whole[0]?.message, whole[0]?.event?.message, "seed 000's message is the event's");
      assert.equal(whole[0]?.timestamp, whole[0]?.time);
    });

    it("leaves a followed log early and closes its connection", async () => {
      const c = d().client();
      await using sb = await c.sandboxes.create({});
      await c.sandboxes.exec(sb.id, { command: "echo one" });
      let n = 0;
      for await (const e of c.sandboxes.logs(sb.id, { follow: true })) {
        n++;
        if (e.stream === "stdout") break;
      }
      assert.ok(n > 0);
      const ctl = new AbortController();
      const seen: number[] = [];
      setTimeout(() => ctl.abort(new Error("enough")), 300);
      await assert.rejects(
        (async () => {
          for await (const e of c.sandboxes.logs(sb.id, { follow: true, signal: ctl.signal })) seen.push(e.seq);
        })(),
        { message: "enough" },
      );
      assert.ok(seen.length > 0, "the entries before the abort came");
    });
  });
}
