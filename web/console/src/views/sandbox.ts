// One sandbox: its header and actions, then tabs: resources (live charts from the metrics
// samples), terminal, log (followed), files, network (decisions and the live policy), snapshots.

import type { MetricsSample, Sandbox } from "../../../../sdk/typescript/src/index.js";
import { aborted, act, errorBox, every, type Session } from "../app.js";
import { Chart } from "../chart.js";
import { ago, badge, bytes, clock, h, replace } from "../dom.js";
import { filesTab } from "./files.js";
import { live } from "./list.js";
import { networkTab } from "./network.js";
import { snapshotsTab } from "./snapshots.js";
import { terminalTab } from "./terminal.js";

type Tab = (s: Session, sb: Sandbox, el: HTMLElement, signal: AbortSignal) => void;
const tabs: [string, string, Tab][] = [
  ["overview", "Resources", overviewTab],
  ["terminal", "Terminal", terminalTab],
  ["logs", "Log", logsTab],
  ["files", "Files", filesTab],
  ["network", "Network", networkTab],
  ["snapshots", "Snapshots", snapshotsTab],
];

export async function sandboxView(s: Session, el: HTMLElement, signal: AbortSignal, [id = "", tab = "overview"]: string[]): Promise<void> {
  const sb = await s.client.sandboxes.get(id, { signal });
  const head = h("div", { class: "sbx-head" });
  const drawHead = (sb: Sandbox) => {
    const btn = (label: string, f: () => Promise<unknown>, cls = "") => {
      const b = h("button", { class: cls, "data-action": label }, label);
      b.addEventListener("click", () => void act(b, `${label} ${id}`, f).then(() => s.client.sandboxes.get(id).then(drawHead)));
      return b;
    };
    replace(
      head,
      h("div", { class: "toolbar" }, h("h2", {}, sb.name || sb.id), badge(sb.status), h("span", { class: "muted mono" }, sb.id), h("span", { class: "spacer" }),
        sb.status === "paused" ? btn("resume", () => s.client.sandboxes.resume(id)) : null,
        sb.status === "ready" || sb.status === "running" ? btn("pause", () => s.client.sandboxes.pause(id)) : null,
        live.has(sb.status) ? btn("fork", () => s.client.snapshots.fork(id, { count: 1 })) : null,
        sb.status !== "terminated" ? btn("terminate", () => s.client.sandboxes.terminate(id), "danger") : null,
        h("a", { href: `#/replay/${id}`, class: "button" }, "Replay")),
      h("dl", { class: "facts" },
        fact("level", `${sb.isolation ?? ""}${sb.runtime ? ` (${sb.runtime})` : ""}`),
        fact("root", sb.image ?? sb.template ?? "host"),
        fact("resources", `${sb.resources.cpu ?? "?"} vCPU · ${sb.resources.memoryMb ?? "?"} MB · disk ${sb.resources.diskMb ?? "?"} MB`),
        fact("egress", `${sb.network.egressPolicy ?? ""}${sb.network.allowedDomains?.length ? `: ${sb.network.allowedDomains.join(", ")}` : ""}`),
        fact("created", `${ago(sb.createdAt)} ago`),
        fact("expires", sb.status === "terminated" ? "–" : `in ${ago(new Date(), new Date(sb.expiresAt).getTime())}`),
        sb.reason && sb.reason !== sb.status ? fact("reason", sb.reason) : null),
    );
  };
  drawHead(sb);
  const body = h("div", { class: "tab-body", id: `tab-${tab}` });
  el.append(
    head,
    h("div", { class: "tabs", role: "tablist" }, tabs.map(([name, label]) => h("a", { href: `#/sandboxes/${id}/${name}`, role: "tab", class: name === tab ? "active" : "", "data-tab": name }, label))),
    body,
  );
  const t = tabs.find(([name]) => name === tab);
  if (!t) return replace(body, errorBox(`no tab ${tab}`));
  t[2](s, sb, body, signal);
}

function fact(k: string, v: string): HTMLElement[] {
  return [h("dt", {}, k), h("dd", {}, v)];
}

/** A chart of the overview: its title, the current value's text, and the chart. */
function panel(title: string, chart: Chart, value: HTMLElement): HTMLElement {
  return h("figure", { class: "panel" }, h("figcaption", {}, h("span", {}, title), value), chart.el);
}

