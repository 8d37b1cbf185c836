"""Seed 000's SDK snippet, in Python, run as written: create → start the agent → exec → logs
follow → terminate."""

from __future__ import annotations

import contextlib
import io
import unittest

import harness

import airlock


class SeedSnippet(unittest.TestCase):
    def test_seed_000_flow(self) -> None:
        d = harness.current()
        printed = io.StringIO()
        lines = []
        with contextlib.redirect_stdout(printed):
            # The snippet of seed 000, in this SDK's spelling.
            drd = airlock.Client(api_key=d.keys["t1"], base_url=d.url)
            self.addCleanup(drd.close)  # after the cleanup below
            sandbox = drd.sandboxes.create(
                name="test-agent-v2",
                isolation="container",
                agent_id=harness.AGENT_ID,
                resources={"cpu": "2.0", "memory_mb": 4096},
                network={"egress_policy": "restricted"},
            )
            self.addCleanup(drd.sandboxes.terminate, sandbox.id, missing_ok=True)
            started = drd.sandboxes.start(sandbox.id)
            result = drd.sandboxes.exec(sandbox.id, "python3 /app/agent.py --test-suite full", timeout=120)
            print(f"Exit code: {result.exit_code}")
            print(f"Output: {result.stdout}")
            for line in drd.sandboxes.logs(sandbox.id, follow=True):
                print(f"[{line.timestamp}] {line.message}")
                lines.append(line)
            ended = drd.sandboxes.get(sandbox.id)
            terminated = drd.sandboxes.terminate(sandbox.id)

        # What each step answered.
        self.assertTrue(sandbox.id.startswith("sbx_"))
        self.assertEqual(sandbox.status, "ready")
        self.assertEqual(sandbox.name, "test-agent-v2")
        self.assertEqual(sandbox.isolation, "container")
        self.assertEqual(sandbox.agent_id, harness.AGENT_ID)
        self.assertEqual(sandbox.resources.cpu, "2.0")
        self.assertEqual(sandbox.resources.memory_mb, 4096)
        self.assertEqual(sandbox.network.egress_policy, "restricted")
        self.assertTrue(sandbox.endpoints.exec.startswith("ws://"), sandbox.endpoints)
        self.assertEqual(started.status, "running")
        # /app/agent.py is the seed's file, not in this sandbox: python3 says so.
        self.assertEqual(result.exit_code, 2, result)
        self.assertIn("/app/agent.py", result.stderr)
        self.assertTrue(result.execution_id.startswith("exec_"))
        # The agent's output is the log, which ends once the agent has (completed).
        output = [x.message for x in lines if x.stream == "stdout"]
        self.assertEqual(output, ["scanning\n", "scan done\n"])
        self.assertTrue(all(x.timestamp and x.message is not None for x in lines))
        seqs = [x.seq for x in lines]
        self.assertEqual(seqs, sorted(set(seqs)), "entries in order, none twice")
        self.assertEqual(ended.status, "completed")
        self.assertEqual(terminated.status, "terminated")
        out = printed.getvalue()
        self.assertTrue(out.startswith("Exit code: 2\nOutput: \n["), out)
        self.assertIn(f"[{lines[0].timestamp}] provisioning\n", out)
        self.assertIn("] scanning\n", out)
        self.assertIn("] scan done\n", out)
