// The smaller builtin modules: os, util, assert, crypto, readline, url, timers, perf_hooks, tty.

const os = {
  EOL: '\n',
  devNull: '/dev/null',
  constants: {
    signals: { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGTERM: 15 },
    errno: Object.fromEntries(Object.entries(ERRNO).map(([k, v]) => [k, -v[0]])),
    priority: {},
  },
  platform: () => 'wasi',
  type: () => 'WASI',
  release: () => ENGINE_VERSION,
  version: () => `QuickJS-NG ${ENGINE_VERSION}`,
  machine: () => 'wasm32',
  arch: () => 'wasm32',
  endianness: () => 'LE',
  tmpdir: () => {
    let t = process.env.TMPDIR || process.env.TMP || process.env.TEMP || '/tmp';
    if (t.length > 1 && t.endsWith('/')) t = t.slice(0, -1);
    return t;
  },
  homedir: () => process.env.HOME || '/',
  hostname: () => process.env.HOSTNAME || 'airlock',
  userInfo: () => ({ uid: 0, gid: 0, username: process.env.USER || 'root', homedir: os.homedir(), shell: process.env.SHELL || null }),
  uptime: () => process.uptime(),
  loadavg: () => [0, 0, 0],
  totalmem: () => 4294967296,
  freemem: () => 4294967296 - process.memoryUsage().rss,
  availableParallelism: () => 1,
  cpus: () => [{ model: 'wasm32', speed: 0, times: { user: 0, nice: 0, sys: 0, idle: 0, irq: 0 } }],
  networkInterfaces: () => ({}),
  getPriority: () => 0,
  setPriority: () => {},
};

// ---- util ----

function promisify(original) {
  if (typeof original !== 'function') throw invalidArgType('original', 'of type function', original);
  if (original[kPromisifyCustom]) return original[kPromisifyCustom];
  function fn(...args) {
    return new Promise((resolve, reject) => {
      Reflect.apply(original, this, [...args, (err, ...values) => {
        if (err) reject(err);
        else resolve(values.length > 1 ? values : values[0]);
      }]);
    });
  }
  Object.setPrototypeOf(fn, Object.getPrototypeOf(original));
  Object.defineProperty(fn, kPromisifyCustom, { value: fn, configurable: true });
  return Object.defineProperties(fn, Object.getOwnPropertyDescriptors(original));
}
promisify.custom = kPromisifyCustom;
setTimeout[kPromisifyCustom] = (ms, value) => new Promise((r) => setTimeout(r, ms, value));
setImmediate[kPromisifyCustom] = (value) => new Promise((r) => setImmediate(r, value));

function isDeepEqual(a, b, strict, memo = new Map()) {
  if (strict ? Object.is(a, b) : (a == b || (Number.isNaN(a) && Number.isNaN(b)))) return true; // eslint-disable-line eqeqeq
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) {
    return false;
  }
  if (strict && Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false;
  if (toStr(a) !== toStr(b)) return false;
  if (memo.get(a) === b) return true;
  memo.set(a, b);
  if (a instanceof Date) return a.getTime() === b.getTime();
  if (a instanceof RegExp) return String(a) === String(b) && a.lastIndex === b.lastIndex;
  if (isBoxed(a)) return Object.is(a.valueOf(), b.valueOf());
  if (a instanceof Error) {
    if (a.message !== b.message || a.name !== b.name) return false;
  }
  if (ArrayBuffer.isView(a)) {
    if (a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i]) && !(strict ? false : a[i] == b[i])) return false; // eslint-disable-line eqeqeq
  }
  if (a instanceof Map) {
    if (a.size !== b.size) return false;
    for (const [k, v] of a) {
      if (!b.has(k) || !isDeepEqual(v, b.get(k), strict, memo)) return false;
    }
    return true;
  }
  if (a instanceof Set) {
    if (a.size !== b.size) return false;
    outer: for (const v of a) {
      if (b.has(v)) continue;
      if (typeof v === 'object' && v !== null) {
        for (const w of b) if (isDeepEqual(v, w, strict, memo)) continue outer;
      }
      return false;
    }
    return true;
  }
  const ka = Object.keys(a), kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  for (const k of ka) {
    if (!hasOwn(b, k)) return false;
    if (!isDeepEqual(a[k], b[k], strict, memo)) return false;
  }
  if (strict) {
    const sa = Object.getOwnPropertySymbols(a).filter((s) => Object.prototype.propertyIsEnumerable.call(a, s));
    const sb = Object.getOwnPropertySymbols(b).filter((s) => Object.prototype.propertyIsEnumerable.call(b, s));
    if (sa.length !== sb.length) return false;
    for (const s of sa) if (!isDeepEqual(a[s], b[s], strict, memo)) return false;
  }
  return true;
}

