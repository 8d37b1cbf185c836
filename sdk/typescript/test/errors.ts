// Typed errors: the daemon's refusals are AirlockErrors with code, status, field, sandboxStatus
// and retryAfter; a daemon out of reach is an AirlockConnectionError.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { AirlockClient, AirlockConnectionError, AirlockError } from "@airlock/sdk";
import type { Daemon } from "./harness.js";

/** refusal checks that a call rejects with the AirlockError described. */
async function refusal(p: Promise<unknown>, want: Partial<Pick<AirlockError, "status" | "code" | "field" | "sandboxStatus">>): Promise<AirlockError> {
  let got: unknown;
  await assert.rejects(p, (e: unknown) => {
    got = e;
    return true;
  });
  assert.ok(got instanceof AirlockError, `want an AirlockError, got ${String(got)}`);
  assert.ok(got instanceof Error);
  assert.equal(got.name, "AirlockError");
  for (const [k, v] of Object.entries(want)) assert.equal(got[k as keyof typeof want], v, `${k} of ${got.message}`);
  return got;
}

export function errorsSuite(d: () => Daemon): void {
  describe("errors", () => {
    it("401: an unknown key", async () => {
      const c = new AirlockClient({ apiKey: "alk_not_a_key", baseUrl: d().url });
      const e = await refusal(c.sandboxes.list(), { status: 401, code: "unauthorized" });
      assert.equal(e.field, undefined);
    });

    it("404: an unknown sandbox, snapshot, file", async () => {
      const c = d().client();
      await refusal(c.sandboxes.get("sbx_0000"), { status: 404, code: "not_found" });
      await refusal(c.snapshots.get("snap_0000"), { status: 404, code: "not_found" });
      // Another tenant's sandbox is a 404 as well.
      await using sb = await d().client("t2").sandboxes.create({});
      await refusal(c.sandboxes.exec(sb.id, { command: "true" }), { status: 404, code: "not_found" });
      await refusal(d().client("t2").sandboxes.files.read(sb.id, "/no/such/file"), { status: 404, code: "not_found" });
    });

    it("409: the wrong state, with the sandbox's status", async () => {
      const c = d().client();
      const sb = await c.sandboxes.create({});
      await c.sandboxes.terminate(sb.id);
      const e = await refusal(c.sandboxes.exec(sb.id, { command: "true" }), { status: 409, code: "conflict", sandboxStatus: "terminated" });
      assert.match(e.message, /terminated/);
      await using other = await c.sandboxes.create({});
      await refusal(c.sandboxes.start(other.id), { status: 409, code: "conflict", field: "agent" });
    });

    it("400: names the field", async () => {
      const c = d().client();
      await refusal(c.sandboxes.create({ resources: { memoryMb: -1 } }), { status: 400, code: "invalid_argument", field: "resources.memoryMb" });
      await refusal(c.sandboxes.create({ resources: { cpu: "lots" } }), { status: 400, code: "invalid_argument", field: "resources.cpu" });
      await refusal(c.sandboxes.create({ bogus: 1 } as never), { status: 400, field: "bogus" });
    });

    it("429: a quota (maxSandboxes) and the request rate (with Retry-After)", async () => {
      const limited = d().client("limited");
      await using first = await limited.sandboxes.create({});
      assert.equal(first.status, "ready");
      const e = await refusal(limited.sandboxes.create({}), { status: 429, code: "quota_exceeded" });
      assert.match(e.message, /maxSandboxes|sandboxes/);

      const slow = d().client("slow");
      let rate: AirlockError | undefined;
      for (let i = 0; i < 5 && !rate; i++) {
        rate = await slow.tenants.list().then(
          () => undefined,
          (err: unknown) => (err instanceof AirlockError ? err : Promise.reject(err)),
        );
      }
      assert.ok(rate, "the slow tenant's requests are refused past its rate");
      assert.equal(rate.status, 429);
      assert.equal(rate.code, "quota_exceeded");
      assert.ok(rate.retryAfter !== undefined && rate.retryAfter >= 1, `retryAfter ${rate.retryAfter}`);
    });

    it("a daemon out of reach is an AirlockConnectionError, not an AirlockError", async () => {
      const c = new AirlockClient({ apiKey: "k", baseUrl: "http://127.0.0.1:1" });
      await assert.rejects(c.health(), (e: unknown) => {
        assert.ok(e instanceof AirlockConnectionError);
        assert.ok(!(e instanceof AirlockError));
        assert.ok(e.cause instanceof Error);
        return true;
      });
      await assert.rejects(c.sandboxes.execStream("sbx_x", { command: "true" }), AirlockConnectionError);
    });

    it("a refused WebSocket upgrade is the daemon's AirlockError", async () => {
      await refusal(d().client().sandboxes.execStream("sbx_0000", { command: "true" }), { status: 404, code: "not_found" });
    });
  });
}
