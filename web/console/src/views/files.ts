// The files of a sandbox: a directory listing (download, upload, remove), with the changes
// each exec made (from the audit log's exec.files events, and files.changed between execs)
// marked in the listing and listed by exec.

import type { Event as AuditEvent, FileInfo, Sandbox } from "../../../../sdk/typescript/src/index.js";
import { aborted, act, errorBox, type Session } from "../app.js";
import { badge, bytes, clock, command, download, h, replace } from "../dom.js";
import { live } from "./list.js";

/** A path's latest change: created, modified or deleted, by which exec ("" between execs). */
interface Mark {
  kind: "created" | "modified" | "deleted";
  exec: string;
}

const join = (dir: string, name: string) => (dir.endsWith("/") ? dir + name : `${dir}/${name}`);
const parent = (dir: string) => dir.replace(/\/[^/]+\/?$/, "") || "/";

export function filesTab(s: Session, sb: Sandbox, el: HTMLElement, signal: AbortSignal): void {
  const where = h("input", { id: "files-path", value: "/workspace", "aria-label": "directory" });
  const upload = h("input", { type: "file", id: "files-upload", multiple: true, "aria-label": "upload files" });
  const rows = h("tbody", { id: "files-rows" });
  const problem = h("div", {});
  const changes = h("div", { id: "changes" });
  let marks = new Map<string, Mark>();
  const canAct = live.has(sb.status);

  const list = async (dir = where.value) => {
    where.value = dir;
    let files: FileInfo[];
    try {
      files = await s.client.sandboxes.files.list(sb.id, dir, { signal });
      replace(problem);
    } catch (e) {
      if (!aborted(e, signal)) replace(problem, errorBox(e));
      replace(rows);
      return;
    }
    files.sort((a, b) => (a.type === "dir" ? 0 : 1) - (b.type === "dir" ? 0 : 1) || a.name.localeCompare(b.name));
    replace(
      rows,
      dir !== "/" ? h("tr", {}, h("td", {}, h("a", { href: "#", class: "dir", onclick: (ev: Event) => (ev.preventDefault(), void list(parent(dir))) }, "..")), h("td"), h("td"), h("td"), h("td"), h("td")) : null,
      files.map((f) => {
        const m = marks.get(f.path);
        const name =
          f.type === "dir"
            ? h("a", { href: "#", class: "dir", onclick: (ev: Event) => (ev.preventDefault(), void list(f.path)) }, `${f.name}/`)
            : h("a", { href: "#", class: "file", onclick: (ev: Event) => (ev.preventDefault(), void act(null, `downloaded ${f.path}`, async () => download(f.name, await s.client.sandboxes.files.read(sb.id, f.path)))) }, f.name);
        const rm = h("button", { class: "small danger", "data-action": "remove" }, "remove");
        rm.addEventListener("click", () => void act(rm, `removed ${f.path}`, () => s.client.sandboxes.files.remove(sb.id, f.path, { recursive: f.type === "dir" })).then(() => list()));
        return h("tr", { "data-path": f.path },
          h("td", {}, name, f.target ? h("span", { class: "muted" }, ` → ${f.target}`) : null),
          h("td", { class: "num" }, f.type === "dir" ? "" : bytes(f.size)),
          h("td", { class: "mono" }, f.mode),
          h("td", {}, new Date(f.modTime).toLocaleString()),
          h("td", {}, m ? badge(m.kind) : null, m?.exec ? h("span", { class: "muted mono" }, ` ${m.exec}`) : null),
          h("td", {}, canAct ? rm : null));
      }),
    );
  };

  const loadChanges = async () => {
    try {
      const [started, perExec, between] = await Promise.all([
        s.client.sandboxes.events(sb.id, { type: "exec.started", signal }),
        s.client.sandboxes.events(sb.id, { type: "exec.files", signal }),
        s.client.sandboxes.events(sb.id, { type: "files.changed", signal }),
      ]);
      const commands = new Map(started.events.map((e) => [e.executionId ?? "", command(e.data?.command as string[] | undefined)]));
      const evs = [...perExec.events, ...between.events].sort((a, b) => (a.seq ?? 0) - (b.seq ?? 0));
      marks = new Map();
      for (const e of evs) for (const kind of ["created", "modified", "deleted"] as const) for (const p of (e.data?.[kind] as string[] | undefined) ?? []) marks.set(p, { kind, exec: e.executionId ?? "" });
      replace(changes, h("h3", {}, "Changes by exec"), evs.length === 0 ? h("p", { class: "muted" }, "No exec has changed a file yet.") : evs.reverse().map((e) => change(e, commands)));
    } catch (e) {
      if (!aborted(e, signal)) replace(changes, errorBox(e));
    }
  };

  upload.addEventListener("change", () => {
    const files = [...(upload.files ?? [])];
    void act(null, `uploaded ${files.map((f) => f.name).join(", ")}`, async () => {
      for (const f of files) await s.client.sandboxes.files.write(sb.id, join(where.value, f.name), f, { parents: true });
    }).then(async () => {
      upload.value = "";
      await loadChanges();
      await list();
    });
  });
  where.addEventListener("change", () => void list());
  el.append(
    h("div", { class: "toolbar" }, h("label", {}, "directory ", where), h("button", { class: "small", onclick: () => void Promise.all([loadChanges(), list()]) }, "Refresh"), h("span", { class: "spacer" }),
      canAct ? h("label", { class: "button" }, "Upload…", upload) : null),
    problem,
    h("table", { class: "list", id: "files" }, h("thead", {}, h("tr", {}, ["name", "size", "mode", "modified", "last change", ""].map((c) => h("th", {}, c)))), rows),
    changes,
  );
  void loadChanges().then(() => list());
}

/** change shows one exec's (or one between-execs) file changes. */
function change(e: AuditEvent, commands: Map<string, string>): HTMLElement {
  const d = e.data ?? {};
  const part = (kind: string) => ((d[kind] as string[] | undefined) ?? []).map((p) => h("li", {}, badge(kind), " ", h("span", { class: "mono" }, p)));
  return h("div", { class: "change", "data-exec": e.executionId ?? "" },
    h("div", {}, h("span", { class: "muted" }, clock(e.time)), " ", e.executionId ? h("code", {}, commands.get(e.executionId) || e.executionId) : h("em", {}, "between execs (files API, background processes)"),
      d.truncated ? h("span", { class: "muted" }, " (truncated)") : null),
    h("ul", {}, part("created"), part("modified"), part("deleted")));
}
