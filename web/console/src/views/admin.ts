// The daemon: its levels, tenants and quotas, warm pools, images (daemon-wide: an admin key
// changes them, a tenant key lists them and gets the API's 403 on a change), the tenant's
// webhooks with their delivery log, and the tools the key may call (the tool gateway), with a
// call form.

import type { PoolStatus, Tenant, Tool, Webhook } from "../../../../sdk/typescript/src/index.js";
import { act, errorBox, type Session } from "../app.js";
import { ago, badge, bytes, clock, h, replace } from "../dom.js";

/** section is a titled part of the page that loads itself and can reload. */
function section(el: HTMLElement, id: string, title: string, load: (body: HTMLElement, reload: () => void) => Promise<void>): void {
  const body = h("div", { id });
  el.append(h("section", { class: "admin" }, h("h3", {}, title), body));
  const reload = () => void load(body, reload).catch((e) => replace(body, errorBox(e)));
  reload();
}

function table(head: string[], rows: (Node | string)[][], id?: string): HTMLElement {
  return h("table", { class: "list", id }, h("thead", {}, h("tr", {}, head.map((c) => h("th", {}, c)))), h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c) => h("td", {}, c))))));
}

const pct = (n: number) => `${Math.round(n * 100)}%`;

export function adminView(s: Session, el: HTMLElement): void {
  el.append(h("div", { class: "toolbar" }, h("h2", {}, "Daemon")));
  const c = s.client;

  section(el, "levels", "Isolation levels", async (body) => {
    const caps = await c.capabilities();
    replace(body, h("p", { class: "muted" }, `airlock ${caps.version}; default level ${caps.defaultIsolation}`),
      table(["level", "", "why not, and how to fix it"], caps.levels.map((l) => [l.level, badge(l.available ? "available" : "unavailable", l.available ? "ok" : "failed"), [l.reason, l.fix].filter(Boolean).join(" — ")])));
  });

  section(el, "tenants", "Tenants and quotas", async (body) => {
    const ts: Tenant[] = await c.tenants.list();
    const of = (used: number, max?: number, unit = "") => `${used}${unit}${max ? ` of ${max}${unit}` : ""}`;
    replace(body, table(["tenant", "sandboxes", "memory", "disk", "stored", "requests/s"], ts.map((t) => [
      t.name, of(t.usage.sandboxes, t.quota.maxSandboxes), of(t.usage.memoryMb, t.quota.maxMemoryMb, " MB"), of(t.usage.diskMb, t.quota.maxDiskMb, " MB"),
      of(t.usage.storedMb, t.quota.maxStoredMb, " MB"), `${t.quota.requestsPerSecond ?? "–"} (burst ${t.quota.burst ?? "–"})`]), "tenants-table"));
  });

  section(el, "pools", "Warm pools", async (body, reload) => {
    const ps: PoolStatus[] = await c.pools.list();
    const name = h("input", { placeholder: "name", "aria-label": "pool name", id: "pool-name" });
    const size = h("input", { placeholder: "size", "aria-label": "pool size", id: "pool-size", value: "1" });
    const mem = h("input", { placeholder: "memory MB", "aria-label": "pool memory", id: "pool-mem" });
    const put = h("button", { type: "submit", class: "primary" }, "Put pool");
    const form = h("form", { class: "toolbar" }, name, size, mem, put, h("span", { class: "muted" }, "(admin key)"));
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const memoryMb = mem.value.trim() ? Number(mem.value) : undefined;
      void act(put, `pool ${name.value} put`, () => c.pools.put(name.value.trim(), { size: Number(size.value), spec: memoryMb ? { resources: { memoryMb } } : {} })).then(reload);
    });
    replace(body, form, ps.length === 0 ? h("p", { class: "muted" }, "No warm pools.") : table(["pool", "source", "ready / size", "warming", "claims", "misses", "hit rate", "recycled", "last error", ""], ps.map((p) => {
      const rm = h("button", { class: "small danger" }, "delete");
      rm.addEventListener("click", () => void act(rm, `pool ${p.name} deleted`, () => c.pools.delete(p.name)).then(reload));
      return [p.name, p.source, `${p.ready} / ${p.size}`, String(p.warming), String(p.claims), String(p.misses), pct(p.hitRate), String(p.recycled), p.lastError ?? "", p.source === "api" ? rm : ""];
    }), "pools-table"));
  });

  section(el, "images", "Images", async (body, reload) => {
    const imgs = await c.images.list();
    const ref = h("input", { placeholder: "python:3.12-slim", "aria-label": "image reference", id: "image-ref" });
    const pull = h("button", { type: "submit", class: "primary" }, "Pull");
    const form = h("form", { class: "toolbar" }, ref, pull, h("span", { class: "muted" }, "(admin key)"));
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      void act(pull, `pulled ${ref.value}`, () => c.images.pull(ref.value.trim())).then(reload);
    });
    replace(body, form, imgs.length === 0 ? h("p", { class: "muted" }, "No images in the store.") : table(["ref", "digest", "size", "pulled", ""], imgs.map((i) => {
      const rm = h("button", { class: "small danger" }, "remove");
      rm.addEventListener("click", () => void act(rm, `removed ${i.ref}`, () => c.images.remove(i.ref)).then(reload));
      return [i.ref, h("span", { class: "mono" }, i.digest.slice(0, 19)), bytes(i.size), `${ago(i.pulled)} ago`, rm];
    }), "images-table"));
  });

  section(el, "webhooks", "Webhooks", async (body, reload) => {
    const hooks: Webhook[] = await c.webhooks.list();
    const url = h("input", { placeholder: "https://hooks.example.com/airlock", "aria-label": "webhook URL", id: "hook-url" });
    const events = h("input", { placeholder: "sandbox., limit.", "aria-label": "event types", id: "hook-events" });
    const add = h("button", { type: "submit", class: "primary" }, "Add webhook");
    const secret = h("div", { class: "muted", id: "hook-secret" });
    const form = h("form", { class: "toolbar" }, url, events, add);
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const evs = events.value.split(/[\s,]+/).filter(Boolean);
      void act(add, "webhook added", () => c.webhooks.create({ url: url.value.trim(), events: evs.length ? evs : undefined })).then((w) => {
        if (w) replace(secret, "Its signing secret, shown only now: ", h("code", {}, w.secret ?? ""));
        else return;
        setTimeout(reload, 0);
      });
    });
    const log = h("div", { id: "deliveries" });
    replace(body, form, secret, hooks.length === 0 ? h("p", { class: "muted" }, "No webhooks.") : table(["URL", "events", "delivered", "failed", "pending", ""], hooks.map((w) => {
      const show = h("button", { class: "small" }, "deliveries");
      show.addEventListener("click", () => void c.webhooks.deliveries(w.id, { limit: 50 }).then((ds) => replace(log, h("h4", {}, `Deliveries of ${w.url}`),
        table(["when", "event", "status", "attempts", "answer"], ds.map((d) => [clock(d.createdAt), d.eventType, badge(d.status), String(d.attempts), d.error ?? (d.responseStatus ? String(d.responseStatus) : "")]))), (e) => replace(log, errorBox(e))));
      const test = h("button", { class: "small" }, "test");
      test.addEventListener("click", () => void act(test, "test delivery sent", () => c.webhooks.test(w.id)).then(() => show.click()));
      const rm = h("button", { class: "small danger" }, "delete");
      rm.addEventListener("click", () => void act(rm, "webhook deleted", () => c.webhooks.delete(w.id)).then(reload));
      return [w.url, w.events.join(", "), String(w.delivered), String(w.failed), String(w.pending), h("span", { class: "actions" }, show, test, rm)];
    }), "webhooks-table"), log);
  });

  section(el, "tools", "Tools", async (body) => {
    const tools: Tool[] = await c.tools.list();
    const name = h("select", { "aria-label": "tool", id: "tool-name" }, tools.map((t) => h("option", { value: t.name }, t.name)));
    const args = h("input", { placeholder: '{"code": "print(6*7)"}', "aria-label": "arguments (JSON)", id: "tool-args", class: "wide" });
    const call = h("button", { type: "submit", class: "primary" }, "Call");
    const out = h("pre", { class: "output", id: "tool-result" });
    const form = h("form", { class: "toolbar" }, name, args, call);
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      let parsed: Record<string, unknown>;
      try {
        parsed = args.value.trim() ? (JSON.parse(args.value) as Record<string, unknown>) : {};
      } catch (e) {
        replace(out, `arguments: ${(e as Error).message}`);
        return;
      }
      void act(call, `${name.value} called`, () => c.tools.call(name.value, parsed)).then((r) => {
        if (!r) return;
        const text = r.content.map((x) => x.text ?? x.uri ?? `[${x.type}]`).join("\n");
        replace(out, `${r.isError ? "error" : "ok"} in ${r.durationMs} ms\n${text}`);
      });
    });
    replace(body, tools.length === 0 ? h("p", { class: "muted" }, "No tools this key may call.") : form, out,
      table(["tool", "backend", "source", "rate limit", "description"], tools.map((t) => [t.name, t.backend, t.source, t.rateLimit ?? "–", t.description ?? ""]), "tools-table"));
  });
}
