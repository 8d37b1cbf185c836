// client.snapshots: snapshot → change → restore, fork, create from a snapshot, delete.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Daemon } from "./harness.js";

export function snapshotsSuite(d: () => Daemon): void {
  describe("snapshots", () => {
    it("snapshot → change → restore puts the files back, with seed 000's answer", async () => {
      const c = d().client();
      await using sb = await c.sandboxes.create({ name: "snap" });
      await c.sandboxes.files.write(sb.id, "/workspace/state.txt", "before");
      const snap = await c.snapshots.create(sb.id, { name: "pre-adversarial-test", description: "Baseline state" });
      assert.match(snap.snapshotId, /^snap_/);
      assert.equal(snap.sandboxId, sb.id);
      assert.equal(snap.name, "pre-adversarial-test");
      assert.equal(snap.description, "Baseline state");
      assert.equal(typeof snap.sizeMb, "number");

      await c.sandboxes.exec(sb.id, { command: "echo after > /workspace/state.txt; touch /workspace/new" });
      const restored = await c.snapshots.restore(sb.id, snap.snapshotId);
      assert.equal(restored.id, sb.id);
      assert.equal(restored.state, "ready");
      assert.equal(restored.restoredFrom, snap.snapshotId);
      assert.ok(!Number.isNaN(Date.parse(restored.restoredAt)));
      assert.equal(await c.sandboxes.files.readText(sb.id, "/workspace/state.txt"), "before");
      await assert.rejects(c.sandboxes.files.stat(sb.id, "/workspace/new"), { status: 404 });

      assert.deepEqual((await c.snapshots.list(sb.id)).map((s) => s.snapshotId), [snap.snapshotId]);
      assert.ok((await c.snapshots.list()).some((s) => s.snapshotId === snap.snapshotId));
      assert.equal((await c.snapshots.get(snap.snapshotId)).name, "pre-adversarial-test");

      // A new sandbox from the snapshot has its files.
      await using copy = await c.sandboxes.create({ fromSnapshot: snap.snapshotId });
      assert.equal(copy.fromSnapshot, snap.snapshotId);
      assert.equal(await c.sandboxes.files.readText(copy.id, "/workspace/state.txt"), "before");

      assert.equal((await c.snapshots.delete(snap.snapshotId)).snapshotId, snap.snapshotId);
      await assert.rejects(c.snapshots.get(snap.snapshotId), { status: 404 });
    });

    it("forks a sandbox into several with its state", async () => {
      const c = d().client();
      await using sb = await c.sandboxes.create({ name: "parent" });
      await c.sandboxes.files.write(sb.id, "/workspace/seed.txt", "shared");
      const fork = await c.snapshots.fork(sb.id, { count: 2, name: "child" });
      try {
        assert.equal(fork.snapshot.sandboxId, sb.id);
        assert.deepEqual(fork.sandboxes.map((s) => s.name), ["child-1", "child-2"]);
        for (const child of fork.sandboxes) {
          assert.notEqual(child.id, sb.id);
          assert.equal(await c.sandboxes.files.readText(child.id, "/workspace/seed.txt"), "shared");
        }
        // The children are independent.
        await c.sandboxes.files.write(fork.sandboxes[0]!.id, "/workspace/seed.txt", "changed");
        assert.equal(await c.sandboxes.files.readText(fork.sandboxes[1]!.id, "/workspace/seed.txt"), "shared");
      } finally {
        for (const child of fork.sandboxes) await c.sandboxes.terminate(child.id);
        await c.snapshots.delete(fork.snapshot.snapshotId);
      }
    });
  });
}
