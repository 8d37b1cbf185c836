// Node's globals that QuickJS lacks: process, console, Buffer, timers, URL, TextEncoder,
// structuredClone, AbortController, EventTarget, crypto, performance, and a fetch that fails.

class Event {
  constructor(type, init = {}) {
    this.type = String(type);
    this.bubbles = !!init.bubbles;
    this.cancelable = !!init.cancelable;
    this.composed = !!init.composed;
    this.defaultPrevented = false;
    this.timeStamp = perfNow() - bootTime;
    this.target = null;
    this.currentTarget = null;
    this.isTrusted = false;
  }
  preventDefault() { if (this.cancelable) this.defaultPrevented = true; }
  stopPropagation() {}
  stopImmediatePropagation() { this._stop = true; }
}
class EventTarget {
  #listeners = new Map();
  addEventListener(type, listener, options) {
    if (listener == null) return;
    const once = typeof options === 'object' && options !== null && !!options.once;
    const list = this.#listeners.get(type) || [];
    if (list.some((l) => l.listener === listener)) return;
    list.push({ listener, once });
    this.#listeners.set(type, list);
    if (typeof options === 'object' && options?.signal) options.signal.addEventListener('abort', () => this.removeEventListener(type, listener));
  }
  removeEventListener(type, listener) {
    const list = this.#listeners.get(type);
    if (list) this.#listeners.set(type, list.filter((l) => l.listener !== listener));
  }
  dispatchEvent(event) {
    event.target = this;
    event.currentTarget = this;
    for (const l of (this.#listeners.get(event.type) || []).slice()) {
      if (l.once) this.removeEventListener(event.type, l.listener);
      try {
        if (typeof l.listener === 'function') l.listener.call(this, event);
        else l.listener.handleEvent(event);
      } catch (e) { process.nextTick(() => { throw e; }); }
      if (event._stop) break;
    }
    const h = this[`on${event.type}`];
    if (typeof h === 'function') h.call(this, event);
    return !event.defaultPrevented;
  }
}
function domException(message, name) {
  if (typeof DOMException === 'function') return new DOMException(message, name);
  const e = new Error(message);
  e.name = name;
  return e;
}
class AbortSignal extends EventTarget {
  constructor() { super(); this.aborted = false; this.reason = undefined; this.onabort = null; }
  throwIfAborted() { if (this.aborted) throw this.reason; }
  static abort(reason) { const c = new AbortController(); c.abort(reason); return c.signal; }
  static timeout(ms) {
    const c = new AbortController();
    setTimeout(() => c.abort(domException('The operation was aborted due to timeout', 'TimeoutError')), ms).unref();
    return c.signal;
  }
  static any(signals) {
    const c = new AbortController();
    for (const s of signals) {
      if (s.aborted) { c.abort(s.reason); break; }
      s.addEventListener('abort', () => c.abort(s.reason), { once: true });
    }
    return c.signal;
  }
}
class AbortController {
  constructor() { this.signal = new AbortSignal(); }
  abort(reason = domException('This operation was aborted', 'AbortError')) {
    if (this.signal.aborted) return;
    this.signal.aborted = true;
    this.signal.reason = reason;
    this.signal.dispatchEvent(new Event('abort'));
  }
}

function structuredClone(value, options) {
  const seen = new Map();
  const clone = (v) => {
    if (typeof v === 'function' || typeof v === 'symbol') {
      throw domException(`${typeof v === 'function' ? String(v).slice(0, 40) : String(v)} could not be cloned.`, 'DataCloneError');
    }
    if (v === null || typeof v !== 'object') return v;
    if (seen.has(v)) return seen.get(v);
    let out;
    if (Array.isArray(v)) { out = []; seen.set(v, out); v.forEach((x, i) => { out[i] = clone(x); }); return out; }
    if (v instanceof Date) out = new Date(v.getTime());
    else if (v instanceof RegExp) out = new RegExp(v.source, v.flags);
    else if (v instanceof Map) { out = new Map(); seen.set(v, out); for (const [k, x] of v) out.set(clone(k), clone(x)); return out; }
    else if (v instanceof Set) { out = new Set(); seen.set(v, out); for (const x of v) out.add(clone(x)); return out; }
    else if (v instanceof ArrayBuffer) out = v.slice(0);
    else if (ArrayBuffer.isView(v)) {
      const C = v instanceof Buffer ? Uint8Array : v.constructor;
      out = v instanceof DataView ? new DataView(v.buffer.slice(0)) : new C(v);
    } else if (v instanceof Error) {
      const C = { EvalError, RangeError, ReferenceError, SyntaxError, TypeError, URIError }[v.name] || Error;
      out = new C(v.message);
      if (v.stack !== undefined) out.stack = v.stack;
      if ('cause' in v) out.cause = clone(v.cause);
    } else if (isBoxed(v)) out = Object(v.valueOf());
    else if (v instanceof Promise || v instanceof WeakMap || v instanceof WeakSet) {
      throw domException(`${getCtorName(v)} object could not be cloned.`, 'DataCloneError');
    } else {
      out = {};
      seen.set(v, out);
      for (const k of Object.keys(v)) out[k] = clone(v[k]);
      return out;
    }
    seen.set(v, out);
    return out;
  };
  return clone(value);
}

async function fetch(input) {
  const err = new TypeError('fetch failed');
  err.cause = codedError(Error, 'ERR_UNAVAILABLE', `fetch(${strEscape(String(input && input.url ? input.url : input))}) is not available in airlock's wasm sandbox: there is no network`);
  throw err;
}

const navigatorShim = {
  hardwareConcurrency: 1,
  language: 'en-US',
  languages: ['en-US'],
  platform: 'wasi',
  userAgent: `Node.js/${NODE_VERSION.slice(1).split('.')[0]}`,
};

for (const [name, value] of Object.entries({
  process, console, Buffer, global: G, setTimeout, clearTimeout, setInterval, clearInterval: clearTimeout,
  setImmediate, clearImmediate, queueMicrotask, structuredClone, TextEncoder, TextDecoder, URL,
  URLSearchParams, AbortController, AbortSignal, Event, EventTarget, fetch, navigator: navigatorShim,
  performance: performanceShim, crypto: webcrypto,
})) {
  defineGlobal(name, value);
}
