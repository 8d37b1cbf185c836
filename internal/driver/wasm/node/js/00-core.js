// Core internals shared by the other prelude files: host call wrappers, node-shaped errors,
// EventEmitter, process, timers. The files are concatenated into one function whose argument
// `ops` holds the host functions (see ops.go); nothing here is reachable from user code except
// through the globals and modules it installs.

const G = globalThis;
const kCustomInspect = Symbol.for('nodejs.util.inspect.custom');
const kPromisifyCustom = Symbol.for('nodejs.util.promisify.custom');
const hasOwn = (o, k) => Object.prototype.hasOwnProperty.call(o, k);
const perfNow = performance.now.bind(performance);

function defineGlobal(name, value) {
  Object.defineProperty(G, name, { value, writable: true, configurable: true, enumerable: false });
}

// Errors shaped like node's: libuv errno errors for fs, ERR_* codes for the rest.
const ERRNO = {
  EPERM: [-1, 'operation not permitted'], ENOENT: [-2, 'no such file or directory'],
  EINTR: [-4, 'interrupted system call'], EIO: [-5, 'i/o error'], EBADF: [-9, 'bad file descriptor'],
  EAGAIN: [-11, 'resource temporarily unavailable'], EACCES: [-13, 'permission denied'],
  EEXIST: [-17, 'file already exists'], EXDEV: [-18, 'cross-device link not permitted'],
  ENOTDIR: [-20, 'not a directory'], EISDIR: [-21, 'illegal operation on a directory'],
  EINVAL: [-22, 'invalid argument'], EMFILE: [-24, 'too many open files'],
  ENOSPC: [-28, 'no space left on device'], EROFS: [-30, 'read-only file system'],
  ENAMETOOLONG: [-36, 'name too long'], ENOSYS: [-38, 'function not implemented'],
  ENOTEMPTY: [-39, 'directory not empty'], ELOOP: [-40, 'too many symbolic links encountered'],
  ENOTSUP: [-95, 'operation not supported on socket'],
};

function uvException(code, syscall, path, dest) {
  const info = ERRNO[code] || [-5, code.toLowerCase()];
  let msg = `${code}: ${info[1]}, ${syscall}`;
  if (path !== undefined) msg += ` '${path}'`;
  if (dest !== undefined) msg += ` -> '${dest}'`;
  const err = new Error(msg);
  err.errno = info[0];
  err.code = code;
  err.syscall = syscall;
  if (path !== undefined) err.path = path;
  if (dest !== undefined) err.dest = dest;
  return err;
}

function codedError(Ctor, code, message) {
  const err = new Ctor(message);
  Object.defineProperty(err, 'code', { value: code, writable: true, enumerable: true, configurable: true });
  // node shows the code in the name: "TypeError [ERR_INVALID_ARG_TYPE]: ..."
  return err;
}

function invalidArgType(name, expected, actual) {
  let got;
  if (actual == null) got = ` Received ${actual}`;
  else if (typeof actual === 'function') got = ` Received function ${actual.name}`;
  else if (typeof actual === 'object') got = ` Received an instance of ${actual.constructor?.name ?? 'Object'}`;
  else {
    let s = String(actual).slice(0, 25);
    if (typeof actual === 'string') s = `'${s}'`;
    got = ` Received type ${typeof actual} (${s})`;
  }
  return codedError(TypeError, 'ERR_INVALID_ARG_TYPE', `The "${name}" argument must be ${expected}.${got}`);
}

// hostCall runs an op and turns a thrown errno string into a node error for syscall/path.
function hostError(code, syscall, path, dest) {
  if (code === 'ERR_FS_EISDIR') {
    const err = new Error(`Path is a directory: ${syscall} returned EISDIR (is a directory) ${path}`);
    err.code = 'ERR_FS_EISDIR';
    err.errno = 21;
    err.syscall = syscall;
    err.path = path;
    return err;
  }
  if (code === 'ERR_UNKNOWN_ENCODING') return codedError(TypeError, code, `Unknown encoding: ${path}`);
  if (code === 'ERR_FS_FILE_TOO_LARGE') return codedError(RangeError, code, `File size is greater than the memory this script may use${path === undefined ? '' : `: ${path}`}`);
  if (hasOwn(ERRNO, code) || /^E[A-Z]+$/.test(code)) return uvException(code, syscall, path, dest);
  return codedError(Error, code, code);
}

