// The create form: the common fields of a spec, sent as typed (a number field that is not a
// number is sent as the string it is), so that every refusal is the API's own message, shown
// beside the field it names.

import { AirlockError, type SpecInput } from "../../../../sdk/typescript/src/index.js";
import { message, toast, type Session } from "../app.js";
import { h, replace } from "../dom.js";

/** A form field: its label, the spec path the API names it by, and how to read it. */
interface Field {
  label: string;
  path: string;
  input: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement;
  hint?: string;
}

const str = (v: string) => v.trim() || undefined;
/** num sends a number when the text is one, else the text itself: the API then names the field. */
const num = (v: string): number | undefined => {
  const t = v.trim();
  if (t === "") return undefined;
  return /^-?\d+(\.\d+)?$/.test(t) ? Number(t) : (t as unknown as number);
};
/** pairs reads "k=v" lines (or commas) into a map. */
const pairs = (v: string): Record<string, string> | undefined => {
  const out: Record<string, string> = {};
  for (const line of v.split(/[\n,]/)) {
    const t = line.trim();
    if (!t) continue;
    const i = t.indexOf("=");
    out[i < 0 ? t : t.slice(0, i)] = i < 0 ? "" : t.slice(i + 1);
  }
  return Object.keys(out).length ? out : undefined;
};

export function createForm(s: Session, done: () => void): HTMLElement {
  const input = (path: string, placeholder = "") => h("input", { name: path, "data-field": path, placeholder, autocomplete: "off" });
  const isolation = h("select", { name: "isolation", "data-field": "isolation" }, h("option", { value: "" }, "the daemon's default"));
  void s.client.capabilities().then((c) => {
    isolation.options[0]!.textContent = `default (${c.defaultIsolation})`;
    for (const l of c.levels) isolation.append(h("option", { value: l.level, disabled: !l.available, title: l.reason ?? "" }, l.available ? l.level : `${l.level} (unavailable)`));
  }, () => {});
  const egress = h("select", { name: "network.egressPolicy", "data-field": "network.egressPolicy" }, ["", "none", "restricted", "open"].map((v) => h("option", { value: v }, v || "default")));
  const area = (path: string, placeholder: string) => h("textarea", { name: path, "data-field": path, placeholder, rows: 2 });
  const fields: Field[] = [
    { label: "name", path: "name", input: input("name", "my-agent") },
    { label: "isolation", path: "isolation", input: isolation },
    { label: "image", path: "image", input: input("image", "python:3.12-slim"), hint: "an approved image; empty: the host template" },
    { label: "CPU (vCPUs)", path: "resources.cpu", input: input("resources.cpu", "1.0") },
    { label: "memory (MB)", path: "resources.memoryMb", input: input("resources.memoryMb", "2048") },
    { label: "disk (MB)", path: "resources.diskMb", input: input("resources.diskMb", "5120") },
    { label: "lifetime (s)", path: "timeout.maxDurationSeconds", input: input("timeout.maxDurationSeconds", "3600") },
    { label: "idle timeout (s)", path: "timeout.idleTimeoutSeconds", input: input("timeout.idleTimeoutSeconds", "300") },
    { label: "egress", path: "network.egressPolicy", input: egress },
    { label: "allowed domains", path: "network.allowedDomains", input: input("network.allowedDomains", "pypi.org, *.github.com") },
    { label: "environment", path: "environment", input: area("environment", "KEY=value, one a line") },
    { label: "metadata", path: "metadata", input: area("metadata", "team=research") },
  ];
  const v = (path: string) => fields.find((f) => f.path === path)?.input.value ?? "";
  const problem = h("div", { class: "error", role: "alert", id: "create-error", hidden: true });
  const submit = h("button", { type: "submit", class: "primary", id: "create-submit" }, "Create");
  const form = h(
    "form",
    { class: "create", id: "create-form" },
    h("div", { class: "grid" }, fields.map((f) => h("label", { title: f.hint ?? "" }, h("span", {}, f.label), f.input))),
    h("div", { class: "row" }, submit, h("span", { class: "muted" }, "Left empty, a field takes the daemon's default.")),
    problem,
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    for (const f of fields) f.input.removeAttribute("aria-invalid");
    problem.hidden = true;
    const domains = v("network.allowedDomains").split(/[\s,]+/).filter(Boolean);
    const spec: SpecInput = {
      name: str(v("name")),
      isolation: (str(v("isolation")) as SpecInput["isolation"]) ?? undefined,
      image: str(v("image")),
      resources: { cpu: str(v("resources.cpu")), memoryMb: num(v("resources.memoryMb")), diskMb: num(v("resources.diskMb")) },
      timeout: { maxDurationSeconds: num(v("timeout.maxDurationSeconds")), idleTimeoutSeconds: num(v("timeout.idleTimeoutSeconds")) },
      network: { egressPolicy: (str(v("network.egressPolicy")) as "none" | "restricted" | "open" | undefined) ?? undefined, allowedDomains: domains.length ? domains : undefined },
      environment: pairs(v("environment")),
      metadata: pairs(v("metadata")),
    };
    submit.disabled = true;
    s.client.sandboxes
      .create(JSON.parse(JSON.stringify(spec)) as SpecInput, { wait: false })
      .then((sb) => {
        toast(`created ${sb.id}`);
        form.reset();
        done();
      })
      .catch((err) => {
        problem.hidden = false;
        replace(problem, message(err));
        const field = err instanceof AirlockError ? err.field : undefined;
        const match = fields.find((f) => field && (field === f.path || field.startsWith(`${f.path}[`) || field.startsWith(`${f.path}.`)));
        if (match) {
          match.input.setAttribute("aria-invalid", "true");
          match.input.focus();
        }
      })
      .finally(() => (submit.disabled = false));
  });
  return form;
}
