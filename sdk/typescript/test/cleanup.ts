// Automatic cleanup: `await using` terminates the sandbox when the block leaves, also on throw.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Daemon } from "./harness.js";

export function cleanupSuite(d: () => Daemon): void {
  describe("await using", () => {
    it("terminates the sandbox when the block leaves", async () => {
      const c = d().client();
      let id = "";
      {
        await using sb = await c.sandboxes.create({ name: "scoped" });
        id = sb.id;
        assert.equal((await c.sandboxes.get(id)).status, "ready");
      }
      assert.equal((await c.sandboxes.get(id)).status, "terminated");
    });

    it("terminates it when the block throws, and the error is the block's", async () => {
      const c = d().client();
      let id = "";
      await assert.rejects(
        (async () => {
          await using sb = await c.sandboxes.create({ name: "scoped-throw" });
          id = sb.id;
          throw new Error("boom");
        })(),
        { message: "boom" },
      );
      assert.notEqual(id, "");
      assert.equal((await c.sandboxes.get(id)).status, "terminated");
    });

    it("does not fail when the sandbox has already ended", async () => {
      const c = d().client();
      let id = "";
      {
        await using sb = await c.sandboxes.create({});
        id = sb.id;
        await c.sandboxes.terminate(sb.id);
      }
      assert.equal((await c.sandboxes.get(id)).status, "terminated");
    });
  });
}
