"""Typed errors (401, 403, 404, 409, 400 naming the field, 429) and automatic cleanup
(``with`` / ``async with`` terminate the sandbox, also when the block raises)."""

from __future__ import annotations

import asyncio
import socket
import unittest

import harness

import airlock


class Errors(unittest.TestCase):
    def setUp(self) -> None:
        self.c = harness.client()

    def test_401(self) -> None:
        with airlock.Client("alk_not_a_key", harness.current().url) as bad:
            with self.assertRaises(airlock.UnauthorizedError) as cm:
                bad.sandboxes.list()
        e = cm.exception
        self.assertIsInstance(e, airlock.AirlockError)
        self.assertEqual((e.status, e.code), (401, "unauthorized"))

    def test_404(self) -> None:
        with self.assertRaises(airlock.NotFoundError) as cm:
            self.c.sandboxes.get("sbx_00000000000000000000")
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "not_found"))
        # Another tenant's sandbox is as unknown as a missing one.
        sb = harness.sandbox(self, self.c)
        with self.assertRaises(airlock.NotFoundError):
            harness.client("t2").sandboxes.exec(sb.id, "true")

    def test_409_says_the_status(self) -> None:
        sb = harness.sandbox(self, self.c)
        self.c.sandboxes.terminate(sb.id)
        with self.assertRaises(airlock.ConflictError) as cm:
            self.c.sandboxes.exec(sb.id, "true")
        e = cm.exception
        self.assertEqual((e.status, e.code, e.sandbox_status), (409, "conflict", "terminated"))
        self.assertIsNone(self.c.sandboxes.terminate(sb.id, missing_ok=True))

    def test_400_names_the_field(self) -> None:
        with self.assertRaises(airlock.InvalidArgumentError) as cm:
            self.c.sandboxes.create(resources={"memory_mb": 10 ** 9})
        e = cm.exception
        self.assertEqual((e.status, e.code, e.field), (400, "invalid_argument", "resources.memoryMb"))
        self.assertIn("resources.memoryMb", str(e))
        with self.assertRaises(airlock.InvalidArgumentError) as cm:
            self.c.sandboxes.create(spec={"nmae": "typo"})
        self.assertEqual(cm.exception.field, "nmae")

    def test_403_admin_route_with_a_tenant_key(self) -> None:
        with self.assertRaises(airlock.ForbiddenError) as cm:
            self.c.images.prune()
        self.assertEqual((cm.exception.status, cm.exception.code), (403, "forbidden"))

    def test_429_quota(self) -> None:
        limited = harness.client("limited")
        first = limited.sandboxes.create(name="the-one")
        try:
            with self.assertRaises(airlock.QuotaExceededError) as cm:
                limited.sandboxes.create(name="one-too-many")
            e = cm.exception
            self.assertEqual((e.status, e.code), (429, "quota_exceeded"))
        finally:
            limited.sandboxes.terminate(first.id)

    def test_transport_failures_are_not_airlock_errors(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]  # nothing listens once it is closed
        with airlock.Client("alk_x", f"http://127.0.0.1:{port}") as dead:
            with self.assertRaises(OSError) as cm:
                dead.health()
        self.assertNotIsInstance(cm.exception, airlock.AirlockError)

    def test_async_errors(self) -> None:
        async def go() -> None:
            async with harness.async_client() as ac:
                with self.assertRaises(airlock.NotFoundError):
                    await ac.sandboxes.get("sbx_00000000000000000000")
                with self.assertRaises(airlock.InvalidArgumentError) as cm:
                    await ac.sandboxes.create(resources={"cpu": "lots"})
                self.assertEqual(cm.exception.field, "resources.cpu")

        asyncio.run(go())


class Cleanup(unittest.TestCase):
    def setUp(self) -> None:
        self.c = harness.client()

    def test_with_terminates(self) -> None:
        with self.c.sandboxes.create(name="cleanup") as sb:
            self.assertEqual(self.c.sandboxes.exec(sb.id, "echo in").stdout, "in\n")
        self.assertEqual(self.c.sandboxes.get(sb.id).status, "terminated")

    def test_with_terminates_when_the_block_raises(self) -> None:
        with self.assertRaises(ZeroDivisionError):
            with self.c.sandboxes.create(name="cleanup-raise") as sb:
                1 / 0
        self.assertEqual(self.c.sandboxes.get(sb.id).status, "terminated")

    def test_with_an_already_ended_sandbox(self) -> None:
        with self.c.sandboxes.create(name="cleanup-twice") as sb:
            self.c.sandboxes.terminate(sb.id)
        self.assertEqual(self.c.sandboxes.get(sb.id).status, "terminated")

    def test_async_with_terminates(self) -> None:
        ids = []

        async def go() -> None:
            async with harness.async_client() as ac:
                async with ac.sandboxes.create(name="async-cleanup") as sb:
                    ids.append(sb.id)
                    self.assertEqual((await ac.sandboxes.exec(sb.id, "echo a")).stdout, "a\n")
                with self.assertRaises(KeyError):
                    async with ac.sandboxes.create(name="async-cleanup-raise") as sb2:
                        ids.append(sb2.id)
                        raise KeyError("boom")
                sb3 = await ac.sandboxes.create(name="async-cleanup-awaited")
                ids.append(sb3.id)
                async with sb3:
                    pass
                with self.assertRaises(TypeError):
                    with sb3:  # a sandbox of an AsyncClient needs async with
                        pass

        asyncio.run(go())
        self.assertEqual(len(ids), 3)
        for id in ids:
            self.assertEqual(self.c.sandboxes.get(id).status, "terminated")
