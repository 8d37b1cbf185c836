// Seed 000's SDK snippet, run as written (examples/seed000.ts), and its flow step by step.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, it } from "node:test";
import { seedAgentId, sdkDir, type Daemon } from "./harness.js";

const run = promisify(execFile);

export function seedSuite(d: () => Daemon): void {
  describe("seed 000", () => {
    it("runs the snippet unchanged: create → start the agent → exec → logs follow → terminate", async () => {
      const { url, keys } = d();
      const { stdout } = await run(process.execPath, [join(sdkDir, "build/examples/seed000.js")], {
        env: { ...process.env, DRD_API_KEY: keys.t1, AIRLOCK_HOST: url, AIRLOCK_TOKEN: "" },
        timeout: 60_000,
      });
      const lines = stdout.split("\n");
      // /app/agent.py does not exist in the sandbox: python3 says so, exit 2.
      assert.equal(lines[0], "Exit code: 2");
      assert.equal(lines[1], "Output: ");
      const logged = lines.slice(2).filter((l) => l !== "");
      // Each line as the snippet prints it: [timestamp] message.
      assert.ok(logged.some((l) => /^\[\d{4}-\d\d-\d\dT[\d:.]+Z\] scanning$/.test(l)), `a "[time] scanning" line in:\n${stdout}`);
      const messages = logged.map((l) => l.replace(/^\[[^\]]+\] /, ""));
      // The agent's output, in order, and the exec's stderr between.
      const scanning = messages.indexOf("scanning");
      const done = messages.indexOf("scan done");
      assert.ok(scanning >= 0 && done > scanning, `agent output in the log:\n${stdout}`);
      assert.ok(messages.some((m) => m.includes("can't open file '/app/agent.py'")), "the exec's stderr is in the log");
      assert.ok(messages.includes("agent_exit"), "the log ends with the agent's exit");

      // The sandbox the snippet made: container level, agent completed, then terminated.
      const c = d().client("t1");
      const [sb] = await c.sandboxes.list({ agentId: seedAgentId });
      assert.ok(sb, "the snippet's sandbox is listed by its agentId");
      assert.equal(sb.name, "test-agent-v2");
      assert.equal(sb.isolation, "container");
      assert.equal(sb.resources.cpu, "2.0");
      assert.equal(sb.resources.memoryMb, 4096);
      assert.equal(sb.network.egressPolicy, "restricted");
      assert.equal(sb.status, "terminated");
      const full = await c.sandboxes.get(sb.id);
      assert.deepEqual(
        full.transitions?.map((t) => t.to),
        ["provisioning", "ready", "running", "completed", "terminated"],
      );
    });
  });
}
