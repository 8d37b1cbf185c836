// The SDK under Bun and Deno (their fetch, and their WebSocket or ws), when they are installed:
// on PATH, or named by AIRLOCK_TEST_BUN / AIRLOCK_TEST_DENO. Skipped, saying so, otherwise.

import assert from "node:assert/strict";
import { execFile, spawnSync } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, it } from "node:test";
import { sdkDir, type Daemon } from "./harness.js";

const run = promisify(execFile);

const runtimes = [
  { name: "bun", bin: process.env.AIRLOCK_TEST_BUN || "bun", argv: ["run"] },
  { name: "deno", bin: process.env.AIRLOCK_TEST_DENO || "deno", argv: ["run", "-A"] },
];

export function runtimesSuite(d: () => Daemon): void {
  describe("other runtimes", () => {
    for (const rt of runtimes) {
      const found = spawnSync(rt.bin, ["--version"]).status === 0;
      it(`runs under ${rt.name}`, { skip: found ? false : `${rt.bin} is not installed (set AIRLOCK_TEST_${rt.name.toUpperCase()} to test it)` }, async () => {
        const { stdout } = await run(rt.bin, [...rt.argv, join(sdkDir, "test/runtime-smoke.mjs")], {
          cwd: sdkDir,
          env: { ...process.env, AIRLOCK_HOST: d().url, AIRLOCK_TOKEN: d().keys.t1, NO_COLOR: "1", DENO_NO_UPDATE_CHECK: "1" },
          timeout: 60_000,
        });
        assert.deepEqual(JSON.parse(stdout.trim().split("\n").at(-1)!), {
          exec: "hi\n",
          stream: "streamed\n",
          exitCode: 0,
          pty: "30 90\r\n",
          file: [1, 2, 255],
          events: ["exec.started", "exec.exited"],
          refused: "404 not_found",
          disposed: "terminated",
        });
      });
    }
  });
}
