// The network of a sandbox: every DNS answer and connection of its egress (allowed or denied,
// the rule, the bytes), followed live from the audit log, and its policy, changed live.

import type { Event as AuditEvent, Network, Sandbox } from "../../../../sdk/typescript/src/index.js";
import { aborted, errorBox, message, toast, type Session } from "../app.js";
import { badge, bytes, clock, h, replace } from "../dom.js";
import { live } from "./list.js";

export function networkTab(s: Session, sb: Sandbox, el: HTMLElement, signal: AbortSignal): void {
  const rows = h("tbody", { id: "net-rows" });
  const state = h("div", { class: "muted", id: "net-state" });
  if (live.has(sb.status)) el.append(policyEditor(s, sb));
  el.append(
    h("h3", {}, "Decisions"),
    state,
    h("table", { class: "list", id: "network" },
      h("thead", {}, h("tr", {}, ["time", "kind", "destination", "decision", "rule", "out", "in", "exec"].map((c) => h("th", {}, c)))), rows),
  );
  const add = (e: AuditEvent) => {
    const d = (e.data ?? {}) as Record<string, unknown>;
    const kind = e.type.replace(/^network\./, "");
    const dest = kind === "policy" ? `${d.egressPolicy ?? ""} ${((d.allowedDomains as string[] | undefined) ?? []).join(", ")}` : `${d.name ?? ""}${d.address ? ` ${d.address}` : ""}${d.port ? `:${d.port}` : ""}`;
    const decision = typeof d.decision === "string" ? d.decision : "";
    rows.prepend(
      h("tr", { "data-decision": decision, "data-kind": kind },
        h("td", {}, clock(e.time)),
        h("td", {}, kind),
        h("td", { class: "mono" }, dest.trim()),
        h("td", {}, decision ? badge(decision === "allow" ? "allowed" : "denied", decision) : ""),
        h("td", { title: String(d.reason ?? "") }, String(d.rule ?? "")),
        h("td", { class: "num" }, typeof d.bytesOut === "number" ? bytes(d.bytesOut) : ""),
        h("td", { class: "num" }, typeof d.bytesIn === "number" ? bytes(d.bytesIn) : ""),
        h("td", { class: "mono muted" }, e.executionId ?? "")),
    );
  };
  void (async () => {
    try {
      // What happened so far, then everything after it as it is written.
      let after = 0;
      for (;;) {
        const page = await s.client.sandboxes.events(sb.id, { type: "network.", after, limit: 1000, signal });
        page.events.forEach(add);
        if (page.events.length < 1000) {
          after = page.next;
          break;
        }
        after = page.next;
      }
      if (sb.status === "terminated") return replace(state, "the sandbox has ended");
      replace(state, "following…");
      for await (const e of s.client.sandboxes.followEvents(sb.id, { type: "network.", after, signal })) add(e);
      replace(state, "the sandbox has ended");
    } catch (e) {
      if (!aborted(e, signal)) replace(state, errorBox(e));
    }
  })();
}

/** policyEditor changes the sandbox's network policy live (PUT .../network). */
function policyEditor(s: Session, sb: Sandbox): HTMLElement {
  const n = sb.network;
  const egress = h("select", { id: "policy-egress", "aria-label": "egress policy" }, ["none", "restricted", "open"].map((v) => h("option", { value: v, selected: v === n.egressPolicy }, v)));
  const domains = h("textarea", { id: "policy-domains", rows: 2, placeholder: "pypi.org, *.github.com", "aria-label": "allowed domains" });
  domains.value = (n.allowedDomains ?? []).join(", ");
  const local = h("input", { type: "checkbox", id: "policy-local", checked: n.blockLocalNetwork !== false });
  const problem = h("div", { class: "error", role: "alert", id: "policy-error", hidden: true });
  const save = h("button", { type: "submit", class: "primary", id: "policy-save" }, "Apply now");
  const form = h("form", { class: "policy", id: "policy" },
    h("h3", {}, "Policy"),
    h("label", {}, "egress ", egress),
    h("label", {}, "allowed domains ", domains),
    h("label", {}, local, " block local networks"),
    save, problem);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    problem.hidden = true;
    const list = domains.value.split(/[\s,]+/).filter(Boolean);
    // Credentials are sent back as read: without values, the daemon keeps theirs.
    const policy: Network = { egressPolicy: egress.value as Network["egressPolicy"], allowedDomains: list, blockLocalNetwork: local.checked, credentials: n.credentials };
    save.disabled = true;
    s.client.sandboxes.network
      .update(sb.id, policy)
      .then(() => toast("network policy applied"))
      .catch((e) => {
        problem.hidden = false;
        replace(problem, message(e));
      })
      .finally(() => (save.disabled = false));
  });
  return form;
}
