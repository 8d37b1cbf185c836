// The tool gateway: tools listed and called, the tenant's tools, servers and policies, refusals
// as AirlockErrors (code, field, rule, retryAfter), and the MCP endpoint at the wire level.

import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { AirlockError } from "@airlock/sdk";
import type { Daemon } from "./harness.js";

export function toolsSuite(d: () => Daemon): void {
  describe("tools", () => {
    after(async () => {
      // The sandboxes the gateway made for t1 (its workspace) end with the suite's others.
      const c = d().client();
      for (const sb of await c.sandboxes.list({ status: ["ready", "running"] })) {
        if (sb.metadata?.["airlock.tools.for"]) await c.sandboxes.terminate(sb.id);
      }
    });

    it("lists the built-in tools and runs run_code", async () => {
      const c = d().client();
      const names = (await c.tools.list()).map((t) => t.name);
      for (const n of ["run_code", "read_file", "write_file", "list_files", "http_fetch"]) assert.ok(names.includes(n), `${n} in ${names}`);
      const rc = await c.tools.get("run_code");
      assert.equal(rc.source, "builtin");
      assert.equal(rc.inputSchema.type, "object");
      const res = await c.tools.call("run_code", { code: "print(6*7)" });
      assert.equal(res.isError, false);
      assert.equal(res.content[0]?.text?.trim(), "42");
      assert.match(res.eventId ?? "", /^evt_/);
      assert.match(res.sandboxId ?? "", /^sbx_/);
      assert.equal(res.structuredContent?.exitCode, 0);
    });

    it("a tenant's tool: put, call, refusals with field, rule and retryAfter, delete", async () => {
      const c = d().client();
      const t = await c.tools.put("greet", {
        description: "greets",
        inputSchema: { type: "object", required: ["who"], properties: { who: { type: "string", pattern: "^[a-z]+$" } } },
        exec: { command: ["python3", "-c", "import json, sys; print('hello', json.load(sys.stdin)['who'])"] },
        rateLimit: "2/1h",
      });
      assert.equal(t.source, "api");
      assert.equal(t.definition?.rateLimit, "2/1h");
      assert.equal((await c.tools.call("greet", { who: "ann" })).content[0]?.text?.trim(), "hello ann");
      await assert.rejects(c.tools.call("greet", { who: "Ann!" }), (e: unknown) => {
        assert.ok(e instanceof AirlockError);
        assert.equal(e.status, 400);
        assert.equal(e.code, "invalid_arguments");
        assert.equal(e.field, "/who");
        assert.equal(e.rule, "pattern");
        return true;
      });
      await c.tools.call("greet", { who: "bob" });
      await assert.rejects(c.tools.call("greet", { who: "cy" }), (e: unknown) => {
        assert.ok(e instanceof AirlockError);
        assert.equal(e.status, 429);
        assert.equal(e.code, "rate_limited");
        assert.ok((e.retryAfter ?? 0) > 60, `retryAfter ${e.retryAfter}`);
        assert.match(e.rule ?? "", /rateLimit 2\/1h/);
        return true;
      });
      await assert.rejects(d().client("t2").tools.call("greet", { who: "ann" }), { status: 403, code: "tool_not_allowed" });
      await assert.rejects(c.tools.put("run_code", { exec: { command: ["true"] } }), { status: 409 });
      assert.equal((await c.tools.delete("greet")).name, "greet");
      await assert.rejects(c.tools.get("greet"), { status: 404 });
    });

    it("servers: put, list, get, delete; a URL server is the operator's", async () => {
      const c = d().client();
      const s = await c.tools.servers.put("cat", { command: ["cat"], description: "not an MCP server; never started here" });
      assert.equal(s.transport, "stdio");
      assert.equal(s.source, "api");
      assert.ok((await c.tools.servers.list()).some((x) => x.name === "cat"));
      assert.equal((await c.tools.servers.get("cat")).definition?.command?.[0], "cat");
      await assert.rejects(c.tools.servers.put("up", { url: "http://127.0.0.1:1/mcp" }), { status: 403 });
      assert.equal((await c.tools.servers.delete("cat")).name, "cat");
      await assert.rejects(d().client("t2").tools.servers.get("cat"), { status: 404 });
    });

    it("policies: scoped to an agent, refusing it; a tenant key cannot bind itself; an admin key sees all", async () => {
      const c = d().client();
      const p = await c.tools.policies.put("bots", { agentId: "bot", deny: ["run_*"] });
      assert.equal(p.source, "tenant");
      assert.equal(p.tenant, "t1");
      await assert.rejects(c.tools.call("run_code", { code: "1" }, { agentId: "bot" }), (e: unknown) => {
        assert.ok(e instanceof AirlockError);
        assert.equal(e.code, "tool_not_allowed");
        assert.match(e.rule ?? "", /policy bots: deny run_\*/);
        return true;
      });
      assert.ok(!(await c.tools.list({ agentId: "bot" })).some((t) => t.name === "run_code"));
      await assert.rejects(c.tools.policies.put("all", { deny: ["*"] }), { status: 403 });
      await assert.rejects(d().client("t2").tools.policies.get("bots", { tenant: "t1" }), { status: 403 });
      assert.ok((await d().client("admin").tools.policies.list()).some((x) => x.name === "bots" && x.tenant === "t1"));
      assert.equal((await c.tools.policies.get("bots")).agentId, "bot");
      assert.equal((await c.tools.policies.delete("bots")).name, "bots");
    });

    it("mcp: initialize, tools/list and tools/call over the wire, a refusal as a tool error", async () => {
      const c = d().client();
      assert.equal(c.mcp.url, `${d().url}/mcp`);
      const init = await c.mcp.post({ jsonrpc: "2.0", id: 1, method: "initialize",
        params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "sdk-test", version: "1" } } });
      assert.ok(init.sessionId, "a session");
      const opts = { sessionId: init.sessionId!, protocolVersion: "2025-06-18" };
      assert.equal((init.messages[0] as { result: { serverInfo: { name: string } } }).result.serverInfo.name, "airlock");
      await c.mcp.post({ jsonrpc: "2.0", method: "notifications/initialized" }, opts);
      const list = await c.mcp.post({ jsonrpc: "2.0", id: 2, method: "tools/list" }, opts);
      const tools = (list.messages[0] as { result: { tools: { name: string }[] } }).result.tools.map((t) => t.name);
      assert.ok(tools.includes("run_code"), `${tools}`);
      const call = await c.mcp.post({ jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "run_code", arguments: {} } }, opts);
      const res = (call.messages[0] as { result: { isError: boolean; content: { text: string }[] } }).result;
      assert.equal(res.isError, true);
      assert.match(res.content[0]!.text, /invalid_arguments/);
      await c.mcp.end(opts);
    });
  });
}
