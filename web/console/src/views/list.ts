// The sandboxes: a live list (polled), each live one with small CPU and memory charts from its
// metrics, filters (status, agent, metadata), the create form, and the actions on each.

import type { Metrics, Sandbox, SandboxStatus } from "../../../../sdk/typescript/src/index.js";
import { aborted, act, errorBox, every, type Session } from "../app.js";
import { Chart } from "../chart.js";
import { ago, badge, bytes, h, replace } from "../dom.js";
import { createForm } from "./create.js";

/** live are the statuses whose sandbox has processes to measure. */
export const live = new Set<string>(["ready", "running", "paused"]);
const statuses: SandboxStatus[] = ["provisioning", "ready", "running", "paused", "completed", "failed", "terminated"];

/** How many samples a row's charts span (1 s each). */
const slots = 60;

interface Row {
  tr: HTMLTableRowElement;
  cpu: Chart;
  mem: Chart;
  cpuText: HTMLElement;
  memText: HTMLElement;
  samples: Metrics["recent"];
}

export function listView(s: Session, el: HTMLElement, signal: AbortSignal): void {
  const status = h("select", { id: "f-status", "aria-label": "status" }, h("option", { value: "" }, "any status"), h("option", { value: "live" }, "live"), statuses.map((v) => h("option", { value: v }, v)));
  const agent = h("input", { id: "f-agent", placeholder: "agent ID", "aria-label": "agent ID" });
  const meta = h("input", { id: "f-meta", placeholder: "metadata k=v, k=v", "aria-label": "metadata" });
  const formBox = h("div", { id: "create-box", hidden: true });
  const newButton = h("button", { class: "primary", id: "new-sandbox" }, "New sandbox");
  newButton.addEventListener("click", () => {
    formBox.hidden = !formBox.hidden;
    if (!formBox.hidden) replace(formBox, createForm(s, () => ((formBox.hidden = true), void refresh())));
  });
  const tbody = h("tbody", { id: "sandbox-rows" });
  const problem = h("div", { id: "list-error" });
  const count = h("span", { class: "muted", id: "sandbox-count" });
  el.append(
    h("div", { class: "toolbar" }, h("h2", {}, "Sandboxes"), count, h("span", { class: "spacer" }), status, agent, meta, newButton),
    formBox,
    problem,
    h(
      "table",
      { class: "list", id: "sandboxes" },
      h("thead", {}, h("tr", {}, ["sandbox", "status", "level", "age", "CPU", "memory", ""].map((c) => h("th", {}, c)))),
      tbody,
    ),
  );
  const rows = new Map<string, Row>();

  const query = () => {
    const md: Record<string, string> = {};
    for (const kv of meta.value.split(",")) {
      const [k, ...v] = kv.trim().split("=");
      if (k) md[k] = v.join("=");
    }
    const st = (status.value === "live" ? [...live] : status.value ? [status.value] : undefined) as SandboxStatus[] | undefined;
    return { status: st, agentId: agent.value.trim() || undefined, metadata: Object.keys(md).length ? md : undefined, signal };
  };

  const refresh = async () => {
    let list: Sandbox[];
    try {
      list = await s.client.sandboxes.list(query());
      replace(problem);
    } catch (e) {
      if (!aborted(e, signal)) replace(problem, errorBox(e));
      return;
    }
    replace(count, `${list.length}`);
    for (const tr of tbody.querySelectorAll("tr:not([data-id])")) tr.remove();
    const seen = new Set<string>();
    list.forEach((sb, i) => {
      seen.add(sb.id);
      let row = rows.get(sb.id);
      if (!row) {
        row = newRow();
        rows.set(sb.id, row);
      }
      fillRow(s, row, sb, refresh);
      if (tbody.children[i] !== row.tr) tbody.insertBefore(row.tr, tbody.children[i] ?? null);
    });
    for (const [id, row] of rows) {
      if (!seen.has(id)) {
        row.tr.remove();
        rows.delete(id);
      }
    }
    if (list.length === 0) replace(tbody, h("tr", {}, h("td", { colspan: 7, class: "muted" }, "No sandboxes. Make one with New sandbox.")));
    await Promise.all(list.filter((sb) => live.has(sb.status)).slice(0, 32).map((sb) => sample(s, sb, rows.get(sb.id), signal)));
  };
  for (const f of [status, agent, meta]) f.addEventListener("change", () => void refresh());
  every(2000, signal, refresh);
}

