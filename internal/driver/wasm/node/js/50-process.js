// process, its standard streams, and console.

const process = Object.create(EventEmitter.prototype);
EventEmitter.call(process);

let cwd = '/';
let exitCode; // process.exitCode
let exiting = false;
let unhandledMode = 'throw';
let bootTime = 0;

function validateExitCode(code) {
  if (code === undefined || code === null) return undefined;
  const n = typeof code === 'string' && /^-?\d+$/.test(code.trim()) ? Number(code) : code;
  if (typeof n !== 'number' || !Number.isInteger(n)) {
    throw invalidArgType('code', 'of type number', code);
  }
  return n;
}

function makeWritable(fd) {
  const stream = Object.create(EventEmitter.prototype);
  EventEmitter.call(stream);
  Object.assign(stream, {
    fd,
    isTTY: false,
    writable: true,
    writableLength: 0,
    writableHighWaterMark: 16384,
    _isStdio: true,
    write(chunk, encoding, cb) {
      if (typeof encoding === 'function') { cb = encoding; encoding = undefined; }
      let data;
      if (typeof chunk === 'string') data = normEnc(encoding) === 'utf8' || encoding === undefined ? chunk : encodeString(chunk, encoding);
      else if (ArrayBuffer.isView(chunk)) data = abOf(chunk);
      else throw invalidArgType('chunk', 'of type string or an instance of Buffer, TypedArray, or DataView', chunk);
      ops.write(fd, data);
      if (typeof cb === 'function') process.nextTick(cb, null);
      return true;
    },
    end(chunk, encoding, cb) {
      if (typeof chunk === 'function') { cb = chunk; chunk = undefined; }
      if (chunk != null) this.write(chunk, encoding);
      if (typeof cb === 'function') process.nextTick(cb);
      return this;
    },
    cork() {}, uncork() {},
    setDefaultEncoding() { return this; },
    hasColors() { return false; },
    getColorDepth() { return 1; },
    getWindowSize() { return [80, 24]; },
    destroy() { return this; },
  });
  return stream;
}

// process.stdin reads all of stdin from the host the first time data is wanted, then emits it
// as one chunk, like a pipe that delivered everything at once.
function makeStdin() {
  const stdin = Object.create(EventEmitter.prototype);
  EventEmitter.call(stdin);
  let encoding = null;
  let state = 'idle'; // idle → scheduled → done
  let buffered = null; // for read()
  const readAll = () => {
    const b = new Buffer(hostCall('read', undefined, undefined, () => ops.readStdin(true)));
    return encoding ? b.toString(encoding) : b;
  };
  const flow = () => {
    if (state !== 'scheduled') return;
    state = 'done';
    let data;
    try { data = readAll(); } catch (e) { stdin.emit('error', e); return; }
    if (stdin.listenerCount('readable') > 0) {
      buffered = data.length ? data : null;
      stdin.emit('readable');
      buffered = null;
      stdin.emit('readable');
    } else if (data.length) {
      stdin.emit('data', data);
    }
    stdin.readable = false;
    stdin.emit('end');
    stdin.emit('close');
  };
  const schedule = () => {
    if (state === 'idle') { state = 'scheduled'; setImmediate(flow); }
  };
  Object.assign(stdin, {
    fd: 0,
    isTTY: false,
    readable: true,
    setEncoding(e) { encoding = normEnc(e) || 'utf8'; return this; },
    resume() { schedule(); return this; },
    pause() { return this; },
    unref() { return this; },
    ref() { return this; },
    setRawMode() { return this; },
    read() { const b = buffered; buffered = null; return b; },
    pipe(dest) {
      this.on('data', (c) => dest.write(c));
      this.on('end', () => { if (dest !== process.stdout && dest !== process.stderr && typeof dest.end === 'function') dest.end(); });
      schedule();
      return dest;
    },
    destroy() { state = 'done'; return this; },
    async *[Symbol.asyncIterator]() {
      if (state === 'done') return;
      state = 'done';
      const data = readAll();
      if (data.length) yield data;
    },
  });
  stdin.on('newListener', (ev) => {
    if (ev === 'data' || ev === 'readable' || ev === 'end') schedule();
  });
  return stdin;
}

const hrtime = (prev) => {
  const ns = ops.hrtime();
  let sec = Math.floor(ns / 1e9);
  let nsec = ns - sec * 1e9;
  if (prev) {
    sec -= prev[0];
    nsec -= prev[1];
    if (nsec < 0) { sec--; nsec += 1e9; }
  }
  return [sec, Math.round(nsec)];
};
hrtime.bigint = () => BigInt(Math.round(ops.hrtime()));

