// An MCP client written with the official TypeScript SDK (nothing of airlock's), driven by
// test/e2e's tools tests:
//
//   node client.mjs http URL KEY PLAN      streamable HTTP to the daemon's /mcp, the key as bearer
//   node client.mjs stdio AIRLOCK PLAN     `AIRLOCK mcp` as a subprocess (AIRLOCK_HOST and
//                                          AIRLOCK_TOKEN come from this process's environment)
//
// PLAN is a JSON array of calls [{"name": ..., "arguments": {...}}]. The client initializes,
// lists the tools, makes the calls in order and prints one JSON object: {"server": {name,
// version}, "tools": [names], "calls": [{name, isError, text, structuredContent} or {name,
// error}]}.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [mode, ...rest] = process.argv.slice(2);
let transport;
let plan;
if (mode === "http") {
  const [url, key, p] = rest;
  transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${key}` } } });
  plan = JSON.parse(p);
} else if (mode === "stdio") {
  const [bin, p] = rest;
  transport = new StdioClientTransport({
    command: bin,
    args: ["mcp"],
    env: { AIRLOCK_HOST: process.env.AIRLOCK_HOST, AIRLOCK_TOKEN: process.env.AIRLOCK_TOKEN, PATH: process.env.PATH ?? "/usr/bin:/bin" },
    stderr: "inherit",
  });
  plan = JSON.parse(p);
} else {
  console.error("usage: node client.mjs http URL KEY PLAN | stdio AIRLOCK PLAN");
  process.exit(2);
}

const client = new Client({ name: "airlock-e2e", version: "1.0.0" });
await client.connect(transport);
const out = { server: client.getServerVersion(), tools: [], calls: [] };
const listed = await client.listTools();
out.tools = listed.tools.map((t) => t.name);
for (const c of plan) {
  try {
    const res = await client.callTool({ name: c.name, arguments: c.arguments ?? {} });
    const text = (res.content ?? []).filter((x) => x.type === "text").map((x) => x.text).join("\n");
    out.calls.push({ name: c.name, isError: res.isError === true, text, structuredContent: res.structuredContent ?? null });
  } catch (e) {
    out.calls.push({ name: c.name, error: String(e?.message ?? e) });
  }
}
await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