function newRow(): Row {
  const cpu = new Chart({ width: 120, height: 28, slots, series: ["s-cpu"], title: "CPU" });
  const mem = new Chart({ width: 120, height: 28, slots, series: ["s-mem"], title: "memory" });
  cpu.el.classList.add("spark-cpu");
  mem.el.classList.add("spark-mem");
  return { tr: h("tr", {}), cpu, mem, cpuText: h("span", { class: "spark-value" }), memText: h("span", { class: "spark-value" }), samples: [] };
}

/** fillRow writes a sandbox's cells; the charts stay the row's own. */
function fillRow(s: Session, row: Row, sb: Sandbox, refresh: () => Promise<void>): void {
  const id = sb.id;
  row.tr.dataset.id = id;
  row.tr.dataset.status = sb.status;
  const btn = (label: string, f: () => Promise<unknown>, cls = "") => {
    const b = h("button", { class: `small ${cls}`, "data-action": label }, label);
    b.addEventListener("click", () => void act(b, `${label} ${id}`, f).then(refresh));
    return b;
  };
  const actions: HTMLElement[] = [];
  if (sb.status === "paused") actions.push(btn("resume", () => s.client.sandboxes.resume(id)));
  if (sb.status === "ready" || sb.status === "running") actions.push(btn("pause", () => s.client.sandboxes.pause(id)));
  if (live.has(sb.status)) {
    actions.push(btn("snapshot", () => s.client.snapshots.create(id, { name: `console-${new Date().toISOString().slice(11, 19)}` })));
    actions.push(btn("fork", () => s.client.snapshots.fork(id, { count: 1 })));
  }
  if (sb.status !== "terminated") actions.push(btn("terminate", () => s.client.sandboxes.terminate(id), "danger"));
  else actions.push(h("a", { href: `#/replay/${id}`, class: "small" }, "replay"));
  const name = h("td", {}, h("a", { href: `#/sandboxes/${id}`, class: "sbx-link" }, sb.name || id), sb.name ? h("div", { class: "muted mono" }, id) : null);
  const charts = live.has(sb.status)
    ? [h("td", { class: "spark" }, row.cpu.el, row.cpuText), h("td", { class: "spark" }, row.mem.el, row.memText)]
    : [h("td", { class: "muted" }, "–"), h("td", { class: "muted" }, "–")];
  replace(
    row.tr,
    name,
    h("td", {}, badge(sb.status), sb.reason && sb.reason !== sb.status ? h("div", { class: "muted" }, sb.reason) : null),
    h("td", {}, sb.isolation ?? ""),
    h("td", { title: sb.createdAt }, ago(sb.createdAt)),
    charts,
    h("td", { class: "actions" }, actions),
  );
}

/** sample reads a live sandbox's metrics into its row's charts. */
async function sample(s: Session, sb: Sandbox, row: Row | undefined, signal: AbortSignal): Promise<void> {
  if (!row) return;
  try {
    const m = await s.client.sandboxes.metrics(sb.id, { signal });
    row.samples = m.recent.length ? m.recent : [m.current];
  } catch {
    return; // ended meanwhile, or paused: the row says so
  }
  const xs = row.samples.slice(-slots);
  const last = xs.at(-1);
  // A young sandbox's few samples span the chart (at least 10 slots), an older one's last minute.
  const cpus = xs.map((x) => x.cpuPercent);
  const mems = xs.map((x) => x.memoryBytes);
  row.cpu.set([cpus], Math.max(10, ...cpus) * 1.15, "", Math.max(10, xs.length));
  row.mem.set([mems], Math.max(...mems) * 1.25, "", Math.max(10, xs.length));
  replace(row.cpuText, `${(last?.cpuPercent ?? 0).toFixed(0)}%`);
  replace(row.memText, bytes(last?.memoryBytes ?? 0));
  row.cpu.el.setAttribute("aria-label", `CPU ${Math.round(last?.cpuPercent ?? 0)}%`);
  row.mem.el.setAttribute("aria-label", `memory ${bytes(last?.memoryBytes ?? 0)} of ${bytes(last?.memoryLimitBytes ?? 0)}`);
}