const utilTypes = {
  isPromise, isDate, isRegExp, isMap, isSet, isTypedArray,
  isNativeError: isError,
  isArrayBuffer: (v) => v instanceof ArrayBuffer,
  isAnyArrayBuffer: (v) => v instanceof ArrayBuffer || (typeof SharedArrayBuffer !== 'undefined' && v instanceof SharedArrayBuffer),
  isArrayBufferView: (v) => ArrayBuffer.isView(v),
  isDataView: (v) => v instanceof DataView,
  isUint8Array: (v) => v instanceof Uint8Array,
  isWeakMap: (v) => v instanceof WeakMap,
  isWeakSet: (v) => v instanceof WeakSet,
  isBoxedPrimitive: isBoxed,
  isAsyncFunction: (v) => typeof v === 'function' && getCtorName(v) === 'AsyncFunction',
  isGeneratorFunction: (v) => typeof v === 'function' && /GeneratorFunction$/.test(getCtorName(v) || ''),
  isProxy: () => false,
  isSymbolObject: (v) => v instanceof Symbol,
  isNumberObject: (v) => v instanceof Number,
  isStringObject: (v) => v instanceof String,
  isBooleanObject: (v) => v instanceof Boolean,
  isBigIntObject: (v) => typeof BigInt === 'function' && v instanceof BigInt,
  isModuleNamespaceObject: (v) => v !== null && typeof v === 'object' && Object.getPrototypeOf(v) === null && v[Symbol.toStringTag] === 'Module',
};

const util = {
  format, formatWithOptions, inspect, promisify, types: utilTypes,
  isDeepStrictEqual: (a, b) => isDeepEqual(a, b, true),
  inherits(ctor, superCtor) {
    Object.defineProperty(ctor, 'super_', { value: superCtor, writable: true, configurable: true });
    Object.setPrototypeOf(ctor.prototype, superCtor.prototype);
  },
  deprecate(fn, msg, code) {
    let warned = false;
    return function (...args) {
      if (!warned) { warned = true; process.emitWarning(msg, 'DeprecationWarning', code); }
      return new.target ? Reflect.construct(fn, args, new.target) : Reflect.apply(fn, this, args);
    };
  },
  callbackify(fn) {
    return function (...args) {
      const cb = args.pop();
      Reflect.apply(fn, this, args).then((v) => process.nextTick(cb, null, v), (e) => process.nextTick(cb, e || new Error('Promise was rejected with falsy value')));
    };
  },
  debuglog() { const f = () => {}; f.enabled = false; return f; },
  debug() { const f = () => {}; f.enabled = false; return f; },
  isArray: Array.isArray,
  isError,
  isBoolean: (v) => typeof v === 'boolean',
  isNull: (v) => v === null,
  isNullOrUndefined: (v) => v == null,
  isNumber: (v) => typeof v === 'number',
  isString: (v) => typeof v === 'string',
  isSymbol: (v) => typeof v === 'symbol',
  isUndefined: (v) => v === undefined,
  isRegExp, isDate,
  isObject: (v) => v !== null && typeof v === 'object',
  isFunction: (v) => typeof v === 'function',
  isPrimitive: (v) => v === null || (typeof v !== 'object' && typeof v !== 'function'),
  stripVTControlCharacters: (s) => s.replace(/\x1b\[[0-9;]*[A-Za-z]/g, ''),
  styleText: (fmt, text) => text,
  toUSVString: (s) => `${s}`.toWellFormed ? `${s}`.toWellFormed() : `${s}`,
  getSystemErrorName: (n) => Object.keys(ERRNO).find((k) => ERRNO[k][0] === n) || `Unknown system error ${n}`,
  getSystemErrorMap: () => new Map(Object.entries(ERRNO).map(([k, v]) => [v[0], [k, v[1]]])),
  TextEncoder, TextDecoder,
  parseArgs,
  aborted: (signal) => new Promise((r) => signal.addEventListener('abort', r, { once: true })),
};

// util.parseArgs: the common subset (string/boolean options, short aliases, positionals).
function parseArgs({ args = process.argv.slice(2), options = {}, strict = true, allowPositionals = !strict } = {}) {
  const values = { __proto__: null };
  const positionals = [];
  const shorts = {};
  for (const [name, o] of Object.entries(options)) {
    if (o.short) shorts[o.short] = name;
    if (o.default !== undefined) values[name] = o.default;
  }
  const set = (name, v) => {
    const o = options[name];
    if (!o) {
      if (strict) throw codedError(TypeError, 'ERR_PARSE_ARGS_UNKNOWN_OPTION', `Unknown option '${name.length === 1 ? '-' : '--'}${name}'`);
      values[name] = v === undefined ? true : v;
      return;
    }
    if (o.multiple) (values[name] = Array.isArray(values[name]) && values[name] !== o.default ? values[name] : []).push(v);
    else values[name] = v;
  };
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === '--') { positionals.push(...args.slice(i + 1)); break; }
    if (a.startsWith('--')) {
      const [name, inline] = a.slice(2).split(/=(.*)/s);
      const o = options[name];
      if (o && o.type === 'string') set(name, inline !== undefined ? inline : args[++i]);
      else set(name, inline !== undefined ? inline : true);
    } else if (a.startsWith('-') && a.length > 1) {
      for (let j = 1; j < a.length; j++) {
        const name = shorts[a[j]] || a[j];
        const o = options[name];
        if (o && o.type === 'string') { set(name, j + 1 < a.length ? a.slice(j + 1) : args[++i]); break; }
        set(name, true);
      }
    } else {
      if (!allowPositionals) throw codedError(TypeError, 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL', `Unexpected argument '${a}'. This command does not take positional arguments`);
      positionals.push(a);
    }
  }
  return { values, positionals };
}

