"""The network policy updated live, and the audit events: pages and followed streams."""

from __future__ import annotations

import asyncio
import threading
import time
import unittest

import harness


class NetworkAndEvents(unittest.TestCase):
    def setUp(self) -> None:
        self.c = harness.client()

    def test_network_policy_update(self) -> None:
        sb = harness.sandbox(self, self.c, network={"egress_policy": "restricted"})
        self.assertEqual(sb.network.egress_policy, "restricted")
        updated = self.c.sandboxes.update_network(sb.id, egress_policy="restricted",
                                                  allowed_domains=["example.com", "*.example.org"])
        self.assertEqual(updated.network.egress_policy, "restricted")
        self.assertEqual(updated.network.allowed_domains, ["example.com", "*.example.org"])
        again = self.c.network.update(sb.id, {"egressPolicy": "restricted", "allowedDomains": ["example.net"]})
        self.assertEqual(again.network.allowed_domains, ["example.net"])
        self.assertEqual(self.c.sandboxes.get(sb.id).network.allowed_domains, ["example.net"])
        page = self.c.events.list(sandbox_id=sb.id, type="network.policy")
        self.assertEqual([e.data.get("allowedDomains") for e in page.events],
                         [["example.com", "*.example.org"], ["example.net"]])

    def test_events_pages(self) -> None:
        sb = harness.sandbox(self, self.c)
        for _ in range(3):
            self.c.sandboxes.exec(sb.id, "true")
        first = self.c.events.list(sandbox_id=sb.id, type="exec.exited", limit=2)
        self.assertEqual(len(first.events), 2)
        second = self.c.events.list(sandbox_id=sb.id, type="exec.exited", after=first.next, limit=2)
        self.assertEqual(len(second.events), 1)
        seqs = [e.seq for e in first.events + second.events]
        self.assertEqual(seqs, sorted(set(seqs)))
        tenant = self.c.events.list(type="exec.exited", after=first.events[0].seq - 1, limit=10000)
        self.assertTrue({e.id for e in first.events + second.events} <= {e.id for e in tenant.events})
        other = harness.client("t2").events.list(type="exec.")
        self.assertNotIn(sb.id, {e.sandbox_id for e in other.events})

    def test_audit_verify(self) -> None:
        v = self.c.events.verify()
        self.assertTrue(v.intact)
        self.assertIsNone(v.problem)
        self.assertGreater(v.events, 0)
        self.assertGreaterEqual(v.head_seq, v.from_seq)
        self.assertEqual(len(v.head_hash), 64)
        fresh = harness.client("admin").events.verify()
        self.assertTrue(fresh.intact)
        self.assertGreaterEqual(fresh.checked_at, v.checked_at)

    def test_events_follow(self) -> None:
        sb = harness.sandbox(self, self.c)
        seen = []

        def act() -> None:
            time.sleep(0.3)
            self.c.sandboxes.exec(sb.id, "echo one")
            self.c.sandboxes.exec(sb.id, "echo two")
            self.c.sandboxes.terminate(sb.id)

        t = threading.Thread(target=act)
        t.start()
        for ev in self.c.events.follow(sandbox_id=sb.id):
            seen.append(ev)  # the stream ends when the sandbox is terminated
        t.join()
        types = [e.type for e in seen]
        self.assertEqual(types.count("exec.exited"), 2, types)
        statuses = [e.data.get("to") for e in seen if e.type == "sandbox.status"]
        self.assertEqual(statuses[-1], "terminated")
        seqs = [e.seq for e in seen]
        self.assertEqual(seqs, sorted(set(seqs)))
        # Resuming after an event gives what came after it, and only that: what the first follow
        # saw, then what was recorded after its end (the terminate's own api.request event can
        # come after the terminated status that ends a follow).
        mid = seen[len(seen) // 2].seq
        rest = [e.seq for e in self.c.events.follow(sandbox_id=sb.id, after=mid)]
        want = [s for s in seqs if s > mid]
        self.assertEqual(rest[: len(want)], want)
        self.assertEqual(rest, sorted(set(rest)))

    def test_async_events_follow_tenant(self) -> None:
        sb = harness.sandbox(self, self.c)

        async def go() -> list:
            async with harness.async_client() as ac:
                got = []
                await ac.sandboxes.exec(sb.id, "echo async")
                async for ev in ac.events.follow(type="exec.exited"):  # the tenant's: never ends
                    got.append(ev)
                    if ev.sandbox_id == sb.id:
                        break
                return got

        got = asyncio.run(go())
        self.assertEqual(got[-1].sandbox_id, sb.id)
        self.assertEqual(got[-1].type, "exec.exited")
