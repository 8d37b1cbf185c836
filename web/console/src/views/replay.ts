// The replay of a sandbox: its recorded history (GET .../replay) on a timeline with a scrubber —
// commands with their output and exit codes, file changes, network decisions, limit events,
// the execs' resource use as curves — and whether the audit log's hash chain verifies.

import type { AuditVerification, Replay, ReplayEntry } from "../../../../sdk/typescript/src/index.js";
import { errorBox, type Session } from "../app.js";
import { Chart } from "../chart.js";
import { append, badge, clock, command, duration, h, replace } from "../dom.js";

/** The colour class of an entry on the timeline, by its type. */
function kind(type: string): string {
  if (type.startsWith("exec.files") || type.startsWith("files.")) return "files";
  if (type.startsWith("exec.")) return "exec";
  if (type.startsWith("network.")) return "network";
  if (type.startsWith("limit.")) return "limit";
  if (type.startsWith("sandbox.")) return "lifecycle";
  return "other";
}

export async function replayView(s: Session, el: HTMLElement, signal: AbortSignal, [id = ""]: string[]): Promise<void> {
  const chain = h("div", { class: "chain", id: "chain" }, "verifying the audit log's hash chain…");
  el.append(h("div", { class: "toolbar" }, h("h2", {}, "Replay"), h("a", { href: `#/sandboxes/${id}`, class: "mono" }, id)), chain);
  const rp = await s.client.sandboxes.replay(id, { signal });
  void s.client.events.verify({ signal }).then((v) => chain.replaceWith(chainStatus(v, rp)), (e) => replace(chain, errorBox(e)));
  draw(el, rp, signal);
}

/** chainStatus says whether the chain is whole, and whether it covers this sandbox's events. */
function chainStatus(v: AuditVerification, rp: Replay): HTMLElement {
  const seqs = rp.entries.map((e) => e.seq);
  const last = Math.max(0, ...seqs);
  const checked = `events #${v.fromSeq}–#${v.headSeq}, checked ${clock(v.checkedAt)}`;
  if (v.intact) {
    const covered = last <= v.headSeq ? `all ${seqs.length} events of this sandbox are covered` : `events of this sandbox after #${v.headSeq} came after the check`;
    return h("div", { class: "chain ok", id: "chain", "data-intact": "true" }, badge("verified", "ok"), ` The audit log's hash chain is intact (${checked}); ${covered}. Head hash `, h("code", { title: v.headHash }, v.headHash.slice(0, 16) + "…"));
  }
  const p = v.problem;
  const mine = p && seqs.includes(p.seq) ? " It is one of this sandbox's events." : "";
  return h("div", { class: "chain bad", id: "chain", "data-intact": "false" }, badge("broken", "failed"), ` The audit log's hash chain breaks at event #${p?.seq ?? "?"}: ${p?.reason ?? "unknown"}.${mine} (${checked})`);
}

