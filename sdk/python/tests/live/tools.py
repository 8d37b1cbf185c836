"""The tool gateway: tools listed and called (sync and async), the tenant's tools, servers and
policies, refusals as AirlockErrors with field, rule and retry_after, and the MCP endpoint at
the wire level."""

from __future__ import annotations

import asyncio
import unittest

import harness

import airlock


def _end_tool_sandboxes(c: airlock.Client) -> None:
    for sb in c.sandboxes.list(status=["ready", "running"]):
        if (sb.metadata or {}).get("airlock.tools.for"):
            c.sandboxes.terminate(sb.id, missing_ok=True)


class Tools(unittest.TestCase):
    def setUp(self) -> None:
        self.c = harness.client()
        self.addCleanup(_end_tool_sandboxes, self.c)

    def test_run_code(self) -> None:
        names = [t.name for t in self.c.tools.list()]
        for n in ("run_code", "read_file", "write_file", "list_files", "http_fetch"):
            self.assertIn(n, names)
        res = self.c.tools.call("run_code", {"code": "print(6*7)"})
        self.assertFalse(res.is_error)
        self.assertEqual(res.content[0].text.strip(), "42")
        self.assertTrue(res.event_id.startswith("evt_") and res.sandbox_id.startswith("sbx_"))
        self.c.tools.call("write_file", {"path": "notes/a.txt", "content": "hi"})
        self.assertEqual(self.c.tools.call("read_file", {"path": "notes/a.txt"}).content[0].text, "hi")

    def test_a_tenants_tool_and_refusals(self) -> None:
        t = self.c.tools.put("py_greet", input_schema={"type": "object", "required": ["who"],
                                                         "properties": {"who": {"type": "string", "pattern": "^[a-z]+$"}}},
                             exec={"command": ["python3", "-c", "import json, sys; print('hello', json.load(sys.stdin)['who'])"]},
                             rate_limit="2/1h")
        self.addCleanup(self.c.tools.delete, "py_greet")
        self.assertEqual((t.source, t.definition.rate_limit), ("api", "2/1h"))
        self.assertEqual(self.c.tools.call("py_greet", {"who": "ann"}).content[0].text.strip(), "hello ann")
        with self.assertRaises(airlock.InvalidArgumentError) as cm:
            self.c.tools.call("py_greet", {"who": "Ann!"})
        self.assertEqual((cm.exception.code, cm.exception.field, cm.exception.rule), ("invalid_arguments", "/who", "pattern"))
        self.c.tools.call("py_greet", {"who": "bob"})
        with self.assertRaises(airlock.QuotaExceededError) as cm2:
            self.c.tools.call("py_greet", {"who": "cy"})
        self.assertEqual(cm2.exception.code, "rate_limited")
        self.assertGreater(cm2.exception.retry_after or 0, 60)
        with self.assertRaises(airlock.ForbiddenError) as cm3:
            harness.client("t2").tools.call("py_greet", {"who": "ann"})
        self.assertEqual(cm3.exception.code, "tool_not_allowed")

    def test_servers_and_policies(self) -> None:
        s = self.c.tools.servers.put("py_cat", command=["cat"])
        self.assertEqual((s.transport, s.source), ("stdio", "api"))
        self.assertIn("py_cat", [x.name for x in self.c.tools.servers.list()])
        self.assertEqual(self.c.tools.servers.get("py_cat").definition.command, ["cat"])
        with self.assertRaises(airlock.ForbiddenError):
            self.c.tools.servers.put("py_up", {"url": "http://127.0.0.1:1/mcp"})
        self.assertEqual(self.c.tools.servers.delete("py_cat").name, "py_cat")

        p = self.c.tools.policies.put("py_bots", agent_id="bot", deny=["run_*"])
        self.addCleanup(self.c.tools.policies.delete, "py_bots")
        self.assertEqual((p.tenant, p.source), ("t1", "tenant"))
        with self.assertRaises(airlock.ForbiddenError) as cm:
            self.c.tools.call("run_code", {"code": "1"}, agent_id="bot")
        self.assertIn("policy py_bots", cm.exception.rule or "")
        self.assertNotIn("run_code", [t.name for t in self.c.tools.list(agent_id="bot")])
        with self.assertRaises(airlock.ForbiddenError):
            self.c.tools.policies.put("py_all", deny=["*"])  # binds this key whatever the call
        with self.assertRaises(airlock.ForbiddenError):
            harness.client("t2").tools.policies.get("py_bots", tenant="t1")
        self.assertEqual(self.c.tools.policies.get("py_bots").agent_id, "bot")

    def test_mcp_wire(self) -> None:
        self.assertEqual(self.c.mcp.url, harness.current().url + "/mcp")
        init = self.c.mcp.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "sdk-py", "version": "1"}}})
        sid = init["session_id"]
        self.assertTrue(sid)
        self.assertEqual(init["messages"][0]["result"]["serverInfo"]["name"], "airlock")
        self.c.mcp.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session_id=sid, protocol_version="2025-06-18")
        listed = self.c.mcp.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, session_id=sid, protocol_version="2025-06-18")
        self.assertIn("run_code", [t["name"] for t in listed["messages"][0]["result"]["tools"]])
        self.c.mcp.end(sid, protocol_version="2025-06-18")

    def test_async(self) -> None:
        async def main() -> None:
            async with harness.async_client() as ac:
                res = await ac.tools.call("run_code", {"code": "print(1+1)", "language": "python"})
                self.assertEqual(res.content[0].text.strip(), "2")
                self.assertIn("run_code", [t.name for t in await ac.tools.list()])

        asyncio.run(main())
