// An interactive terminal: xterm.js over the exec WebSocket with a PTY (a login shell: bash where
// the sandbox has it, else sh), resized with its box, copy and paste by keys, buttons and the
// browser's own paste.

import { FitAddon } from "@xterm/addon-fit";
import { Terminal } from "@xterm/xterm";
import type { ExecSession, Sandbox } from "../../../../sdk/typescript/src/index.js";
import { aborted, message, toast, type Session } from "../app.js";
import { h, replace } from "../dom.js";
import { live } from "./list.js";

const shell = ["/bin/sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash -l; else exec sh -l; fi"];

let styled = false;

/**
 * cspSafeStyles makes the `<style>` elements xterm.js creates into constructed stylesheets: the
 * page's Content-Security-Policy applies no inline style, and a constructed stylesheet is not
 * inline. The element xterm gets is an inert <template> whose text goes to the sheet.
 */
function cspSafeStyles(): void {
  if (styled) return;
  styled = true;
  const create = document.createElement.bind(document);
  document.createElement = ((tag: string, opts?: ElementCreationOptions) => {
    if (tag.toLowerCase() !== "style") return create(tag, opts);
    const el = create("template");
    const sheet = new CSSStyleSheet();
    document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
    Object.defineProperty(el, "textContent", { get: () => "", set: (v: string | null) => sheet.replaceSync(v ?? "") });
    const remove = el.remove.bind(el);
    el.remove = () => {
      document.adoptedStyleSheets = document.adoptedStyleSheets.filter((x) => x !== sheet);
      remove();
    };
    return el;
  }) as typeof document.createElement;
}

export function terminalTab(s: Session, sb: Sandbox, el: HTMLElement, signal: AbortSignal): void {
  if (!live.has(sb.status)) {
    el.append(h("p", { class: "muted" }, `The sandbox is ${sb.status}: nothing runs in it any more.`));
    return;
  }
  cspSafeStyles();
  const state = h("span", { class: "muted", id: "term-state" }, "connecting…");
  const box = h("div", { class: "term", id: "terminal" });
  const term = new Terminal({ cursorBlink: true, fontSize: 13, scrollback: 5000, theme: { background: "#0f1419", foreground: "#e6e1cf" } });
  const fit = new FitAddon();
  term.loadAddon(fit);
  let session: ExecSession | undefined;
  const copy = () => {
    const text = term.getSelection();
    if (text) void navigator.clipboard.writeText(text).then(() => toast("copied"), (e) => toast("copy", e));
  };
  const paste = () => void navigator.clipboard.readText().then((t) => session?.write(t), (e) => toast("paste", e));
  // Ctrl+Shift+C and Ctrl+Shift+V, as terminals have them (Ctrl+C is the shell's interrupt).
  term.attachCustomKeyEventHandler((ev) => {
    if (ev.type !== "keydown" || !ev.ctrlKey || !ev.shiftKey) return true;
    if (ev.code === "KeyC") return (copy(), false);
    if (ev.code === "KeyV") return (paste(), false);
    return true;
  });
  el.append(
    h("div", { class: "toolbar" }, state, h("span", { class: "spacer" }),
      h("button", { class: "small", onclick: copy, title: "Ctrl+Shift+C" }, "Copy"),
      h("button", { class: "small", onclick: paste, title: "Ctrl+Shift+V" }, "Paste")),
    h("div", { class: "term-wrap" }, box),
  );
  term.open(box);
  fit.fit();
  const resized = new ResizeObserver(() => fit.fit());
  resized.observe(box);
  signal.addEventListener("abort", () => {
    resized.disconnect();
    session?.close();
    term.dispose();
  }, { once: true });
  void (async () => {
    try {
      session = await s.client.sandboxes.execStream(sb.id, { command: shell, tty: true, rows: term.rows, cols: term.cols, env: { TERM: "xterm-256color" }, signal });
      replace(state, `connected: ${session.executionId} (${term.cols}×${term.rows})`);
      term.onData((d) => void session?.write(d).catch(() => {}));
      term.onResize(({ rows, cols }) => {
        void session?.resize(rows, cols).catch(() => {});
        replace(state, `connected: ${session?.executionId} (${cols}×${rows})`);
      });
      term.focus();
      for await (const chunk of session.stdout) term.write(chunk);
      const res = await session.wait();
      term.write(`\r\n[exit ${res.exitCode}]\r\n`);
      replace(state, `the shell exited with ${res.exitCode}`);
    } catch (e) {
      if (aborted(e, signal)) return;
      replace(state, `disconnected: ${message(e)}`);
      term.write(`\r\n[${message(e)}]\r\n`);
    }
  })();
}
