"""Seed 002's surface under client.compat: create → run print(6*7) → 42 → an async run
polled → delete (204) → get says destroyed."""

from __future__ import annotations

import asyncio
import time
import unittest

import harness

import airlock


class Compat(unittest.TestCase):
    def test_seed_002_flow(self) -> None:
        c = harness.client()
        sb = c.compat.create(agent_id="data-processor", config={
            "filesystem": {"read_write": ["/workspace/output"], "blocked": ["/root"]},
            "network": {"block_outbound": True},
            "resources": {"cpu": "0.5", "memory": "512m", "timeout": 300},
        })
        self.addCleanup(c.compat.delete, sb.sandbox_id)
        self.assertTrue(sb.sandbox_id.startswith("sbx_"))
        self.assertEqual(sb.status, "ready")
        self.assertTrue(sb.created_at.endswith("Z") and sb.expires_at.endswith("Z"))

        run = c.compat.run(sb.sandbox_id, "print(6*7)")
        self.assertEqual(run.status, "done")
        self.assertEqual(run.result.stdout, "42\n")
        self.assertEqual(run.result.exit_code, 0)
        self.assertTrue(run.run_id)

        pending = c.compat.run(sb.sandbox_id, "import time; time.sleep(0.5); print('later')", timeout=30, async_=True)
        self.assertEqual(pending.status, "running")
        deadline = time.monotonic() + 30
        polled = c.compat.get_run(sb.sandbox_id, pending.run_id)
        while polled.status == "running" and time.monotonic() < deadline:
            time.sleep(0.1)
            polled = c.compat.get_run(sb.sandbox_id, pending.run_id)
        self.assertEqual((polled.status, polled.result.stdout), ("done", "later\n"))

        self.assertIn(c.compat.get(sb.sandbox_id).status, ("ready", "running"))
        self.assertIsNone(c.compat.delete(sb.sandbox_id))
        gone = c.compat.get(sb.sandbox_id)
        self.assertEqual(gone.status, "destroyed")
        self.assertIsNone(c.compat.delete(sb.sandbox_id))  # again: 204 too

    def test_errors_without_the_envelope(self) -> None:
        c = harness.client()
        with self.assertRaises(airlock.NotFoundError):
            c.compat.get("sbx_00000000000000000000")
        with self.assertRaises(airlock.InvalidArgumentError) as cm:
            c.compat.create(config={"resources": {"memory": "lots"}})
        self.assertEqual(cm.exception.field, "config.resources.memory")

    def test_async(self) -> None:
        async def go() -> None:
            async with harness.async_client() as ac:
                sb = await ac.compat.create()
                try:
                    run = await ac.compat.run(sb.sandbox_id, "print(6*7)")
                    self.assertEqual(run.result.stdout, "42\n")
                finally:
                    self.assertIsNone(await ac.compat.delete(sb.sandbox_id))

        asyncio.run(go())
