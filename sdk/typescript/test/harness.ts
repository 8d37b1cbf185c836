// The test daemon: one `airlock serve` for the whole suite, on loopback, with its own data dir
// and config, and API keys for the tenants the tests use.
//
// Env: AIRLOCK_BIN (default <repo>/bin/airlock), AIRLOCK_TEST_DATA_DIR (default a fresh temp dir,
// removed at the end), AIRLOCK_TEST_REQUIRE_ROOT=1 (fail rather than skip when not root).

import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { AirlockClient, AirlockError } from "@airlock/sdk";

/** The SDK's directory (build/test/harness.js is two levels down). */
export const sdkDir = resolve(fileURLToPath(new URL("../..", import.meta.url)));
/** The repository's root. */
export const repoDir = resolve(sdkDir, "../..");

/** The agent the seed 000 snippet names with its agentId. */
export const seedAgentId = "019agent-scanner-...";

/** The daemon's config: fast process sandboxes, seed 000's agent, small quotas to hit. */
const config = {
  defaults: { isolation: "process" },
  agents: {
    [seedAgentId]: { command: "echo scanning; sleep 3; echo scan done", tenants: ["*"] },
    // An agent that echoes its stdin, for agentStdin.
    echo: { command: "cat", tenants: ["*"] },
  },
  // The webhook test's receiver listens on loopback.
  webhooks: { allowPrivateNetworks: true },
  tenants: {
    overrides: {
      limited: { maxSandboxes: 1 },
      slow: { requestsPerSecond: 1, burst: 1 },
    },
  },
};

/** The running test daemon. */
export interface Daemon {
  url: string;
  /** API keys by tenant; `admin` is an admin key. */
  keys: Record<"t1" | "t2" | "limited" | "slow" | "admin", string>;
  /** A client of the key's tenant. */
  client(who?: keyof Daemon["keys"]): AirlockClient;
  /** What the daemon printed so far. */
  stderr(): string;
}

const tenants = ["t1", "t2", "limited", "slow"] as const;
let daemon: Daemon | undefined;
let proc: ChildProcess | undefined;
let cleanupDirs: string[] = [];

/** rootReason says why the suite cannot run here, or undefined when it can. */
export function rootReason(): string | undefined {
  if (process.getuid?.() === 0) return undefined;
  const why = "the SDK's tests start airlock serve, which needs root (cgroups, namespaces)";
  if (process.env.AIRLOCK_TEST_REQUIRE_ROOT === "1") throw new Error(`${why}; AIRLOCK_TEST_REQUIRE_ROOT=1 and this is uid ${process.getuid?.()}`);
  return why;
}

/** start starts the daemon (once) and resolves to it. */
export async function start(): Promise<Daemon> {
  if (daemon) return daemon;
  const bin = process.env.AIRLOCK_BIN || join(repoDir, "bin/airlock");
  let dataDir = process.env.AIRLOCK_TEST_DATA_DIR;
  if (!dataDir) {
    dataDir = mkdtempSync(join(tmpdir(), "airlock-sdk-ts-data-"));
    cleanupDirs.push(dataDir);
  }
  mkdirSync(dataDir, { recursive: true });
  const confDir = mkdtempSync(join(tmpdir(), "airlock-sdk-ts-conf-"));
  cleanupDirs.push(confDir);
  const confFile = join(confDir, "config.json");
  writeFileSync(confFile, JSON.stringify(config, null, 2));

  const key = (...args: string[]) => {
    const r = spawnSync(bin, ["keys", "create", ...args, "--data-dir", dataDir!, "--config", confFile], { encoding: "utf8" });
    if (r.status !== 0) throw new Error(`${bin} keys create ${args.join(" ")}: ${r.error ?? r.stderr}`);
    return r.stdout.trim();
  };
  const keys = { admin: key("--admin") } as Daemon["keys"];
  for (const t of tenants) keys[t] = key("--tenant", t);

  let stderr = "";
  proc = spawn(bin, ["serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--config", confFile], {
    env: { ...process.env, AIRLOCK_LOG: "info" },
    stdio: ["ignore", "ignore", "pipe"],
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`airlock serve did not say its url within 30 s:\n${stderr}`)), 30_000);
    proc!.stderr!.setEncoding("utf8");
    proc!.stderr!.on("data", (chunk: string) => {
      stderr += chunk;
      const m = /url=(http:\/\/127\.0\.0\.1:\d+)/.exec(stderr);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    proc!.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`airlock serve exited (${code}) before serving:\n${stderr}`));
    });
  });
  daemon = {
    url,
    keys,
    client: (who = "t1") => new AirlockClient({ apiKey: keys[who], baseUrl: url }),
    stderr: () => stderr,
  };
  return daemon;
}

/**
 * stop terminates every sandbox the tests left, stops the daemon with SIGTERM and checks that it
 * exits 0; it prints the daemon's stderr when a test failed (or stopping did).
 */
export async function stop(failed: boolean): Promise<void> {
  const d = daemon;
  const p = proc;
  daemon = undefined;
  proc = undefined;
  try {
    if (!d || !p) return;
    try {
      // "slow" makes no sandbox (and its rate would refuse the list).
      for (const who of ["t1", "t2", "limited", "admin"] as const) {
        const c = d.client(who);
        for (const sb of await c.sandboxes.list()) {
          if (sb.status === "terminated") continue;
          await c.sandboxes.terminate(sb.id).catch((err: unknown) => {
            if (!(err instanceof AirlockError && err.status === 404)) throw err;
          });
        }
      }
    } finally {
      const code = await new Promise<number | null>((resolve) => {
        const timer = setTimeout(() => p.kill("SIGKILL"), 60_000);
        p.once("exit", (c, sig) => {
          clearTimeout(timer);
          resolve(sig ? -1 : c);
        });
        p.kill("SIGTERM");
      });
      if (failed || code !== 0) process.stderr.write(`--- airlock serve's stderr ---\n${d.stderr()}\n---\n`);
      if (code !== 0) throw new Error(`airlock serve exited with ${code} on SIGTERM, want 0`);
    }
  } finally {
    for (const dir of cleanupDirs) rmSync(dir, { recursive: true, force: true });
    cleanupDirs = [];
  }
}

/** eventually retries fn until it returns without throwing, for up to ms. */
export async function eventually<T>(fn: () => Promise<T>, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** text decodes UTF-8. */
export function text(b: Uint8Array): string {
  return new TextDecoder().decode(b);
}
