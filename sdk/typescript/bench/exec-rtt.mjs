#!/usr/bin/env node
// exec-rtt.mjs measures the exec round trip through the TypeScript SDK (the built dist/), for
// `make bench-sdk` (test/bench/sdk): 20 warm-up execs of `true`, then N timed ones, one at a
// time on one client (fetch keeps the connection alive), each timed in-process with a monotonic
// clock. Prints one JSON line: {"ms": [d1, d2, ...]}.
//
//   AIRLOCK_HOST=... AIRLOCK_TOKEN=... node sdk/typescript/bench/exec-rtt.mjs SANDBOX_ID N

import { AirlockClient } from "../dist/index.js";

const warmup = 20;
const [id, nArg] = process.argv.slice(2);
const n = Number(nArg);
if (!id || !Number.isInteger(n) || n < 1) {
  console.error("usage: exec-rtt.mjs SANDBOX_ID N (with AIRLOCK_HOST and AIRLOCK_TOKEN set)");
  process.exit(2);
}

const client = new AirlockClient();
const req = { command: ["true"] };
for (let i = 0; i < warmup; i++) await client.sandboxes.exec(id, req);
const ms = [];
for (let i = 0; i < n; i++) {
  const t0 = performance.now();
  const res = await client.sandboxes.exec(id, req);
  ms.push(performance.now() - t0);
  if (res.exitCode !== 0) throw new Error(`exec true: exit ${res.exitCode}`);
}
console.log(JSON.stringify({ ms }));
