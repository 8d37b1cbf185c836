// Small DOM helpers: elements from a tag, attributes and children (text is always text, never
// HTML), and the formats the views share.

type Child = Node | string | number | null | undefined | false | Child[];
type Attrs = Record<string, string | number | boolean | EventListener | undefined | null>;

/** h makes an element: h("button", { class: "x", onclick: f }, "text", child). */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "value" && "value" in el) (el as HTMLInputElement).value = String(v);
    else if (k === "checked" && el instanceof HTMLInputElement) el.checked = Boolean(v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

/** append adds children (text as text nodes) to el. */
export function append(el: Node, children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
}

/** replace empties el and gives it children. */
export function replace(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, children);
}

/** bytes formats a byte count: 1.5 MiB. */
export function bytes(n: number | undefined): string {
  if (n === undefined || !Number.isFinite(n)) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${i === 0 ? n : n.toFixed(n < 10 ? 1 : 0)} ${units[i]}`;
}

/** ago says how long ago a time was: 3 s, 5 min, 2 h, 4 d. */
export function ago(t: string | Date | undefined, now = Date.now()): string {
  if (!t) return "–";
  return duration(now - new Date(t).getTime());
}

/** duration formats milliseconds: 850 ms, 12 s, 5 min, 2 h, 4 d. */
export function duration(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s < 10 ? s.toFixed(1) : Math.round(s)} s`;
  if (s < 3600) return `${Math.round(s / 60)} min`;
  if (s < 86400) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86400).toFixed(1)} d`;
}

/** time formats a time of day with seconds, in the browser's zone. */
export function clock(t: string | Date): string {
  return new Date(t).toLocaleTimeString(undefined, { hour12: false });
}

/** badge is a small coloured label, its class from the value (status, decision). */
export function badge(value: string, kind = value): HTMLElement {
  return h("span", { class: `badge b-${kind.replace(/[^a-z0-9_-]/gi, "")}` }, value);
}

/** command shows an argv as a shell line (sh -c LINE as LINE). */
export function command(argv: readonly string[] | undefined): string {
  if (!argv?.length) return "";
  if (argv.length === 3 && /(^|\/)(ba)?sh$/.test(argv[0] ?? "") && argv[1] === "-c") return argv[2] ?? "";
  return argv.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(" ");
}

/** download offers data as a file named name. */
export function download(name: string, data: Uint8Array): void {
  const url = URL.createObjectURL(new Blob([data as Uint8Array<ArrayBuffer>]));
  const a = h("a", { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