// ---- assert ----

class AssertionError extends Error {
  constructor(options) {
    const { message, actual, expected, operator } = options;
    super(message !== undefined ? String(message) : assertMessage(actual, expected, operator));
    this.generatedMessage = message === undefined;
    this.code = 'ERR_ASSERTION';
    this.actual = actual;
    this.expected = expected;
    this.operator = operator;
  }
  get name() { return 'AssertionError'; }
}

function assertMessage(actual, expected, operator) {
  const a = inspect(actual), e = inspect(expected);
  switch (operator) {
    case 'strictEqual':
      if (typeof actual === 'object' && actual !== null && typeof expected === 'object' && expected !== null) {
        return `Values have same structure but are not reference-equal:\n\n${a}\n`;
      }
      return `Expected values to be strictly equal:\n\n${a} !== ${e}\n`;
    case 'deepStrictEqual': return `Expected values to be strictly deep-equal:\n+ actual - expected\n\n+ ${a.replaceAll('\n', '\n+ ')}\n- ${e.replaceAll('\n', '\n- ')}`;
    case 'deepEqual': return `Expected values to be loosely deep-equal:\n\n${a}\n\nshould loosely deep-equal\n\n${e}`;
    case 'notStrictEqual': return `Expected "actual" to be strictly unequal to: ${e}`;
    case 'notDeepStrictEqual': return `Expected "actual" not to be strictly deep-equal to: ${e}`;
    case '==': return `${a} == ${e}`;
    case '!=': return `${a} != ${e}`;
    case 'fail': return 'Failed';
    default: return `${a} ${operator} ${e}`;
  }
}

function innerOk(value, message, fnName) {
  if (!value) {
    if (message instanceof Error) throw message;
    throw new AssertionError({
      message: message === undefined ? `${inspect(value)} == true` : message,
      actual: value, expected: true, operator: '==',
    });
  }
}

