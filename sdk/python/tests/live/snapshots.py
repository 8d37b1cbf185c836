"""Snapshots: snapshot → change → restore, fork, a sandbox from a snapshot, list/get/delete."""

from __future__ import annotations

import unittest

import harness

import airlock


class Snapshots(unittest.TestCase):
    def setUp(self) -> None:
        self.c = harness.client()

    def test_snapshot_change_restore(self) -> None:
        sb = harness.sandbox(self, self.c, name="snap")
        self.c.files.write(sb.id, "/workspace/state.txt", b"before\n")
        snap = self.c.snapshots.create(sb.id, name="pre-change", description="baseline")
        self.addCleanup(self.c.snapshots.delete, snap.snapshot_id)
        self.assertTrue(snap.snapshot_id.startswith("snap_"))
        self.assertEqual((snap.sandbox_id, snap.name, snap.description), (sb.id, "pre-change", "baseline"))

        self.c.files.write(sb.id, "/workspace/state.txt", b"after\n")
        self.c.files.write(sb.id, "/workspace/new.txt", b"new\n")
        restored = self.c.snapshots.restore(sb.id, snap.snapshot_id)
        # Seed 000's answer, beside the sandbox's fields.
        self.assertEqual(restored.id, sb.id)
        self.assertEqual(restored.state, "ready")
        self.assertEqual(restored.restored_from, snap.snapshot_id)
        self.assertTrue(restored.restored_at)
        self.assertEqual(self.c.files.read(sb.id, "/workspace/state.txt"), b"before\n")
        with self.assertRaises(airlock.NotFoundError):
            self.c.files.stat(sb.id, "/workspace/new.txt")

        self.assertEqual([s.snapshot_id for s in self.c.snapshots.list(sb.id)], [snap.snapshot_id])
        self.assertIn(snap.snapshot_id, [s.snapshot_id for s in self.c.snapshots.list()])
        self.assertEqual(self.c.snapshots.get(snap.snapshot_id).name, "pre-change")
        # Another tenant sees none of it.
        with self.assertRaises(airlock.NotFoundError):
            harness.client("t2").snapshots.get(snap.snapshot_id)

    def test_fork_and_create_from_snapshot(self) -> None:
        sb = harness.sandbox(self, self.c, name="origin")
        self.c.files.write(sb.id, "/workspace/seed.txt", b"forked state\n")
        fork = self.c.snapshots.fork(sb.id, count=2, name="child")
        for child in fork.sandboxes:
            self.addCleanup(self.c.sandboxes.terminate, child.id, missing_ok=True)
        self.addCleanup(self.c.snapshots.delete, fork.snapshot.snapshot_id)
        self.assertEqual(sorted(x.name for x in fork.sandboxes), ["child-1", "child-2"])
        self.assertEqual(fork.snapshot.sandbox_id, sb.id)
        for child in fork.sandboxes:
            self.assertEqual(child.from_snapshot, fork.snapshot.snapshot_id)
            self.assertEqual(self.c.files.read(child.id, "/workspace/seed.txt"), b"forked state\n")
        # A fork's sandboxes terminate themselves too.
        with fork.sandboxes[0] as first:
            pass
        self.assertEqual(self.c.sandboxes.get(first.id).status, "terminated")

        again = harness.sandbox(self, self.c, from_snapshot=fork.snapshot.snapshot_id)
        self.assertEqual(self.c.files.read(again.id, "/workspace/seed.txt"), b"forked state\n")

    def test_delete(self) -> None:
        sb = harness.sandbox(self, self.c)
        snap = self.c.snapshots.create(sb.id)
        gone = self.c.snapshots.delete(snap.snapshot_id)
        self.assertEqual(gone.snapshot_id, snap.snapshot_id)
        with self.assertRaises(airlock.NotFoundError):
            self.c.snapshots.get(snap.snapshot_id)