/** overviewTab charts the sandbox's metrics samples (1 s each, the last 5 minutes), live. */
function overviewTab(s: Session, sb: Sandbox, el: HTMLElement, signal: AbortSignal): void {
  if (!live.has(sb.status)) {
    el.append(h("p", { class: "muted" }, `The sandbox is ${sb.status}: it has no processes to measure. Its replay has its execs' usage.`));
    return;
  }
  const make = (id: string, title: string, series: string[]) => {
    const chart = new Chart({ width: 360, height: 120, slots: 120, series, axis: true, title, wide: true });
    chart.el.id = `chart-${id}`;
    const value = h("span", { class: "value", id: `value-${id}` });
    return { chart, value, el: panel(title, chart, value) };
  };
  const cpu = make("cpu", "CPU", ["s-cpu"]);
  const mem = make("memory", "memory", ["s-mem"]);
  const disk = make("disk", "disk", ["s-disk"]);
  const net = make("network", "network (tx, rx per second)", ["s-tx", "s-rx"]);
  const pids = make("pids", "processes", ["s-pids"]);
  const problem = h("div", {});
  el.append(problem, h("div", { class: "panels" }, cpu.el, mem.el, disk.el, net.el, pids.el));
  const rate = (xs: MetricsSample[], f: (x: MetricsSample) => number) =>
    xs.map((x, i) => (i === 0 ? 0 : Math.max(0, (f(x) - f(xs[i - 1]!)) / Math.max(0.001, (Date.parse(x.time) - Date.parse(xs[i - 1]!.time)) / 1000))));
  every(2000, signal, async () => {
    let xs: MetricsSample[];
    try {
      const m = await s.client.sandboxes.metrics(sb.id, { signal });
      xs = m.recent.length ? m.recent : [m.current];
      replace(problem);
    } catch (e) {
      if (!aborted(e, signal)) replace(problem, errorBox(e));
      return;
    }
    const last = xs.at(-1)!;
    const n = Math.max(30, xs.length); // a young sandbox's samples span the chart
    const cpuMax = 100 * (Number(sb.resources.cpu) || 1);
    cpu.chart.set([xs.map((x) => x.cpuPercent)], cpuMax, `${cpuMax}%`, n);
    replace(cpu.value, `${last.cpuPercent.toFixed(1)}%`);
    mem.chart.set([xs.map((x) => x.memoryBytes)], last.memoryLimitBytes, bytes(last.memoryLimitBytes), n);
    replace(mem.value, `${bytes(last.memoryBytes)} of ${bytes(last.memoryLimitBytes)} (peak ${bytes(last.memoryPeakBytes)})`);
    disk.chart.set([xs.map((x) => x.diskUsedBytes)], last.diskLimitBytes, bytes(last.diskLimitBytes), n);
    replace(disk.value, `${bytes(last.diskUsedBytes)} of ${bytes(last.diskLimitBytes)}`);
    const tx = rate(xs, (x) => x.networkTxBytes);
    const rx = rate(xs, (x) => x.networkRxBytes);
    net.chart.set([tx, rx], 0, `${bytes(Math.max(1, ...tx, ...rx))}/s`, n);
    replace(net.value, `tx ${bytes(last.networkTxBytes)} · rx ${bytes(last.networkRxBytes)}`);
    pids.chart.set([xs.map((x) => x.pids)], last.pidsLimit, String(last.pidsLimit), n);
    replace(pids.value, `${last.pids} of ${last.pidsLimit}`);
    el.dataset.updated = clock(last.time);
  });
}

/** logsTab follows the sandbox's log: output chunks and events, until it ends. */
function logsTab(s: Session, sb: Sandbox, el: HTMLElement, signal: AbortSignal): void {
  const pre = h("pre", { class: "log", id: "log" });
  const state = h("div", { class: "muted", id: "log-state" }, "following…");
  el.append(state, pre);
  void (async () => {
    try {
      for await (const e of s.client.sandboxes.logs(sb.id, { follow: true, signal })) {
        const stick = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
        const line = h("span", { class: `log-${e.stream}` }, e.stream === "event" ? `${clock(e.time)} ${e.event?.type ?? ""} ${e.message}\n` : (e.data ?? e.message));
        pre.append(line);
        if (stick) pre.scrollTop = pre.scrollHeight;
      }
      replace(state, "the sandbox has ended: the log is complete");
    } catch (e) {
      if (!aborted(e, signal)) replace(state, errorBox(e));
    }
  })();
}