function makeAssert(strict) {
  const fail = (actual, expected, message, operator) => {
    if (message instanceof Error) throw message;
    throw new AssertionError({ actual, expected, message, operator });
  };
  const assert = (value, message) => innerOk(value, message, 'assert');
  const matches = (err, expected) => {
    if (expected === undefined) return true;
    if (typeof expected === 'function') {
      if (expected.prototype !== undefined && err instanceof expected) return true;
      if (Error.isPrototypeOf(expected) || expected === Error) return false;
      return expected.call({}, err) === true;
    }
    if (expected instanceof RegExp) return expected.test(String(err));
    if (typeof expected === 'object') {
      return Object.keys(expected).every((k) => (expected[k] instanceof RegExp && typeof err[k] === 'string' ? expected[k].test(err[k]) : isDeepEqual(err[k], expected[k], true)));
    }
    return false;
  };
  Object.assign(assert, {
    ok: (value, message) => innerOk(value, message, 'ok'),
    equal: strict
      ? (a, b, m) => { if (!Object.is(a, b)) fail(a, b, m, 'strictEqual'); }
      : (a, b, m) => { if (!(a == b || (Number.isNaN(a) && Number.isNaN(b)))) fail(a, b, m, '=='); }, // eslint-disable-line eqeqeq
    notEqual: strict
      ? (a, b, m) => { if (Object.is(a, b)) fail(a, b, m, 'notStrictEqual'); }
      : (a, b, m) => { if (a == b) fail(a, b, m, '!='); }, // eslint-disable-line eqeqeq
    strictEqual: (a, b, m) => { if (!Object.is(a, b)) fail(a, b, m, 'strictEqual'); },
    notStrictEqual: (a, b, m) => { if (Object.is(a, b)) fail(a, b, m, 'notStrictEqual'); },
    deepEqual: strict
      ? (a, b, m) => { if (!isDeepEqual(a, b, true)) fail(a, b, m, 'deepStrictEqual'); }
      : (a, b, m) => { if (!isDeepEqual(a, b, false)) fail(a, b, m, 'deepEqual'); },
    notDeepEqual: (a, b, m) => { if (isDeepEqual(a, b, strict)) fail(a, b, m, strict ? 'notDeepStrictEqual' : 'notDeepEqual'); },
    deepStrictEqual: (a, b, m) => { if (!isDeepEqual(a, b, true)) fail(a, b, m, 'deepStrictEqual'); },
    notDeepStrictEqual: (a, b, m) => { if (isDeepEqual(a, b, true)) fail(a, b, m, 'notDeepStrictEqual'); },
    fail: (message = 'Failed') => { if (message instanceof Error) throw message; throw new AssertionError({ message, operator: 'fail' }); },
    throws(fn, expected, message) {
      if (typeof expected === 'string') { message = expected; expected = undefined; }
      try { fn(); } catch (err) {
        if (!matches(err, expected)) {
          if (typeof expected === 'function' && expected.prototype !== undefined && !(err instanceof expected)) throw err;
          fail(err, expected, message || 'The error is expected to match the validation', 'throws');
        }
        return;
      }
      fail(undefined, expected, message || `Missing expected exception${expected && expected.name ? ` (${expected.name})` : ''}.`, 'throws');
    },
    doesNotThrow(fn, expected, message) {
      try { fn(); } catch (err) { fail(err, expected, typeof expected === 'string' ? expected : message || `Got unwanted exception.\nActual message: "${err && err.message}"`, 'doesNotThrow'); }
    },
    async rejects(promiseOrFn, expected, message) {
      if (typeof expected === 'string') { message = expected; expected = undefined; }
      try { await (typeof promiseOrFn === 'function' ? promiseOrFn() : promiseOrFn); } catch (err) {
        if (!matches(err, expected)) fail(err, expected, message || 'The error is expected to match the validation', 'rejects');
        return;
      }
      fail(undefined, expected, message || 'Missing expected rejection.', 'rejects');
    },
    async doesNotReject(promiseOrFn, expected, message) {
      try { await (typeof promiseOrFn === 'function' ? promiseOrFn() : promiseOrFn); } catch (err) {
        fail(err, expected, message || `Got unwanted rejection.\nActual message: "${err && err.message}"`, 'doesNotReject');
      }
    },
    match: (s, re, m) => { if (!re.test(s)) fail(s, re, m || `The input did not match the regular expression ${inspect(re)}. Input:\n\n${inspect(s)}\n`, 'match'); },
    doesNotMatch: (s, re, m) => { if (re.test(s)) fail(s, re, m || `The input was expected to not match the regular expression ${inspect(re)}. Input:\n\n${inspect(s)}\n`, 'doesNotMatch'); },
    ifError: (v) => { if (v !== null && v !== undefined) { if (v instanceof Error) throw v; fail(v, null, `ifError got unwanted exception: ${inspect(v)}`, 'ifError'); } },
    AssertionError,
  });
  return assert;
}
const assert = makeAssert(false);
assert.strict = makeAssert(true);
assert.strict.strict = assert.strict;

// ---- crypto (hashes, HMAC, randomness) ----

