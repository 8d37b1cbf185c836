"""Sandboxes: create (keywords, a wire dict, no wait), list filters, exec, pause and resume,
metrics, execs, replay, the agent and its stdin, logs (whole and followed); sync and async."""

from __future__ import annotations

import asyncio
import time
import unittest

import harness

import airlock


class Lifecycle(unittest.TestCase):
    def setUp(self) -> None:
        self.c = harness.client()

    def test_create_maps_keywords_and_wire_dicts(self) -> None:
        sb = harness.sandbox(
            self,
            self.c,
            spec={"resources": {"diskMb": 2048}, "metadata": {"team": "sdk-py"}},
            name="mapped",
            resources={"cpu": 1.5, "memory_mb": 768},
            timeout={"max_duration_seconds": 600, "idleTimeoutSeconds": 120},
            environment={"SOME_VAR": "x", "lower_case": "kept"},
            metadata={"run": "lifecycle"},
        )
        self.assertEqual(sb.status, "ready")
        self.assertEqual(sb.resources.cpu, "1.5")  # answered as seed 000's string
        self.assertEqual(sb.resources.memory_mb, 768)
        self.assertNotEqual(sb.resources.disk_mb, 2048)  # the keyword replaced the spec's resources
        self.assertEqual(sb.timeout.max_duration_seconds, 600)
        self.assertEqual(sb.timeout.idle_timeout_seconds, 120)
        self.assertEqual(sb.environment, {"SOME_VAR": "x", "lower_case": "kept"})
        self.assertEqual(sb.metadata, {"run": "lifecycle"})
        r = self.c.sandboxes.exec(sb.id, "echo $SOME_VAR $lower_case")
        self.assertEqual(r.stdout, "x kept\n")
        listed = self.c.sandboxes.list(metadata={"run": "lifecycle"}, status=["ready", "running"])
        self.assertEqual([x.id for x in listed], [sb.id])
        self.assertEqual(self.c.sandboxes.list(metadata={"run": "nothing-like-it"}), [])

    def test_create_without_waiting(self) -> None:
        sb = self.c.sandboxes.create(name="nowait", wait=False)
        self.addCleanup(self.c.sandboxes.terminate, sb.id, missing_ok=True)
        self.assertIn(sb.status, ("provisioning", "ready"))
        r = self.c.sandboxes.exec(sb.id, ["echo", "waited"])  # waits for the sandbox
        self.assertEqual(r.stdout, "waited\n")

    def test_exec_result(self) -> None:
        sb = harness.sandbox(self, self.c)
        r = self.c.sandboxes.exec(sb.id, ["sh", "-c", "cat; echo $A; pwd; exit 3"], stdin="in\n",
                                  env={"A": "a"}, workdir="/tmp", timeout=30)
        self.assertEqual((r.exit_code, r.stdout, r.stderr), (3, "in\na\n/tmp\n", ""))
        self.assertFalse(r.timed_out)
        self.assertGreaterEqual(r.resource_usage.peak_memory_mb, 0)
        slow = self.c.sandboxes.exec(sb.id, "sleep 5", timeout=1)
        self.assertTrue(slow.timed_out)
        self.assertEqual(slow.exit_code, 124)
        quiet = self.c.sandboxes.exec(sb.id, "echo hidden", capture_output=False)
        self.assertEqual(quiet.stdout, "")
        execs = self.c.sandboxes.execs(sb.id)
        self.assertEqual({x.id for x in execs}, {r.execution_id, slow.execution_id, quiet.execution_id})
        one = self.c.sandboxes.execution(sb.id, r.execution_id)
        self.assertEqual(one.result.exit_code, 3)

    def test_pause_resume_metrics_replay(self) -> None:
        sb = harness.sandbox(self, self.c)
        self.c.sandboxes.exec(sb.id, "true")
        self.assertEqual(self.c.sandboxes.pause(sb.id).status, "paused")
        with self.assertRaises(airlock.ConflictError) as cm:
            self.c.sandboxes.exec(sb.id, "true")
        self.assertEqual(cm.exception.sandbox_status, "paused")
        self.assertEqual(self.c.sandboxes.resume(sb.id).status, "running")
        m = self.c.sandboxes.metrics(sb.id)
        self.assertEqual(m.sandbox_id, sb.id)
        self.assertIsNotNone(m.current)
        replay = self.c.sandboxes.replay(sb.id)
        self.assertEqual(replay.sandbox.id, sb.id)
        types = [e.type for e in replay.entries]
        self.assertIn("exec.exited", types)
        got = self.c.sandboxes.get(sb.id)
        self.assertEqual([t.to for t in got.transitions][-2:], ["paused", "running"])

    def test_agent_and_its_stdin(self) -> None:
        sb = harness.sandbox(self, self.c, agent={"command": "tr a-z A-Z"})
        self.assertEqual(self.c.sandboxes.start(sb.id).status, "running")
        first = self.c.sandboxes.agent_stdin(sb.id, "hello ")
        self.assertEqual((first.bytes, first.eof), (6, False))
        last = self.c.sandboxes.agent_stdin(sb.id, b"agent\n", eof=True)
        self.assertEqual((last.bytes, last.eof), (6, True))
        out = "".join(x.message for x in self.c.sandboxes.logs(sb.id, follow=True) if x.stream == "stdout")
        self.assertEqual(out, "HELLO AGENT\n")
        self.assertEqual(self.c.sandboxes.get(sb.id).status, "completed")
        with self.assertRaises(airlock.ConflictError):
            self.c.sandboxes.start(harness.sandbox(self, self.c).id)  # no agent

    def test_logs_since_and_follow_resumes(self) -> None:
        sb = harness.sandbox(self, self.c, agent={"command": "for i in 1 2 3 4 5; do echo line$i; sleep 0.2; done"})
        self.c.sandboxes.start(sb.id)
        followed = list(self.c.sandboxes.logs(sb.id, follow=True))
        lines = [x.message for x in followed if x.stream == "stdout"]
        self.assertEqual(lines, [f"line{i}\n" for i in range(1, 6)])
        whole = list(self.c.sandboxes.logs(sb.id))
        self.assertEqual([x.seq for x in whole][: len(followed)], [x.seq for x in followed])
        cut = followed[len(followed) // 2].seq
        rest = list(self.c.sandboxes.logs(sb.id, since=cut))
        self.assertEqual([x.seq for x in rest], [x.seq for x in whole if x.seq > cut])

    def test_async_lifecycle(self) -> None:
        async def go() -> None:
            async with harness.async_client() as ac:
                sb = await ac.sandboxes.create(name="async", agent={"command": "echo from-agent; sleep 0.5"})
                try:
                    self.assertEqual(sb.status, "ready")
                    self.assertEqual((await ac.sandboxes.start(sb.id)).status, "running")
                    r = await ac.sandboxes.exec(sb.id, "echo $((6*7))")
                    self.assertEqual(r.stdout, "42\n")
                    msgs = [x.message async for x in ac.sandboxes.logs(sb.id, follow=True) if x.stream == "stdout"]
                    self.assertEqual(sorted(msgs), ["42\n", "from-agent\n"])  # the agent and the exec race
                    listed = await ac.sandboxes.list(status="completed")
                    self.assertIn(sb.id, [x.id for x in listed])
                finally:
                    await ac.sandboxes.terminate(sb.id, missing_ok=True)

        asyncio.run(go())

    def test_connection_is_kept_alive_and_reopened(self) -> None:
        # The same connection carries call after call; one closed by the daemon is replaced.
        sb = harness.sandbox(self, self.c)
        self.c.sandboxes.get(sb.id)
        conn = self.c._http._idle[-1]
        self.c.sandboxes.get(sb.id)
        self.assertIs(self.c._http._idle[-1], conn)
        conn.sock.shutdown(2)  # as if the daemon had closed it
        time.sleep(0.05)
        self.assertEqual(self.c.sandboxes.get(sb.id).id, sb.id)
        self.assertIsNot(self.c._http._idle[-1], conn)
