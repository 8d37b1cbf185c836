// Events (a page, followed) and the network policy changed live.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Event } from "@airlock/sdk";
import type { Daemon } from "./harness.js";

export function eventsSuite(d: () => Daemon): void {
  describe("events and network", () => {
    it("follows the tenant's events of a sandbox as they are written", async () => {
      const c = d().client();
      await using sb = await c.sandboxes.create({ name: "events" });
      const seen: Event[] = [];
      let exited!: () => void;
      const gotExit = new Promise<void>((r) => (exited = r));
      const following = (async () => {
        for await (const e of c.events.follow({ sandboxId: sb.id, type: "exec." })) {
          seen.push(e);
          if (e.type === "exec.exited") {
            exited();
            break; // closes the stream
          }
        }
      })();
      const r = await c.sandboxes.exec(sb.id, { command: "echo hi" });
      await Promise.race([gotExit, new Promise((_, rej) => setTimeout(() => rej(new Error(`no exec.exited within 10 s: ${JSON.stringify(seen)}`)), 10_000))]);
      await following;
      assert.deepEqual(
        seen.map((e) => [e.type, e.executionId, e.sandboxId]),
        [
          ["exec.started", r.executionId, sb.id],
          ["exec.exited", r.executionId, sb.id],
        ],
      );
      assert.equal((seen[1]?.data as { exitCode?: number }).exitCode, 0);
    });

    it("verifies the audit log's hash chain, with a tenant key and an admin key", async () => {
      const v = await d().client().events.verify();
      assert.equal(v.intact, true);
      assert.ok(v.events > 0 && v.headSeq >= v.fromSeq && /^[0-9a-f]{64}$/.test(v.headHash), JSON.stringify(v));
      assert.equal(v.problem, undefined);
      const fresh = await d().client("admin").events.verify();
      assert.ok(fresh.intact && Date.parse(fresh.checkedAt) >= Date.parse(v.checkedAt), JSON.stringify(fresh));
    });

    it("follows a sandbox's events until it is terminated", async () => {
      const c = d().client();
      const sb = await c.sandboxes.create({});
      const types: string[] = [];
      const following = (async () => {
        for await (const e of c.sandboxes.followEvents(sb.id)) types.push(`${e.type}:${e.message ?? ""}`);
      })();
      await c.sandboxes.exec(sb.id, { command: "true" });
      await c.sandboxes.terminate(sb.id);
      await following; // ends by itself
      assert.ok(types.includes("sandbox.status:ready"), types.join(" "));
      assert.ok(types.includes("exec.exited:exit 0"), types.join(" "));
      assert.ok(types.some((t) => t.startsWith("sandbox.status:terminated")), types.join(" "));
    });

    it("pages events with limit and after, and filters by type and execution", async () => {
      const c = d().client();
      await using sb = await c.sandboxes.create({});
      const r = await c.sandboxes.exec(sb.id, { command: "true" });
      const all = await c.sandboxes.events(sb.id);
      assert.ok(all.events.length >= 4);
      const p1 = await c.sandboxes.events(sb.id, { limit: 2 });
      assert.deepEqual(p1.events.map((e) => e.id), all.events.slice(0, 2).map((e) => e.id));
      const p2 = await c.sandboxes.events(sb.id, { limit: 2, after: p1.next });
      assert.deepEqual(p2.events.map((e) => e.id), all.events.slice(2, 4).map((e) => e.id));
      const byExec = await c.events.list({ sandboxId: sb.id, executionId: r.executionId, type: "exec.exited" });
      assert.deepEqual(byExec.events.map((e) => e.type), ["exec.exited"]);
      const later = await c.sandboxes.events(sb.id, { since: new Date(Date.now() + 60_000) });
      assert.deepEqual(later.events, []);
    });

    it("changes the network policy live", async () => {
      const c = d().client();
      await using sb = await c.sandboxes.create({ network: { egressPolicy: "restricted" } });
      const updated = await c.sandboxes.network.update(sb.id, { egressPolicy: "restricted", allowedDomains: ["example.com", "*.example.org"] });
      assert.equal(updated.id, sb.id);
      assert.deepEqual(updated.network.allowedDomains, ["example.com", "*.example.org"]);
      assert.deepEqual((await c.sandboxes.get(sb.id)).network.allowedDomains, ["example.com", "*.example.org"]);
      const ev = await c.sandboxes.events(sb.id, { type: "network.policy" });
      assert.equal(ev.events.length, 1);
      assert.deepEqual((ev.events[0]?.data as { allowedDomains?: string[] }).allowedDomains, ["example.com", "*.example.org"]);
      // A sandbox made without a network has none to change.
      await using none = await c.sandboxes.create({});
      await assert.rejects(c.sandboxes.network.update(none.id, { egressPolicy: "open" }), { status: 409, code: "conflict" });
    });
  });
}