function toBytes(data, enc) {
  if (typeof data === 'string') return encodeString(data, enc);
  if (ArrayBuffer.isView(data)) return abOf(data);
  if (data instanceof ArrayBuffer) return data;
  throw invalidArgType('data', 'of type string or an instance of Buffer, TypedArray, or DataView', data);
}
function concatBytes(parts) {
  const total = parts.reduce((n, p) => n + p.byteLength, 0);
  const out = new Uint8Array(total);
  let pos = 0;
  for (const p of parts) { out.set(new Uint8Array(p), pos); pos += p.byteLength; }
  return out.buffer;
}
class Hash {
  constructor(alg, key) {
    this._alg = alg;
    this._key = key;
    this._parts = [];
    this._done = false;
    const probe = () => (key === undefined ? ops.hash(alg, '') : ops.hmac(alg, '', ''));
    try { probe(); } catch { throw codedError(Error, 'ERR_OSSL_EVP_UNSUPPORTED', 'Digest method not supported'); }
  }
  update(data, enc) {
    if (this._done) throw codedError(Error, 'ERR_CRYPTO_HASH_FINALIZED', 'Digest already called');
    this._parts.push(toBytes(data, enc));
    return this;
  }
  digest(enc) {
    if (this._done) throw codedError(Error, 'ERR_CRYPTO_HASH_FINALIZED', 'Digest already called');
    this._done = true;
    const data = concatBytes(this._parts);
    const out = new Buffer(this._key === undefined ? ops.hash(this._alg, data) : ops.hmac(this._alg, this._key, data));
    return enc === undefined || enc === 'buffer' ? out : out.toString(enc);
  }
  copy() { const h = new Hash(this._alg, this._key); h._parts = this._parts.slice(); return h; }
}
function randomFill(ta) {
  const bytes = new Uint8Array(ops.random(ta.byteLength));
  new Uint8Array(ta.buffer, ta.byteOffset, ta.byteLength).set(bytes);
  return ta;
}
function randomUUID() {
  const b = new Uint8Array(ops.random(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
const webcrypto = {
  getRandomValues(ta) {
    if (!ArrayBuffer.isView(ta) || ta instanceof Float32Array || ta instanceof Float64Array) throw new TypeError('The data argument must be an integer-type TypedArray');
    if (ta.byteLength > 65536) throw new RangeError(`The ArrayBufferView's byte length (${ta.byteLength}) exceeds the number of bytes of entropy available via this API (65536)`);
    return randomFill(ta);
  },
  randomUUID,
  get subtle() { throw codedError(Error, 'ERR_UNAVAILABLE', "crypto.subtle is not available in airlock's wasm sandbox"); },
};
const crypto = {
  createHash: (alg) => new Hash(alg),
  createHmac: (alg, key) => new Hash(alg, toBytes(key)),
  getHashes: () => ['md5', 'sha1', 'sha224', 'sha256', 'sha384', 'sha512'],
  hash: (alg, data, enc = 'hex') => new Hash(alg).update(data).digest(enc),
  randomBytes(n, cb) {
    const b = new Buffer(ops.random(n));
    if (typeof cb === 'function') { process.nextTick(cb, null, b); return undefined; }
    return b;
  },
  randomFillSync: (b, offset = 0, size = b.byteLength - offset) => { randomFill(new Uint8Array(b.buffer, b.byteOffset + offset, size)); return b; },
  randomFill: (b, ...rest) => { const cb = rest.pop(); crypto.randomFillSync(b, ...rest); process.nextTick(cb, null, b); },
  randomInt(min, max, cb) {
    if (max === undefined || typeof max === 'function') { cb = max; max = min; min = 0; }
    const range = max - min;
    const v = new Uint32Array(ops.random(8));
    const r = min + Math.floor(((v[0] * 2 ** 21 + (v[1] >>> 11)) / 2 ** 53) * range);
    if (typeof cb === 'function') { process.nextTick(cb, null, r); return undefined; }
    return r;
  },
  randomUUID,
  getRandomValues: (ta) => webcrypto.getRandomValues(ta),
  timingSafeEqual(a, b) {
    if (a.byteLength !== b.byteLength) throw codedError(RangeError, 'ERR_CRYPTO_TIMING_SAFE_EQUAL_LENGTH', 'Input buffers must have the same byte length');
    const x = new Uint8Array(abOf(a)), y = new Uint8Array(abOf(b));
    let d = 0;
    for (let i = 0; i < x.length; i++) d |= x[i] ^ y[i];
    return d === 0;
  },
  webcrypto,
  get subtle() { return webcrypto.subtle; },
  constants: {},
};

// ---- readline (over the whole of stdin) ----

class Interface extends EventEmitter {
  constructor(input, output, completer, terminal) {
    super();
    if (input && input.input !== undefined && typeof input.on !== 'function') ({ input, output } = input);
    this.input = input;
    this.output = output;
    this.terminal = false;
    this.line = '';
    this.closed = false;
    this._lines = null;
    this._questions = [];
    this._paused = false;
    this._prompt = '> ';
    this._history = [];
    setImmediate(() => this._pump());
  }
  _load() {
    if (this._lines !== null) return;
    let text = '';
    if (this.input === process.stdin || this.input === undefined) {
      text = hostCall('read', undefined, undefined, () => ops.readStdin(false));
    } else if (this.input && typeof this.input.path === 'string') {
      text = fs.readFileSync(this.input.path, 'utf8');
    }
    const lines = text.split(/\r?\n/);
    if (lines.length && lines[lines.length - 1] === '') lines.pop();
    this._lines = lines;
  }
  _pump() {
    if (this.closed) return;
    this._load();
    while (!this._paused && !this.closed && this._lines.length) {
      const line = this._lines.shift();
      const q = this._questions.shift();
      if (q) q(line);
      else this.emit('line', line);
    }
    if (!this._paused && !this._lines.length && !this.closed) {
      for (const q of this._questions.splice(0)) q('');
      this.close();
    }
  }
  question(query, options, cb) {
    if (typeof options === 'function') cb = options;
    if (this.output && query) this.output.write(query);
    if (this.closed) {
      const err = codedError(Error, 'ERR_USE_AFTER_CLOSE', 'readline was closed');
      if (typeof cb !== 'function') return Promise.reject(err);
      throw err;
    }
    if (typeof cb !== 'function') return new Promise((resolve) => { this._questions.push(resolve); setImmediate(() => this._pump()); });
    this._questions.push(cb);
    setImmediate(() => this._pump());
    return undefined;
  }
  setPrompt(p) { this._prompt = p; }
  getPrompt() { return this._prompt; }
  prompt() { if (this.output) this.output.write(this._prompt); }
  write(data) { if (this.output) this.output.write(String(data)); }
  pause() { this._paused = true; this.emit('pause'); return this; }
  resume() { if (this._paused) { this._paused = false; this.emit('resume'); setImmediate(() => this._pump()); } return this; }
  close() {
    if (this.closed) return;
    this.closed = true;
    this.emit('close');
  }
  getCursorPos() { return { rows: 0, cols: 0 }; }
  async *[Symbol.asyncIterator]() {
    this._load();
    this._paused = true;
    while (this._lines.length) yield this._lines.shift();
    this.close();
  }
}
const readline = {
  Interface,
  createInterface: (input, output, completer, terminal) => new Interface(input, output, completer, terminal),
  clearLine: (s, dir, cb) => { if (cb) process.nextTick(cb); return true; },
  clearScreenDown: (s, cb) => { if (cb) process.nextTick(cb); return true; },
  cursorTo: (s, x, y, cb) => { if (typeof y === 'function') y(); else if (cb) process.nextTick(cb); return true; },
  moveCursor: (s, dx, dy, cb) => { if (cb) process.nextTick(cb); return true; },
  emitKeypressEvents: () => {},
};
const readlinePromises = {
  Interface,
  createInterface: (input, output) => {
    const rl = new Interface(input, output);
    const q = rl.question.bind(rl);
    rl.question = (query, options) => q(query, options);
    return rl;
  },
};

// ---- timers, perf_hooks, tty, string_decoder, module ----

const timersModule = {
  setTimeout, clearTimeout, setInterval, clearInterval: clearTimeout, setImmediate, clearImmediate,
  promises: undefined,
};
const timersPromises = {
  setTimeout: (ms, value) => new Promise((r) => setTimeout(r, ms, value)),
  setImmediate: (value) => new Promise((r) => setImmediate(r, value)),
  async *setInterval(ms, value) { for (;;) { await new Promise((r) => setTimeout(r, ms)); yield value; } },
  scheduler: { wait: (ms) => new Promise((r) => setTimeout(r, ms)), yield: () => new Promise((r) => setImmediate(r)) },
};
timersModule.promises = timersPromises;

const performanceShim = {
  now: () => perfNow() - bootTime,
  get timeOrigin() { return bootWallTime; },
  mark() {}, measure() {}, clearMarks() {}, clearMeasures() {},
  getEntries: () => [], getEntriesByName: () => [], getEntriesByType: () => [],
  toJSON() { return { timeOrigin: this.timeOrigin }; },
};
let bootWallTime = 0;

const tty = { isatty: () => false, ReadStream: class {}, WriteStream: class {} };