function hostCall(syscall, path, dest, fn) {
  try {
    return fn();
  } catch (e) {
    throw typeof e === 'string' ? hostError(e, syscall, path, dest) : e;
  }
}

// ---- EventEmitter ----

function EventEmitter(opts) {
  EventEmitter.init.call(this, opts);
}
EventEmitter.prototype._events = undefined;
EventEmitter.prototype._eventsCount = 0;
EventEmitter.prototype._maxListeners = undefined;
EventEmitter.defaultMaxListeners = 10;
EventEmitter.captureRejections = false;
EventEmitter.errorMonitor = Symbol('events.errorMonitor');
EventEmitter.init = function init() {
  if (this._events === undefined || this._events === Object.getPrototypeOf(this)._events) {
    this._events = Object.create(null);
    this._eventsCount = 0;
  }
  this._maxListeners = this._maxListeners || undefined;
};
function addListener(target, type, listener, prepend) {
  if (typeof listener !== 'function') throw invalidArgType('listener', 'of type function', listener);
  let events = target._events;
  if (events === undefined) {
    events = target._events = Object.create(null);
    target._eventsCount = 0;
  } else if (events.newListener !== undefined) {
    target.emit('newListener', type, listener.listener ? listener.listener : listener);
    events = target._events;
  }
  const existing = events[type];
  if (existing === undefined) {
    events[type] = listener;
    target._eventsCount++;
  } else if (typeof existing === 'function') {
    events[type] = prepend ? [listener, existing] : [existing, listener];
  } else if (prepend) existing.unshift(listener);
  else existing.push(listener);
  return target;
}
Object.assign(EventEmitter.prototype, {
  setMaxListeners(n) { this._maxListeners = n; return this; },
  getMaxListeners() { return this._maxListeners === undefined ? EventEmitter.defaultMaxListeners : this._maxListeners; },
  emit(type, ...args) {
    const events = this._events;
    if (type === 'error' && events?.[EventEmitter.errorMonitor] !== undefined) this.emit(EventEmitter.errorMonitor, ...args);
    const handler = events?.[type];
    if (handler === undefined) {
      if (type === 'error') {
        const er = args[0];
        if (er instanceof Error) throw er;
        const err = codedError(Error, 'ERR_UNHANDLED_ERROR', `Unhandled error. (${inspect(er)})`);
        err.context = er;
        throw err;
      }
      return false;
    }
    if (typeof handler === 'function') {
      Reflect.apply(handler, this, args);
    } else {
      for (const h of handler.slice()) Reflect.apply(h, this, args);
    }
    return true;
  },
  addListener(type, listener) { return addListener(this, type, listener, false); },
  prependListener(type, listener) { return addListener(this, type, listener, true); },
  once(type, listener) {
    if (typeof listener !== 'function') throw invalidArgType('listener', 'of type function', listener);
    return this.on(type, onceWrapper(this, type, listener));
  },
  prependOnceListener(type, listener) {
    if (typeof listener !== 'function') throw invalidArgType('listener', 'of type function', listener);
    return this.prependListener(type, onceWrapper(this, type, listener));
  },
  removeListener(type, listener) {
    const events = this._events;
    if (events === undefined) return this;
    const list = events[type];
    if (list === undefined) return this;
    if (list === listener || list.listener === listener) {
      if (--this._eventsCount === 0) this._events = Object.create(null);
      else delete events[type];
      if (events.removeListener) this.emit('removeListener', type, list.listener || listener);
    } else if (typeof list !== 'function') {
      for (let i = list.length - 1; i >= 0; i--) {
        if (list[i] === listener || list[i].listener === listener) {
          list.splice(i, 1);
          if (list.length === 1) events[type] = list[0];
          if (events.removeListener !== undefined) this.emit('removeListener', type, listener);
          break;
        }
      }
    }
    return this;
  },
  removeAllListeners(type) {
    if (this._events === undefined) return this;
    if (type === undefined) {
      this._events = Object.create(null);
      this._eventsCount = 0;
    } else if (this._events[type] !== undefined) {
      if (--this._eventsCount === 0) this._events = Object.create(null);
      else delete this._events[type];
    }
    return this;
  },
  listeners(type) {
    const l = this._events?.[type];
    if (l === undefined) return [];
    if (typeof l === 'function') return [l.listener || l];
    return l.map((f) => f.listener || f);
  },
  rawListeners(type) {
    const l = this._events?.[type];
    if (l === undefined) return [];
    return typeof l === 'function' ? [l] : l.slice();
  },
  listenerCount(type) {
    const l = this._events?.[type];
    if (l === undefined) return 0;
    return typeof l === 'function' ? 1 : l.length;
  },
  eventNames() { return this._eventsCount > 0 ? Reflect.ownKeys(this._events) : []; },
});
EventEmitter.prototype.on = EventEmitter.prototype.addListener;
EventEmitter.prototype.off = EventEmitter.prototype.removeListener;
function onceWrapper(target, type, listener) {
  const state = { fired: false, target, type, listener };
  const wrapped = function (...args) {
    if (!state.fired) {
      state.target.removeListener(state.type, wrapped);
      state.fired = true;
      return Reflect.apply(state.listener, state.target, args);
    }
  };
  wrapped.listener = listener;
  return wrapped;
}
EventEmitter.EventEmitter = EventEmitter;
EventEmitter.once = function once(emitter, name) {
  return new Promise((resolve, reject) => {
    const onError = (err) => { emitter.removeListener(name, onEvent); reject(err); };
    const onEvent = (...args) => { if (name !== 'error') emitter.removeListener('error', onError); resolve(args); };
    emitter.once(name, onEvent);
    if (name !== 'error') emitter.once('error', onError);
  });
};
EventEmitter.listenerCount = (emitter, type) => emitter.listenerCount(type);