const processProps = {
  title: 'node',
  version: NODE_VERSION,
  versions: {
    node: NODE_VERSION.slice(1), quickjs: ENGINE_VERSION, 'quickjs-ng': ENGINE_VERSION,
    'quickjs-wasi': '3.6.2', airlock: 'wasm', v8: '0.0.0-quickjs', uv: '0.0.0', modules: '127',
  },
  arch: 'wasm32',
  platform: 'wasi',
  release: { name: 'node', lts: undefined },
  pid: 42,
  ppid: 1,
  execPath: '/usr/local/bin/node',
  argv0: 'node',
  argv: ['/usr/local/bin/node'],
  execArgv: [],
  env: {},
  features: { inspector: false, debug: false, uv: false, ipv6: false, tls_alpn: false, tls_sni: false, tls_ocsp: false, tls: false, cached_builtins: true, typescript: false },
  config: { variables: {} },
  allowedNodeEnvironmentFlags: new Set(),
  stdout: makeWritable(1),
  stderr: makeWritable(2),
  stdin: makeStdin(),
  cwd() { return cwd; },
  chdir(dir) {
    const s = toPath(dir, 'directory');
    const a = path.resolve(s);
    const k = ops.kind(a);
    if (k === 0) throw uvException('ENOENT', 'chdir', a, s);
    if (k !== 2) throw uvException('ENOTDIR', 'chdir', a, s);
    cwd = a;
  },
  exit(code) {
    if (code !== undefined) exitCode = validateExitCode(code);
    exitNow(exitCode === undefined ? 0 : exitCode);
  },
  reallyExit(code) { ops.exit(code | 0); },
  abort() { ops.write(2, 'Aborted\n'); ops.exit(134); },
  kill(pid, sig) {
    if (Number(pid) === 42) { exitNow(128 + 15); }
    throw uvException('ESRCH', 'kill');
  },
  hrtime,
  uptime() { return ops.hrtime() / 1e9; },
  memoryUsage() {
    const used = ops.memoryUsage ? ops.memoryUsage() : 0;
    return { rss: used, heapTotal: used, heapUsed: used, external: 0, arrayBuffers: 0 };
  },
  cpuUsage(prev) {
    const us = Math.round(ops.hrtime() / 1000);
    return prev ? { user: us - prev.user, system: 0 } : { user: us, system: 0 };
  },
  resourceUsage() { return { userCPUTime: Math.round(ops.hrtime() / 1000), systemCPUTime: 0, maxRSS: 0 }; },
  nextTick,
  emitWarning(warning, type, code) {
    if (typeof type === 'object' && type !== null) ({ type, code } = type);
    const w = typeof warning === 'string' ? Object.assign(new Error(warning), { name: type || 'Warning' }) : warning;
    if (code !== undefined) w.code = code;
    if (process.listenerCount('warning') > 0) { process.nextTick(() => process.emit('warning', w)); return; }
    if (process.noDeprecation && w.name === 'DeprecationWarning') return;
    ops.write(2, `(node:42) ${code ? `[${code}] ` : ''}${w.name}: ${w.message}\n`);
  },
  umask() { return 0o022; },
  getuid() { return 0; }, geteuid() { return 0; }, getgid() { return 0; }, getegid() { return 0; },
  getgroups() { return [0]; },
  binding(name) { throw codedError(Error, 'ERR_UNAVAILABLE', `No such module: ${name}`); },
  setUncaughtExceptionCaptureCallback() {},
  hasUncaughtExceptionCaptureCallback() { return false; },
};
for (const [k, v] of Object.entries(processProps)) {
  Object.defineProperty(process, k, { value: v, writable: true, configurable: true, enumerable: true });
}
process.memoryUsage.rss = () => process.memoryUsage().rss;
Object.defineProperty(process, 'exitCode', {
  get() { return exitCode; },
  set(v) { exitCode = validateExitCode(v); },
  enumerable: true,
  configurable: true,
});
Object.defineProperty(process, Symbol.toStringTag, { value: 'process', configurable: true });

// ---- console ----

const counts = new Map();
const timersLabels = new Map();
let groupIndent = '';

function writeLine(fd, text) {
  if (groupIndent !== '') text = groupIndent + text.replaceAll('\n', `\n${groupIndent}`);
  ops.write(fd, `${text}\n`);
}

