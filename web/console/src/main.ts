// The console's entry: sign-in (a key from the address's fragment or pasted), the layout and the
// routes (in the fragment: #/, #/sandboxes/ID/TAB, #/replay/ID, #/admin).

import "@xterm/xterm/css/xterm.css";
import "./styles.css";
import { errorBox, forgetKey, message, signIn, storedKey, takeKeyFromFragment, type Session } from "./app.js";
import { h, replace } from "./dom.js";
import { adminView } from "./views/admin.js";
import { listView } from "./views/list.js";
import { replayView } from "./views/replay.js";
import { sandboxView } from "./views/sandbox.js";

/** A view draws into el; it stops its polls and streams when signal aborts (the route changed). */
export type View = (s: Session, el: HTMLElement, signal: AbortSignal, args: string[]) => void | Promise<void>;

const routes: [RegExp, View][] = [
  [/^#\/(?:sandboxes)?$/, listView],
  [/^#\/sandboxes\/([^/]+)(?:\/(\w+))?$/, sandboxView],
  [/^#\/replay\/([^/]+)$/, replayView],
  [/^#\/admin$/, adminView],
];

const root = document.getElementById("app") as HTMLElement;

function signInView(problem?: string): void {
  const input = h("input", { type: "password", id: "key", name: "key", placeholder: "alk_…", autocomplete: "off", spellcheck: "false", required: true });
  const err = h("div", { class: "error", role: "alert", id: "signin-error", hidden: !problem }, problem ?? "");
  const form = h(
    "form",
    { class: "signin", id: "signin" },
    h("h1", {}, "airlock"),
    h("p", {}, "Paste an API key (", h("code", {}, "airlock keys create --tenant NAME"), "). It stays in this tab only, and goes to the daemon in a header."),
    h("label", { for: "key" }, "API key"),
    input,
    h("button", { type: "submit", class: "primary" }, "Sign in"),
    err,
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    void start(input.value, (m) => {
      err.hidden = false;
      replace(err, m);
    });
  });
  replace(root, form);
  input.focus();
}

async function start(key: string, fail: (m: string) => void): Promise<void> {
  try {
    const s = await signIn(key);
    layout(s);
  } catch (e) {
    forgetKey();
    fail(`The key was not accepted: ${message(e)}`);
  }
}

function layout(s: Session): void {
  const who = s.tenants.length === 1 ? `tenant ${s.tenants[0]?.name}` : `${s.tenants.length} tenants`;
  const main = h("main", { id: "main" });
  const nav = h(
    "nav",
    {},
    h("a", { href: "#/", class: "brand" }, "airlock"),
    h("a", { href: "#/", "data-nav": "sandboxes" }, "Sandboxes"),
    h("a", { href: "#/admin", "data-nav": "admin" }, "Daemon"),
    h("span", { class: "spacer" }),
    h("span", { class: "who", id: "who" }, who),
    h("button", { class: "link", id: "signout", onclick: () => (forgetKey(), location.reload()) }, "Sign out"),
  );
  replace(root, h("header", {}, nav), main);
  let ctl = new AbortController();
  const route = () => {
    ctl.abort();
    ctl = new AbortController();
    const hash = location.hash || "#/";
    for (const a of nav.querySelectorAll("a[data-nav]")) a.classList.toggle("active", (a as HTMLElement).dataset.nav === (hash.startsWith("#/admin") ? "admin" : "sandboxes"));
    for (const [re, view] of routes) {
      const m = re.exec(hash);
      if (m) {
        replace(main);
        Promise.resolve(view(s, main, ctl.signal, m.slice(1).filter((x): x is string => x !== undefined))).catch((e) => {
          if (!ctl.signal.aborted) replace(main, errorBox(e));
        });
        return;
      }
    }
    replace(main, h("p", {}, "No such page. ", h("a", { href: "#/" }, "The sandboxes")));
  };
  window.addEventListener("hashchange", route);
  route();
}

// A key given in a new address of this tab (a link pasted) signs the tab in again.
window.addEventListener("hashchange", () => {
  if (!location.hash.startsWith("#key=")) return;
  takeKeyFromFragment();
  location.reload();
});
takeKeyFromFragment();
const key = storedKey();
if (key) void start(key, (m) => signInView(m));
else signInView();