// ---- timers and the event loop's JS half (step() is called by the host) ----

const timers = [];          // pending Timeouts sorted by (when, seq)
const immediates = [];      // pending Immediates in order
let timerSeq = 0;
let refedTimers = 0;        // timers that keep the loop alive
let workSeq = 0;            // bumps whenever work is scheduled (for 'beforeExit')
const loopNow = () => perfNow();

class Timeout {
  constructor(callback, after, args, repeat) {
    after = Number(after);
    if (!(after >= 1 && after <= 2147483647)) after = 1;
    this._idleTimeout = after;
    this._onTimeout = callback;
    this._timerArgs = args;
    this._repeat = repeat ? after : null;
    this._destroyed = false;
    this._refed = true;
    this._id = ++timerSeq;
    this._armed = false;
    arm(this);
  }
  ref() { if (!this._refed) { this._refed = true; if (this._armed) refedTimers++; } return this; }
  unref() { if (this._refed) { this._refed = false; if (this._armed) refedTimers--; } return this; }
  hasRef() { return this._refed; }
  refresh() { if (!this._destroyed) { disarm(this); arm(this); } return this; }
  close() { clearTimeout(this); return this; }
  [Symbol.toPrimitive]() { return this._id; }
}
function arm(t) {
  t._when = loopNow() + t._idleTimeout;
  t._seq = ++timerSeq;
  let lo = 0, hi = timers.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const m = timers[mid];
    if (m._when < t._when || (m._when === t._when && m._seq < t._seq)) lo = mid + 1;
    else hi = mid;
  }
  timers.splice(lo, 0, t);
  t._armed = true;
  if (t._refed) refedTimers++;
  workSeq++;
}
function disarm(t) {
  if (!t._armed) return;
  const i = timers.indexOf(t);
  if (i >= 0) timers.splice(i, 1);
  t._armed = false;
  if (t._refed) refedTimers--;
}
const timersById = new Map();
function setTimeout(callback, after, ...args) {
  if (typeof callback !== 'function') throw invalidArgType('callback', 'of type function', callback);
  const t = new Timeout(callback, after, args, false);
  timersById.set(t._id, t);
  return t;
}
function setInterval(callback, repeat, ...args) {
  if (typeof callback !== 'function') throw invalidArgType('callback', 'of type function', callback);
  const t = new Timeout(callback, repeat, args, true);
  timersById.set(t._id, t);
  return t;
}
function clearTimeout(t) {
  if (t == null) return;
  if (!(t instanceof Timeout)) t = timersById.get(Number(t));
  if (!(t instanceof Timeout)) return;
  t._destroyed = true;
  disarm(t);
  timersById.delete(t._id);
}
class Immediate {
  constructor(callback, args) {
    this._onImmediate = callback;
    this._argv = args;
    this._destroyed = false;
    this._refed = true;
  }
  ref() { this._refed = true; return this; }
  unref() { this._refed = false; return this; }
  hasRef() { return this._refed; }
}
function setImmediate(callback, ...args) {
  if (typeof callback !== 'function') throw invalidArgType('callback', 'of type function', callback);
  const im = new Immediate(callback, args);
  immediates.push(im);
  workSeq++;
  return im;
}
function clearImmediate(im) {
  if (im instanceof Immediate) im._destroyed = true;
}
function queueMicrotask(callback) {
  if (typeof callback !== 'function') throw invalidArgType('callback', 'of type function', callback);
  Promise.resolve().then(() => {
    try { callback(); } catch (e) { fatal(e); }
  });
}

