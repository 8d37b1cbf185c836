// Seed 002's surface under client.compat: bare snake_case objects.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { AirlockError } from "@airlock/sdk";
import { eventually, type Daemon } from "./harness.js";

export function compatSuite(d: () => Daemon): void {
  describe("compat (seed 002)", () => {
    it("create → run print(6*7) → 42 → async run polled → delete 204 → get says destroyed", async () => {
      const c = d().client();
      const sb = await c.compat.create({
        agent_id: "data-processor",
        mode: "container",
        config: { resources: { cpu: "0.5", memory: "512m", timeout: 30 } },
      });
      assert.match(sb.sandbox_id, /^sbx_/);
      assert.equal(sb.status, "ready");
      assert.equal(sb.mode, "container");
      assert.equal(Date.parse(sb.expires_at) - Date.parse(sb.created_at), 30_000);
      assert.deepEqual(Object.keys(sb).sort(), ["created_at", "expires_at", "mode", "sandbox_id", "status"]);

      const run = await c.compat.run(sb.sandbox_id, { code: "print(6*7)" });
      assert.equal(run.status, "done");
      assert.equal(run.result?.exit_code, 0);
      assert.equal(run.result?.stdout, "42\n");
      assert.equal(run.result?.timed_out, false);

      const started = await c.compat.run(sb.sandbox_id, { code: "import time; time.sleep(0.5); print('later')", async: true });
      assert.equal(started.status, "running");
      const polled = await eventually(async () => {
        const r = await c.compat.getRun(sb.sandbox_id, started.run_id);
        assert.equal(r.status, "done");
        return r;
      });
      assert.equal(polled.run_id, started.run_id);
      assert.equal(polled.result?.stdout, "later\n");

      assert.equal(await c.compat.delete(sb.sandbox_id), undefined);
      const gone = await c.compat.get(sb.sandbox_id);
      assert.equal(gone.status, "destroyed");
      assert.equal(gone.sandbox_id, sb.sandbox_id);
    });

    it("answers errors as AirlockError with the surface's field names", async () => {
      const c = d().client();
      await assert.rejects(c.compat.create({ mode: "bogus" as "wasm" }), (e: unknown) => {
        assert.ok(e instanceof AirlockError);
        assert.equal(e.status, 400);
        assert.equal(e.code, "invalid_argument");
        assert.equal(e.field, "mode");
        return true;
      });
      await assert.rejects(c.compat.get("sbx_nope"), { name: "AirlockError", status: 404, code: "not_found" });
    });
  });
}
