// The console's state: the key (kept in this tab's sessionStorage, never in a cookie, sent only
// in headers), the SDK client made with it, and what the views share: routing, messages.

import { AirlockClient, AirlockError, type Tenant } from "../../../sdk/typescript/src/index.js";
import { h, replace } from "./dom.js";

/** Where this tab keeps the key: sessionStorage, gone when the tab closes. */
const keySlot = "airlock.key";

/** Session is a signed-in key: its client and what the daemon says the key may see. */
export interface Session {
  client: AirlockClient;
  /** The key's tenant's quota and usage; an admin key sees every tenant. */
  tenants: Tenant[];
}

/**
 * takeKeyFromFragment moves a key given in the address (`/ui/#key=alk_…`, which `make run` and
 * `airlock console` print; a fragment is never sent to a server) into sessionStorage, and takes
 * it out of the address bar and the history entry at once.
 */
export function takeKeyFromFragment(): void {
  const m = /^#key=([^&]+)/.exec(location.hash);
  if (!m?.[1]) return;
  sessionStorage.setItem(keySlot, decodeURIComponent(m[1]));
  history.replaceState(null, "", `${location.pathname}${location.search}#/`);
}

/** storedKey is this tab's key, if it has one. */
export function storedKey(): string | null {
  return sessionStorage.getItem(keySlot);
}

/** forgetKey signs the tab out. */
export function forgetKey(): void {
  sessionStorage.removeItem(keySlot);
}

/**
 * signIn checks a key with the daemon (GET /api/v1/tenants: the key's quota) and keeps it when
 * it works; otherwise it throws the daemon's refusal.
 */
export async function signIn(key: string): Promise<Session> {
  const client = new AirlockClient({ apiKey: key.trim(), baseUrl: location.origin });
  const tenants = await client.tenants.list();
  sessionStorage.setItem(keySlot, key.trim());
  return { client, tenants };
}

/** message says what went wrong, as the API said it: its message, and the field to blame. */
export function message(err: unknown): string {
  if (err instanceof AirlockError) return `${err.message}${err.field ? ` (field ${err.field})` : ""} [${err.status} ${err.code}]`;
  if (err instanceof Error) return err.message;
  return String(err);
}

/** errorBox shows an error where a view would be. */
export function errorBox(err: unknown): HTMLElement {
  return h("div", { class: "error", role: "alert" }, message(err));
}

let toastTimer: ReturnType<typeof setTimeout> | undefined;

/** toast shows a short message at the bottom of the page (an error when err is set). */
export function toast(text: string, err?: unknown): void {
  let el = document.getElementById("toast");
  if (!el) {
    el = h("div", { id: "toast", role: "status" });
    document.body.append(el);
  }
  el.className = err === undefined ? "toast" : "toast toast-error";
  replace(el, err === undefined ? text : `${text}: ${message(err)}`);
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => el?.classList.add("toast-hidden"), err === undefined ? 3000 : 8000);
}

/** act runs an action of a button, saying how it went; the button is disabled meanwhile. */
export async function act<T>(button: HTMLButtonElement | null, what: string, f: () => Promise<T>): Promise<T | undefined> {
  if (button) button.disabled = true;
  try {
    const v = await f();
    toast(what);
    return v;
  } catch (err) {
    toast(`${what} failed`, err);
    return undefined;
  } finally {
    if (button) button.disabled = false;
  }
}

/** every calls f now and then every ms until signal aborts; a failure is shown by f itself. */
export function every(ms: number, signal: AbortSignal, f: () => Promise<void>): void {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const tick = async () => {
    if (signal.aborted) return;
    try {
      await f();
    } catch {
      // f shows its own errors; the next tick tries again.
    }
    if (!signal.aborted) timer = setTimeout(tick, ms);
  };
  signal.addEventListener("abort", () => clearTimeout(timer), { once: true });
  void tick();
}

/** aborted says whether err is the abort of a view that was left. */
export function aborted(err: unknown, signal: AbortSignal): boolean {
  return signal.aborted || (err instanceof DOMException && err.name === "AbortError");
}
