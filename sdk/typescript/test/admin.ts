// Admin routes (pools, images), what the operator lends (volumes, templates, tenants), webhooks,
// and the daemon's own routes.

import assert from "node:assert/strict";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, it } from "node:test";
import { AirlockError, verifyWebhook, WebhookVerificationError } from "@airlock/sdk";
import { eventually, type Daemon } from "./harness.js";

export function adminSuite(d: () => Daemon): void {
  describe("admin and daemon routes", () => {
    it("pools: an admin key puts, lists, gets and deletes; a tenant key lists but gets 403 on put", async () => {
      const admin = d().client("admin");
      const tenant = d().client();
      const put = await admin.pools.put("sdk-pool", { spec: { isolation: "process", resources: { memoryMb: 256 } }, size: 1 });
      assert.equal(put.name, "sdk-pool");
      assert.equal(put.size, 1);
      assert.equal(put.source, "api");
      assert.equal(put.spec.resources.memoryMb, 256);
      assert.ok((await tenant.pools.list()).some((p) => p.name === "sdk-pool"), "every key lists the pools");
      await eventually(async () => assert.equal((await admin.pools.get("sdk-pool")).ready, 1));

      await assert.rejects(tenant.pools.put("mine", { spec: {}, size: 1 }), (e: unknown) => {
        assert.ok(e instanceof AirlockError);
        assert.equal(e.status, 403);
        assert.equal(e.code, "forbidden");
        return true;
      });
      await assert.rejects(tenant.pools.delete("sdk-pool"), { status: 403 });
      await assert.rejects(admin.pools.put("bad", { spec: { name: "x" }, size: 1 }), { status: 400, field: "spec.name" });

      assert.equal((await admin.pools.delete("sdk-pool")).name, "sdk-pool");
      await assert.rejects(admin.pools.get("sdk-pool"), { status: 404 });
    });

    it("images: lists for every key, pull and prune need an admin key", async () => {
      const admin = d().client("admin");
      const tenant = d().client();
      const images = await tenant.images.list();
      assert.ok(Array.isArray(images));
      assert.deepEqual(await admin.images.list(), images);
      await assert.rejects(tenant.images.get("docker.io/library/none:0"), { status: 404 });
      await assert.rejects(tenant.images.pull("docker.io/library/python:3.12"), { status: 403, code: "forbidden" });
      await assert.rejects(tenant.images.prune(), { status: 403 });
      await assert.rejects(admin.images.pull("NOT A REF"), { status: 400, field: "ref" });
      const pruned = await admin.images.prune();
      assert.ok(Array.isArray(pruned.refs));
      assert.equal(typeof pruned.bytesFreed, "number");
    });

    it("volumes, templates, tenants, capabilities, health, the OpenAPI document, Prometheus", async () => {
      const c = d().client();
      assert.deepEqual(await c.volumes.list(), []);
      // The host template is built in; the config defines no other.
      assert.deepEqual((await c.templates.list()).map((t) => t.name), ["host"]);
      const [me, ...rest] = await c.tenants.list();
      assert.equal(me?.name, "t1");
      assert.deepEqual(rest, []);
      const all = (await d().client("admin").tenants.list()).map((t) => t.name);
      for (const t of ["t1", "t2", "limited"]) assert.ok(all.includes(t), `${t} in ${all}`);
      const limited = (await d().client("limited").tenants.list())[0];
      assert.equal(limited?.quota.maxSandboxes, 1);

      const caps = await c.capabilities();
      assert.equal(caps.defaultIsolation, "process");
      assert.equal(caps.levels.find((l) => l.level === "process")?.available, true);
      assert.equal(caps.features.gpu, false);
      assert.equal((await c.health()).status, "ok");
      const doc = await c.openapi();
      assert.equal(doc.openapi, "3.1.0");
      assert.match(await c.prometheusMetrics(), /^airlock_api_connections \d+$/m);
    });

    it("webhooks: create, test (a signed delivery received and verified), deliveries, get, list, delete", async () => {
      const c = d().client();
      const received: { headers: IncomingMessage["headers"]; body: string }[] = [];
      const server = createServer((req, res) => {
        let body = "";
        req.setEncoding("utf8");
        req.on("data", (ch: string) => (body += ch));
        req.on("end", () => {
          received.push({ headers: req.headers, body });
          res.writeHead(204).end();
        });
      });
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      try {
        const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
        const secret = "a-secret-of-at-least-16-chars";
        const wh = await c.webhooks.create({ url, secret, description: "sdk test" });
        assert.match(wh.id, /^whk_/);
        assert.equal(wh.secret, secret);
        assert.equal(wh.url, url);
        const delivery = await c.webhooks.test(wh.id);
        assert.equal(delivery.eventType, "webhook.test");
        await eventually(async () => assert.equal(received.length, 1));
        const got = received[0]!;
        const payload = await verifyWebhook(secret, got.headers as Record<string, string>, got.body);
        assert.equal(payload.webhookId, wh.id);
        assert.equal(payload.event.type, "webhook.test");
        await assert.rejects(verifyWebhook("another-secret-16chars", got.headers as Record<string, string>, got.body), (e: unknown) => e instanceof WebhookVerificationError && e.reason === "signature");
        await assert.rejects(verifyWebhook(secret, got.headers as Record<string, string>, got.body + " "), WebhookVerificationError);
        await assert.rejects(verifyWebhook(secret, got.headers as Record<string, string>, got.body, { now: new Date(Date.now() + 3_600_000) }), (e: unknown) => e instanceof WebhookVerificationError && e.reason === "timestamp");

        await eventually(async () => assert.equal((await c.webhooks.deliveries(wh.id, { limit: 10 }))[0]?.status, "delivered"));
        assert.equal((await c.webhooks.get(wh.id)).delivered, 1);
        assert.equal((await c.webhooks.get(wh.id)).secret, undefined, "the secret is shown once");
        assert.ok((await c.webhooks.list()).some((w) => w.id === wh.id));
        assert.equal((await c.webhooks.delete(wh.id)).id, wh.id);
        await assert.rejects(c.webhooks.get(wh.id), { status: 404 });
      } finally {
        await new Promise((r) => server.close(r));
      }
    });
  });
}