const console = {
  log(...args) { writeLine(1, formatWithOptions(undefined, ...args)); },
  warn(...args) { writeLine(2, formatWithOptions(undefined, ...args)); },
  dir(obj, options) { writeLine(1, inspect(obj, { customInspect: false, ...options })); },
  dirxml(...args) { console.log(...args); },
  trace(...args) {
    const err = new Error(formatWithOptions(undefined, ...args));
    err.name = 'Trace';
    writeLine(2, errorStack(err).replace(/\n\s+at trace \([^)]*\)/, ''));
  },
  assert(cond, ...args) {
    if (!cond) {
      args[0] = `Assertion failed${args.length === 0 ? '' : `: ${args[0]}`}`;
      console.warn(...args);
    }
  },
  count(label = 'default') {
    label = `${label}`;
    const n = (counts.get(label) || 0) + 1;
    counts.set(label, n);
    console.log(`${label}: ${n}`);
  },
  countReset(label = 'default') { counts.delete(`${label}`); },
  group(...labels) {
    if (labels.length) console.log(...labels);
    groupIndent += '  ';
  },
  groupEnd() { groupIndent = groupIndent.slice(0, -2); },
  time(label = 'default') { timersLabels.set(`${label}`, perfNow()); },
  timeEnd(label = 'default') {
    const t = timersLabels.get(`${label}`);
    if (t === undefined) { process.emitWarning(`No such label '${label}' for console.timeEnd()`); return; }
    timersLabels.delete(`${label}`);
    console.log(`${label}: ${formatDuration(perfNow() - t)}`);
  },
  timeLog(label = 'default', ...data) {
    const t = timersLabels.get(`${label}`);
    if (t === undefined) { process.emitWarning(`No such label '${label}' for console.timeLog()`); return; }
    console.log(`${label}: ${formatDuration(perfNow() - t)}`, ...data);
  },
  table(data, properties) { writeLine(1, renderTable(data, properties)); },
  profile() {}, profileEnd() {}, timeStamp() {},
};
console.info = console.log;
console.debug = console.log;
console.error = console.warn;
console.groupCollapsed = console.group;

function formatDuration(ms) {
  if (ms >= 1000) {
    if (ms >= 60000) {
      if (ms >= 3600000) return `${(ms / 3600000).toFixed(3)}h`;
      return `${(ms / 60000).toFixed(3)}min`;
    }
    return `${(ms / 1000).toFixed(3)}s`;
  }
  return `${Number(ms.toFixed(3))}ms`;
}

// renderTable draws console.table's box like node (values left-aligned, node >= 20).
function renderTable(data, properties) {
  if (data === null || typeof data !== 'object') return formatWithOptions(undefined, data);
  const cell = (v) => (typeof v === 'string' ? strEscape(v) : inspect(v, { depth: 1, breakLength: Infinity, compact: true }));
  const indexKey = '(index)';
  const valuesKey = 'Values';
  const rows = [];
  const columns = [];
  let hasValues = false;
  const entries = data instanceof Map ? [...data.entries()]
    : data instanceof Set ? [...data.values()].map((v, i) => [i, v])
    : Object.keys(data).map((k) => [k, data[k]]);
  const iterIndex = data instanceof Map ? '(iteration index)' : data instanceof Set ? '(iteration index)' : indexKey;
  for (const [k, v] of entries) {
    const row = { [iterIndex]: String(k) };
    if (data instanceof Map) row.Key = cell(k);
    if (v !== null && typeof v === 'object' && !(v instanceof Date)) {
      for (const c of Object.keys(v)) {
        if (properties && !properties.includes(c)) continue;
        if (!columns.includes(c)) columns.push(c);
        row[c] = cell(v[c]);
      }
    } else {
      hasValues = true;
      row[valuesKey] = cell(v);
    }
    rows.push(row);
  }
  const head = [iterIndex];
  if (data instanceof Map) head.push('Key');
  head.push(...(properties || columns));
  if (hasValues) head.push(valuesKey);
  const widths = head.map((h) => Math.max(h.length, ...rows.map((r) => (r[h] === undefined ? 0 : r[h].length))) + 2);
  const line = (l, m, r) => l + widths.map((w) => '─'.repeat(w)).join(m) + r;
  const fmtRow = (cells) => '│' + cells.map((c, i) => ` ${c}${' '.repeat(widths[i] - 1 - c.length)}`).join('│') + '│';
  const out = [line('┌', '┬', '┐'), fmtRow(head), line('├', '┼', '┤')];
  for (const r of rows) out.push(fmtRow(head.map((h) => (r[h] === undefined ? '' : r[h]))));
  out.push(line('└', '┴', '┘'));
  return out.join('\n');
}

class Console {
  constructor(stdout, stderr) {
    if (stdout && typeof stdout === 'object' && !stdout.write) ({ stdout, stderr } = stdout);
    const out = stdout || process.stdout;
    const err = stderr || out;
    const w = (s, text) => s.write(`${groupIndent}${text}\n`);
    Object.assign(this, console);
    this.log = this.info = this.debug = (...a) => w(out, formatWithOptions(undefined, ...a));
    this.warn = this.error = (...a) => w(err, formatWithOptions(undefined, ...a));
    this.dir = (o, opts) => w(out, inspect(o, { customInspect: false, ...opts }));
    this.table = (d, p) => w(out, renderTable(d, p));
  }
}
console.Console = Console;