// process.nextTick: a queue drained from one microtask, so ticks run before later promise jobs
// queued after them (node runs them before all promise jobs; close enough for real code).
const ticks = [];
let tickScheduled = false;
function runTicks() {
  tickScheduled = false;
  while (ticks.length) {
    const [fn, args] = ticks.shift();
    try { Reflect.apply(fn, undefined, args); } catch (e) { fatal(e); }
  }
}
function nextTick(callback, ...args) {
  if (typeof callback !== 'function') throw invalidArgType('callback', 'of type function', callback);
  ticks.push([callback, args]);
  workSeq++;
  if (!tickScheduled) {
    tickScheduled = true;
    Promise.resolve().then(runTicks);
  }
}

// step runs one macrotask (an immediate or a due timer) and tells the host what next:
// 0 = call again after draining promise jobs, > 0 = sleep that many ms, -1 = nothing left.
let beforeExitSeq = -1;
function step() {
  while (immediates.length) {
    const im = immediates.shift();
    if (im._destroyed) continue;
    im._destroyed = true;
    try { Reflect.apply(im._onImmediate, im, im._argv); } catch (e) { fatal(e); }
    return 0;
  }
  if (timers.length) {
    const t = timers[0];
    const now = loopNow();
    if (t._when <= now) {
      disarm(t);
      if (!t._repeat) {
        t._destroyed = true;
        timersById.delete(t._id);
      }
      try { Reflect.apply(t._onTimeout, t, t._timerArgs); } catch (e) { fatal(e); }
      if (t._repeat && !t._destroyed && !t._armed) arm(t);
      return 0;
    }
    if (refedTimers > 0) return t._when - now;
  }
  // The loop is empty: 'beforeExit' may schedule more work.
  if (process.listenerCount('beforeExit') > 0 && beforeExitSeq !== workSeq) {
    beforeExitSeq = workSeq;
    process.emit('beforeExit', process.exitCode === undefined ? 0 : process.exitCode);
    return 0;
  }
  return -1;
}
