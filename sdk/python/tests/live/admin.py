"""The daemon-wide routes: pools (admin key; 403 for a tenant's), images, volumes,
templates, tenants, webhooks, capabilities, health, the API document, Prometheus."""

from __future__ import annotations

import asyncio
import json
import unittest

import harness

import airlock


def _delete_pool(c: airlock.Client, name: str) -> None:
    try:
        c.pools.delete(name)
    except airlock.NotFoundError:
        pass


class Admin(unittest.TestCase):
    def test_pools(self) -> None:
        admin = harness.client("admin")
        tenant = harness.client()
        with self.assertRaises(airlock.ForbiddenError) as cm:
            tenant.pools.put("sdk-py-pool", size=1, spec={"resources": {"memory_mb": 256}})
        self.assertEqual(cm.exception.status, 403)

        put = admin.pools.put("sdk-py-pool", size=1, spec={"isolation": "process", "resources": {"memory_mb": 256}})
        self.addCleanup(_delete_pool, admin, "sdk-py-pool")
        self.assertEqual((put.name, put.size, put.source), ("sdk-py-pool", 1, "api"))
        self.assertIn("sdk-py-pool", [p.name for p in admin.pools.list()])
        self.assertIn("sdk-py-pool", [p.name for p in tenant.pools.list()])  # every key lists them
        self.assertEqual(tenant.pools.get("sdk-py-pool").spec.resources.memory_mb, 256)
        with self.assertRaises(airlock.InvalidArgumentError) as cm:
            admin.pools.put("sdk-py-bad", {"size": 1, "spec": {"environment": {"A": "b"}}})
        self.assertEqual(cm.exception.field, "spec.environment")
        gone = admin.pools.delete("sdk-py-pool")
        self.assertEqual(gone.name, "sdk-py-pool")
        with self.assertRaises(airlock.NotFoundError):
            admin.pools.get("sdk-py-pool")

    def test_images_and_what_the_operator_lends(self) -> None:
        admin = harness.client("admin")
        tenant = harness.client()
        self.assertIsInstance(tenant.images.list(), list)
        with self.assertRaises(airlock.NotFoundError):
            tenant.images.get("docker.io/library/not-pulled:never")
        with self.assertRaises(airlock.ForbiddenError):
            tenant.images.pull("docker.io/library/python:3.12-slim")
        with self.assertRaises(airlock.ForbiddenError):
            tenant.images.remove("docker.io/library/python:3.12-slim")
        pruned = admin.images.prune()
        self.assertGreaterEqual(pruned.layers_removed, 0)
        with self.assertRaises(airlock.InvalidArgumentError) as cm:
            admin.images.pull("Not A Ref!")
        self.assertEqual(cm.exception.field, "ref")
        self.assertEqual(tenant.volumes.list(), [])
        self.assertIn("host", [t.name for t in tenant.templates.list()])
        mine = tenant.tenants.list()
        self.assertEqual([t.name for t in mine], ["t1"])
        self.assertGreaterEqual(len(admin.tenants.list()), 1)

    def test_webhooks(self) -> None:
        c = harness.client()
        url = "https://hooks.example.invalid/airlock"  # a name that never resolves
        hook = c.webhooks.create(url, events=["sandbox.status"], description="sdk-py")
        self.assertTrue(hook.id.startswith("whk_"))
        self.assertTrue(hook.secret)
        self.assertEqual((c.webhooks.get(hook.id).url, c.webhooks.get(hook.id).secret), (url, None))
        self.assertIn(hook.id, [w.id for w in c.webhooks.list()])
        self.assertEqual(c.webhooks.deliveries(hook.id, limit=5), [])
        with self.assertRaises(airlock.NotFoundError):
            harness.client("t2").webhooks.get(hook.id)
        delivery = c.webhooks.test(hook.id)
        self.assertEqual((delivery.event_type, delivery.status), ("webhook.test", "failed"))
        self.assertIn("hooks.example.invalid", delivery.error)
        self.assertEqual([d.id for d in c.webhooks.deliveries(hook.id)], [delivery.id])
        self.assertEqual(c.webhooks.delete(hook.id).id, hook.id)
        with self.assertRaises(airlock.NotFoundError):
            c.webhooks.get(hook.id)

    def test_daemon_routes(self) -> None:
        c = harness.client()
        self.assertEqual(c.health().status, "ok")
        caps = c.capabilities()
        self.assertIn("process", [lv.level for lv in caps.levels])
        self.assertEqual(caps.default_isolation, "process")
        doc = c.openapi()
        with open(harness.REPO / "api" / "openapi.json") as f:
            self.assertEqual(sorted(doc["paths"]), sorted(json.load(f)["paths"]))
        self.assertIn("airlock_", c.prometheus_metrics())

    def test_async_admin(self) -> None:
        async def go() -> None:
            async with harness.async_client("admin") as ac:
                st = await ac.pools.put("sdk-py-async", size=1, spec={"isolation": "process"})
                self.assertEqual(st.name, "sdk-py-async")
                self.assertEqual((await ac.pools.delete("sdk-py-async")).name, "sdk-py-async")
                self.assertEqual((await ac.health()).status, "ok")

        asyncio.run(go())
