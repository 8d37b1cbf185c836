// A sandbox's snapshots: take one, restore one into the sandbox, start a new sandbox from one,
// fork, delete.

import type { Sandbox, Snapshot } from "../../../../sdk/typescript/src/index.js";
import { aborted, act, errorBox, type Session } from "../app.js";
import { ago, bytes, h, replace } from "../dom.js";
import { live } from "./list.js";

export function snapshotsTab(s: Session, sb: Sandbox, el: HTMLElement, signal: AbortSignal): void {
  const rows = h("tbody", { id: "snapshot-rows" });
  const problem = h("div", {});
  const refresh = async () => {
    let list: Snapshot[];
    try {
      list = await s.client.snapshots.list(sb.id, { signal });
      replace(problem);
    } catch (e) {
      if (!aborted(e, signal)) replace(problem, errorBox(e));
      return;
    }
    const btn = (label: string, f: () => Promise<unknown>, cls = "") => {
      const b = h("button", { class: `small ${cls}`, "data-action": label }, label);
      b.addEventListener("click", () => void act(b, label, f).then(refresh));
      return b;
    };
    replace(
      rows,
      list.length === 0 ? h("tr", {}, h("td", { colspan: 5, class: "muted" }, "No snapshots yet.")) : null,
      list.map((sn) =>
        h("tr", { "data-snapshot": sn.snapshotId },
          h("td", {}, sn.name, h("div", { class: "muted mono" }, sn.snapshotId), sn.description ? h("div", { class: "muted" }, sn.description) : null),
          h("td", {}, `${ago(sn.createdAt)} ago`),
          h("td", { class: "num" }, `${bytes(sn.layerBytes)}${sn.memory ? " + memory" : ""}`),
          h("td", {}, sn.isolation),
          h("td", { class: "actions" },
            live.has(sb.status) ? btn("restore", () => s.client.snapshots.restore(sb.id, sn.snapshotId)) : null,
            btn("new sandbox", async () => {
              const n = await s.client.sandboxes.create({ fromSnapshot: sn.snapshotId }, { wait: false });
              location.hash = `#/sandboxes/${n.id}`;
            }),
            btn("delete", () => s.client.snapshots.delete(sn.snapshotId), "danger"))),
      ),
    );
  };
  const name = h("input", { id: "snap-name", placeholder: "name", "aria-label": "snapshot name" });
  const desc = h("input", { id: "snap-desc", placeholder: "description", "aria-label": "description" });
  const take = h("button", { type: "submit", class: "primary", id: "snap-take" }, "Take snapshot");
  const form = h("form", { class: "toolbar" }, name, desc, take);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    void act(take, "snapshot taken", () => s.client.snapshots.create(sb.id, { name: name.value.trim() || undefined, description: desc.value.trim() || undefined })).then(() => {
      form.reset();
      return refresh();
    });
  });
  if (live.has(sb.status)) el.append(form);
  el.append(problem,
    h("table", { class: "list", id: "snapshots" }, h("thead", {}, h("tr", {}, ["snapshot", "taken", "size", "level", ""].map((c) => h("th", {}, c)))), rows));
  void refresh();
}