function draw(el: HTMLElement, rp: Replay, signal: AbortSignal): void {
  const entries = rp.entries;
  const total = Math.max(1, ...entries.map((e) => e.offsetMs));
  const sb = rp.sandbox;
  // The execs' resource use, as a step curve over the timeline.
  const width = 900;
  const slots = 300;
  const at = (off: number) => Math.min(slots - 1, Math.floor((off / total) * (slots - 1)));
  const mem = new Array<number>(slots).fill(0);
  const cpu = new Array<number>(slots).fill(0);
  for (const e of entries) {
    if (e.type !== "exec.exited") continue;
    const d = e.event.data ?? {};
    const end = at(e.offsetMs);
    const start = at(Math.max(0, e.offsetMs - Number(d.durationMs ?? 0)));
    for (let i = start; i <= end; i++) {
      mem[i] = Math.max(mem[i]!, Number(d.peakMemoryMb ?? 0));
      cpu[i] = Math.max(cpu[i]!, Number(d.cpuTimeMs ?? 0));
    }
  }
  const memChart = new Chart({ width, height: 50, slots, series: ["s-mem"], axis: true, title: "peak memory of each exec", wide: true });
  memChart.el.id = "replay-memory";
  memChart.set([mem], 0, `peak memory of the execs, up to ${Math.round(Math.max(...mem))} MB`);
  const cpuChart = new Chart({ width, height: 50, slots, series: ["s-cpu"], axis: true, title: "CPU time of each exec", wide: true });
  cpuChart.el.id = "replay-cpu";
  cpuChart.set([cpu], 0, `CPU time of the execs, up to ${Math.max(...cpu)} ms`);
  // Markers: one per entry, coloured by kind.
  const strip = h("div", { class: "strip", id: "replay-strip" });
  for (const e of entries) {
    const m = h("span", { class: `mark k-${kind(e.type)}`, title: `${e.type} +${duration(e.offsetMs)}` });
    m.dataset.pos = String(Math.round((e.offsetMs / total) * 1000));
    strip.append(m);
  }
  const scrub = h("input", { type: "range", id: "scrubber", min: 0, max: total, value: total, step: 1, "aria-label": "time" });
  const now = h("span", { class: "mono", id: "scrub-at" });
  const play = h("button", { class: "small", id: "play" }, "▶ play");
  const list = h("ol", { class: "timeline", id: "timeline" }, entries.map(entry));
  el.append(
    h("p", { class: "muted" }, `${sb.name || sb.id}: ${sb.status}${sb.reason ? ` (${sb.reason})` : ""}, ${entries.length} events over ${duration(total)}${rp.truncated ? " (the history is longer: the first 100,000 events)" : ""}`),
    h("div", { class: "legend" }, ["exec", "files", "network", "limit", "lifecycle"].map((k) => h("span", { class: `mark k-${k}` }, k))),
    strip, memChart.el, cpuChart.el,
    h("div", { class: "toolbar" }, play, scrub, now),
    list,
  );
  // Marker positions are data, placed by script (the CSP allows no style attribute).
  for (const m of strip.querySelectorAll<HTMLElement>(".mark")) m.style.left = `${Number(m.dataset.pos) / 10}%`;
  const items = [...list.children] as HTMLElement[];
  const seek = (t: number) => {
    let current: HTMLElement | undefined;
    entries.forEach((e, i) => {
      const past = e.offsetMs <= t;
      items[i]!.classList.toggle("future", !past);
      if (past) current = items[i];
    });
    const ran = entries.filter((e) => e.type === "exec.exited" && e.offsetMs <= t).length;
    replace(now, `+${duration(t)} · ${ran} command${ran === 1 ? "" : "s"} done`);
    for (const c of list.querySelectorAll(".current")) c.classList.remove("current");
    current?.classList.add("current");
    return current;
  };
  /** show scrolls the timeline (only it, not the page) to an entry. */
  const show = (li: HTMLElement | undefined) => {
    if (li && (li.offsetTop < list.scrollTop || li.offsetTop + li.offsetHeight > list.scrollTop + list.clientHeight)) list.scrollTop = li.offsetTop - list.clientHeight / 2;
  };
  scrub.addEventListener("input", () => show(seek(Number(scrub.value))));
  let timer: ReturnType<typeof setInterval> | undefined;
  play.addEventListener("click", () => {
    if (timer) return stop();
    let t = Number(scrub.value) >= total ? 0 : Number(scrub.value);
    const step = total / 200;
    replace(play, "❚❚ pause");
    timer = setInterval(() => {
      t = Math.min(total, t + step);
      scrub.value = String(t);
      show(seek(t));
      if (t >= total) stop();
    }, 50);
  });
  const stop = () => {
    clearInterval(timer);
    timer = undefined;
    replace(play, "▶ play");
  };
  signal.addEventListener("abort", stop, { once: true });
  seek(total);
}

/** entry shows one moment of the history. */
function entry(e: ReplayEntry): HTMLElement {
  const d = (e.event.data ?? {}) as Record<string, unknown>;
  const li = h("li", { class: `k-${kind(e.type)}`, "data-type": e.type, "data-seq": e.seq });
  const head = h("div", { class: "when" }, h("span", { class: "mono muted" }, `+${duration(e.offsetMs)}`), " ", badge(e.type, kind(e.type)));
  li.append(head);
  const x = e.exec;
  switch (true) {
    case e.type === "exec.exited" && x !== undefined: {
      const r = x.result;
      append(li, [
        h("div", { class: "cmd" }, h("code", {}, command(x.command))),
        h("div", { class: "muted" }, r ? `exit ${r.exitCode} · ${duration(r.durationMs)} · peak ${Math.round(r.resourceUsage.peakMemoryMb * 10) / 10} MB · CPU ${r.resourceUsage.cpuTimeMs} ms${r.timedOut ? " · timed out" : ""}${r.oomKilled ? " · killed at its memory limit" : ""}` : x.status),
        r?.stdout ? h("pre", { class: "out" }, r.stdout) : null,
        r?.stderr ? h("pre", { class: "err" }, r.stderr) : null,
      ]);
      break;
    }
    case e.type === "exec.started":
      li.append(h("div", { class: "muted" }, "started ", h("code", {}, command(d.command as string[] | undefined))));
      break;
    case e.type === "exec.files" || e.type === "files.changed":
      for (const k of ["created", "modified", "deleted"]) for (const p of (d[k] as string[] | undefined) ?? []) li.append(h("div", {}, badge(k), " ", h("span", { class: "mono" }, p)));
      break;
    case e.type.startsWith("network."):
      li.append(h("div", {}, d.decision ? badge(d.decision === "allow" ? "allowed" : "denied", String(d.decision)) : null, ` ${d.name ?? ""} ${d.address ?? ""}${d.port ? `:${d.port}` : ""} `, h("span", { class: "muted" }, String(d.rule ?? d.reason ?? ""))));
      break;
    case e.type === "sandbox.status":
      li.append(h("div", {}, `${d.from ?? ""} → `, badge(String(d.to ?? "")), h("span", { class: "muted" }, d.reason ? ` ${d.reason}` : "")));
      break;
    default:
      li.append(h("div", { class: "muted" }, e.event.message ?? ""));
  }
  return li;
}

