// Module loading: the builtin registry, CommonJS require() over the guest filesystem (relative
// paths, node_modules, package.json main/exports), and the ES module resolve/load hooks the host
// calls from QuickJS's module loader.

const bufferModule = () => ({
  Buffer, SlowBuffer: Buffer, kMaxLength, kStringMaxLength: 2 ** 29 - 24,
  constants: { MAX_LENGTH: kMaxLength, MAX_STRING_LENGTH: 2 ** 29 - 24 },
  atob: G.atob, btoa: G.btoa,
  isUtf8: (b) => { try { new TextDecoder('utf-8', { fatal: true }).decode(b); return true; } catch { return false; } },
  isAscii: (b) => new Uint8Array(abOf(b)).every((x) => x < 128),
  transcode: (b, from, to) => Buffer.from(Buffer.from(b).toString(from), to),
});

const builtinFactories = {
  assert: () => assert, 'assert/strict': () => assert.strict,
  buffer: bufferModule,
  console: () => console,
  constants: () => ({ ...fsConstants, ...os.constants.signals }),
  crypto: () => crypto,
  events: () => EventEmitter,
  fs: () => fs, 'fs/promises': () => fsPromises,
  module: () => Module,
  os: () => os,
  path: () => path, 'path/posix': () => path, 'path/win32': () => path,
  perf_hooks: () => ({ performance: performanceShim, PerformanceObserver: class PerformanceObserver { observe() {} disconnect() {} }, monitorEventLoopDelay: () => ({ enable() {}, disable() {}, percentile: () => 0 }) }),
  process: () => process,
  querystring: () => querystring,
  readline: () => readline, 'readline/promises': () => readlinePromises,
  string_decoder: () => ({ StringDecoder }),
  timers: () => timersModule, 'timers/promises': () => timersPromises,
  tty: () => tty,
  url: () => urlModule,
  util: () => util, 'util/types': () => utilTypes,
};
const unavailable = {};
for (const m of ['net', 'http', 'https', 'http2', 'dgram', 'tls', 'dns', 'dns/promises', 'inspector', 'inspector/promises']) {
  unavailable[m] = 'there is no network';
}
for (const m of ['child_process', 'worker_threads', 'cluster']) unavailable[m] = 'there are no processes';
for (const m of ['stream', 'stream/promises', 'stream/web', 'stream/consumers', 'zlib', 'vm', 'v8', 'repl',
  'async_hooks', 'diagnostics_channel', 'domain', 'punycode', 'trace_events', 'wasi', 'sqlite', 'test', 'sea']) {
  unavailable[m] = "it is not implemented on QuickJS";
}
const builtinCache = new Map();
const isBuiltinName = (n) => hasOwn(builtinFactories, n) || hasOwn(unavailable, n);
const builtinModules = [...Object.keys(builtinFactories), ...Object.keys(unavailable)].sort();

function requireBuiltin(name) {
  if (builtinCache.has(name)) return builtinCache.get(name);
  if (hasOwn(unavailable, name)) {
    const err = new Error(`Module '${name}' is not available in airlock's wasm sandbox: ${unavailable[name]}`);
    err.code = 'ERR_UNAVAILABLE';
    throw err;
  }
  const m = builtinFactories[name]();
  builtinCache.set(name, m);
  return m;
}

// ---- CommonJS ----

const moduleCache = Object.create(null);
const CJS_CONDITIONS = ['require', 'node', 'node-addons', 'default'];
const ESM_CONDITIONS = ['import', 'node', 'node-addons', 'default'];
let mainModule;

function nodeModulePaths(from) {
  const out = [];
  let dir = path.resolve(from);
  for (;;) {
    if (path.basename(dir) !== 'node_modules') out.push(dir === '/' ? '/node_modules' : `${dir}/node_modules`);
    if (dir === '/') break;
    dir = path.dirname(dir);
  }
  return out;
}

function Module(id = '', parent) {
  this.id = id;
  this.path = path.dirname(id);
  this.exports = {};
  this.filename = null;
  this.loaded = false;
  this.children = [];
  this.paths = id.startsWith('/') ? nodeModulePaths(this.path) : [];
  Object.defineProperty(this, 'parent', { value: parent, writable: true, configurable: true, enumerable: false });
  if (parent && parent.children) parent.children.push(this);
}
Module.prototype.require = function require(id) { return requireFrom(this, id); };
Module.prototype._compile = function _compile(content, filename) { compileCJS(this, content, filename); };
Module.Module = Module;
Module._cache = moduleCache;
Module.builtinModules = builtinModules;
Module.isBuiltin = (n) => isBuiltinName(String(n).replace(/^node:/, ''));
Module.wrap = (src) => `(function (exports, require, module, __filename, __dirname) { ${src}\n});`;
Module.wrapper = ['(function (exports, require, module, __filename, __dirname) { ', '\n});'];
Module._extensions = { '.js': () => {}, '.json': () => {}, '.node': () => {} };
Module._resolveFilename = (request, parent) => resolveFilename(request, parent || mainModule || cwdModule(), CJS_CONDITIONS);
Module._load = (request, parent) => requireFrom(parent || cwdModule(), request);
Module._nodeModulePaths = nodeModulePaths;
Module.createRequire = (filename) => {
  const f = typeof filename === 'string' && !filename.startsWith('file:') ? filename : fileURLToPath(filename);
  const m = new Module(f);
  m.filename = f;
  return makeRequire(m);
};
Module.syncBuiltinESMExports = () => {};
Module.register = () => {};
Module.findSourceMap = () => undefined;

function cwdModule() {
  const m = new Module(path.join(process.cwd(), '[eval]'));
  m.filename = m.id;
  return m;
}

function makeRequire(mod) {
  const require = function require(id) {
    if (typeof id !== 'string') throw invalidArgType('id', 'of type string', id);
    if (id === '') throw codedError(TypeError, 'ERR_INVALID_ARG_VALUE', "The argument 'id' must be a non-empty string. Received ''");
    return requireFrom(mod, id);
  };
  require.resolve = (id) => {
    const n = id.replace(/^node:/, '');
    if (isBuiltinName(n)) return id;
    return resolveFilename(id, mod, CJS_CONDITIONS);
  };
  require.resolve.paths = (id) => (isBuiltinName(id.replace(/^node:/, '')) ? null : nodeModulePaths(mod.path));
  require.cache = moduleCache;
  require.extensions = Module._extensions;
  Object.defineProperty(require, 'main', { get: () => mainModule, enumerable: true, configurable: true });
  return require;
}

function requireFrom(parent, id) {
  if (id.startsWith('node:')) {
    const n = id.slice(5);
    if (!isBuiltinName(n)) throw codedError(Error, 'ERR_UNKNOWN_BUILTIN_MODULE', `No such built-in module: ${id}`);
    return requireBuiltin(n);
  }
  if (isBuiltinName(id)) return requireBuiltin(id);
  return loadModule(resolveFilename(id, parent, CJS_CONDITIONS), parent).exports;
}

const kindOf = (p) => ops.kind(p);
function tryFile(p) { return kindOf(p) === 1 ? p : null; }
function tryExtensions(p) {
  for (const ext of ['.js', '.json', '.cjs', '.mjs', '.node']) {
    if (kindOf(p + ext) === 1) return p + ext;
  }
  return null;
}
function tryIndex(p) {
  for (const f of ['index.js', 'index.json', 'index.cjs', 'index.node']) {
    if (kindOf(`${p}/${f}`) === 1) return `${p}/${f}`;
  }
  return null;
}

const packageCache = new Map();
function readPackageJson(dir) {
  if (packageCache.has(dir)) return packageCache.get(dir);
  let pj = null;
  const file = `${dir === '/' ? '' : dir}/package.json`;
  if (kindOf(file) === 1) {
    const text = hostCall('open', file, undefined, () => ops.readFile(file, true));
    try {
      pj = JSON.parse(text);
    } catch (e) {
      throw codedError(Error, 'ERR_INVALID_PACKAGE_CONFIG', `Invalid package config ${file}: ${e.message}`);
    }
    if (pj === null || typeof pj !== 'object') pj = {};
  }
  packageCache.set(dir, pj);
  return pj;
}

// packageType is the "type" of the nearest package.json: "module", "commonjs" or "".
function packageType(file) {
  for (let dir = path.dirname(file); ; dir = path.dirname(dir)) {
    const pj = readPackageJson(dir);
    if (pj) return pj.type === 'module' || pj.type === 'commonjs' ? pj.type : '';
    if (dir === '/' || path.basename(dir) === 'node_modules') return '';
  }
}

function tryDirectory(p, conditions) {
  const pj = readPackageJson(p);
  if (pj && typeof pj.main === 'string' && pj.main !== '') {
    const m = path.resolve(p, pj.main);
    const f = tryFile(m) || tryExtensions(m) || (kindOf(m) === 2 && tryIndex(m));
    if (f) return f;
  }
  return tryIndex(p);
}

function resolveExportsTarget(target, conditions, star) {
  if (typeof target === 'string') return star === undefined ? target : target.replaceAll('*', star);
  if (Array.isArray(target)) {
    for (const t of target) {
      const r = resolveExportsTarget(t, conditions, star);
      if (r) return r;
    }
    return null;
  }
  if (target && typeof target === 'object') {
    for (const key of Object.keys(target)) {
      if (key === 'default' || conditions.includes(key)) {
        const r = resolveExportsTarget(target[key], conditions, star);
        if (r) return r;
      }
    }
  }
  return null;
}

function resolveExports(pkgDir, subpath, exports, conditions) {
  let map = exports;
  if (typeof exports === 'string' || Array.isArray(exports) || (exports && typeof exports === 'object' && !Object.keys(exports).some((k) => k.startsWith('.')))) {
    map = { '.': exports };
  }
  if (!map || typeof map !== 'object') return null;
  let target = null;
  if (hasOwn(map, subpath)) target = resolveExportsTarget(map[subpath], conditions);
  else {
    let best = '';
    for (const key of Object.keys(map)) {
      const star = key.indexOf('*');
      if (star === -1) continue;
      const pre = key.slice(0, star), post = key.slice(star + 1);
      if (subpath.startsWith(pre) && subpath.endsWith(post) && subpath.length >= key.length - 1 && key.length > best.length) {
        best = key;
        target = resolveExportsTarget(map[key], conditions, subpath.slice(pre.length, subpath.length - post.length));
      }
    }
  }
  if (!target) {
    throw codedError(Error, 'ERR_PACKAGE_PATH_NOT_EXPORTED', subpath === '.'
      ? `No "exports" main defined in ${pkgDir}/package.json`
      : `Package subpath '${subpath}' is not defined by "exports" in ${pkgDir}/package.json`);
  }
  return path.resolve(pkgDir, target);
}

function resolvePackage(nmDir, request, conditions) {
  const parts = request.split('/');
  const nameLen = request.startsWith('@') ? 2 : 1;
  const name = parts.slice(0, nameLen).join('/');
  const sub = parts.length > nameLen ? `./${parts.slice(nameLen).join('/')}` : '.';
  const pkgDir = `${nmDir}/${name}`;
  if (kindOf(pkgDir) === 2) {
    const pj = readPackageJson(pkgDir);
    if (pj && pj.exports !== undefined && pj.exports !== null) {
      const f = resolveExports(pkgDir, sub, pj.exports, conditions);
      return tryFile(f) || tryExtensions(f);
    }
  }
  const p = `${nmDir}/${request}`;
  return tryFile(p) || tryExtensions(p) || (kindOf(p) === 2 && tryDirectory(p, conditions)) || null;
}

function requireStack(parent) {
  const stack = [];
  for (let m = parent; m && stack.length < 20; m = m.parent) {
    if (m.filename || m.id) stack.push(m.filename || m.id);
  }
  return stack;
}

function moduleNotFound(request, parent) {
  const stack = requireStack(parent);
  let msg = `Cannot find module '${request}'`;
  if (stack.length) msg += `\nRequire stack:\n- ${stack.join('\n- ')}`;
  const err = new Error(msg);
  err.code = 'MODULE_NOT_FOUND';
  err.requireStack = stack;
  return err;
}

function resolveFilename(request, parent, conditions) {
  const baseDir = parent && parent.path && parent.path.startsWith('/') ? parent.path : process.cwd();
  let found = null;
  if (/^(\.\.?(\/|$)|\/)/.test(request)) {
    const p = path.resolve(baseDir, request);
    if (request.endsWith('/')) found = tryDirectory(p, conditions);
    else found = tryFile(p) || tryExtensions(p) || (kindOf(p) === 2 && tryDirectory(p, conditions)) || null;
  } else if (request.startsWith('#')) {
    // package.json "imports"
    for (let dir = baseDir; ; dir = path.dirname(dir)) {
      const pj = readPackageJson(dir);
      if (pj) {
        if (pj.imports) found = resolveExports(dir, request, pj.imports, conditions);
        break;
      }
      if (dir === '/') break;
    }
  } else {
    const paths = [...nodeModulePaths(baseDir)];
    const np = process.env.NODE_PATH;
    if (np) paths.push(...np.split(':').filter(Boolean));
    for (const nm of paths) {
      found = resolvePackage(nm, request, conditions);
      if (found) break;
    }
  }
  if (!found) throw moduleNotFound(request, parent);
  return found;
}

const stripBOM = (s) => (s.charCodeAt(0) === 0xfeff ? s.slice(1) : s);

function loadModule(filename, parent) {
  const cached = moduleCache[filename];
  if (cached) {
    if (parent && parent.children && !parent.children.includes(cached)) parent.children.push(cached);
    return cached;
  }
  const mod = new Module(filename, parent);
  mod.filename = filename;
  moduleCache[filename] = mod;
  let ok = false;
  try {
    const ext = path.extname(filename);
    if (ext === '.node') throw codedError(Error, 'ERR_DLOPEN_FAILED', `Native addons cannot be loaded in airlock's wasm sandbox: ${filename}`);
    const src = stripBOM(hostCall('open', filename, undefined, () => ops.readFile(filename, true)));
    if (ext === '.json') {
      try { mod.exports = JSON.parse(src); } catch (e) { e.message = `${filename}: ${e.message}`; throw e; }
    } else if (ext === '.mjs' || (ext === '.js' && packageType(filename) === 'module')) {
      throw codedError(Error, 'ERR_REQUIRE_ESM', `require() of ES Module ${filename} not supported.\nInstead change the require of ${path.basename(filename)} to a dynamic import() which is available in all CommonJS modules.`);
    } else {
      compileCJS(mod, src, filename);
    }
    ok = true;
  } finally {
    if (!ok) delete moduleCache[filename];
  }
  mod.loaded = true;
  return mod;
}

const cjsPrefix = '(function (exports, require, module, __filename, __dirname) { ';
function compileCJS(mod, src, filename) {
  lineOneShift.set(filename, cjsPrefix.length);
  const fn = ops.evalScript(cjsWrapper(src), filename);
  const require = makeRequire(mod);
  Reflect.apply(fn, mod.exports, [mod.exports, require, mod, filename, path.dirname(filename)]);
}

// ---- ES modules (called by the host from QuickJS's module loader) ----

function moduleSource(code, filename) {
  if (code.startsWith('#!')) code = `//${code.slice(2)}`;
  const url = pathToFileURL(filename).href;
  const prefix = `import.meta.url=${JSON.stringify(url)};import.meta.filename=${JSON.stringify(filename)};` +
    `import.meta.dirname=${JSON.stringify(path.dirname(filename))};` +
    `import.meta.resolve=(s)=>globalThis[Symbol.for('airlock.resolve')](s,${JSON.stringify(filename)});`;
  lineOneShift.set(filename, prefix.length);
  return prefix + code;
}

function syntheticModule(expr, m) {
  const names = (m !== null && (typeof m === 'object' || typeof m === 'function'))
    ? Object.keys(m).filter((k) => k !== 'default' && /^[A-Za-z_$][\w$]*$/.test(k))
    : [];
  const lines = [`const __airlock_m = ${expr};`, 'export default __airlock_m;'];
  names.forEach((n, i) => lines.push(`const __airlock_${i} = __airlock_m[${JSON.stringify(n)}];`));
  if (names.length) lines.push(`export { ${names.map((n, i) => `__airlock_${i} as ${n}`).join(', ')} };`);
  return lines.join('\n');
}

function esmResolve(base, spec) {
  const n = spec.startsWith('node:') ? spec.slice(5) : spec;
  if (spec.startsWith('node:') || isBuiltinName(n)) {
    if (!isBuiltinName(n)) throw codedError(Error, 'ERR_UNKNOWN_BUILTIN_MODULE', `No such built-in module: ${spec}`);
    return `node:${n}`;
  }
  if (spec.startsWith('file:')) spec = fileURLToPath(spec);
  const parent = { filename: base, path: base.startsWith('/') ? path.dirname(base) : process.cwd() };
  try {
    return resolveFilename(spec, parent, ESM_CONDITIONS);
  } catch (e) {
    if (e.code !== 'MODULE_NOT_FOUND') throw e;
    const rel = /^(\.\.?(\/|$)|\/)/.test(spec);
    const err = new Error(`Cannot find ${rel ? 'module' : 'package'} '${rel ? path.resolve(parent.path, spec) : spec}' imported from ${base}`);
    err.code = 'ERR_MODULE_NOT_FOUND';
    throw err;
  }
}

function esmLoad(name) {
  if (name.startsWith('node:')) {
    const id = name.slice(5);
    return syntheticModule(`globalThis[Symbol.for('airlock.builtin')](${JSON.stringify(id)})`, requireBuiltin(id));
  }
  const src = stripBOM(hostCall('open', name, undefined, () => ops.readFile(name, true)));
  const ext = path.extname(name);
  if (ext === '.json') return `export default JSON.parse(${JSON.stringify(src)});`;
  if (ext === '.node') throw codedError(Error, 'ERR_UNKNOWN_FILE_EXTENSION', `Unknown file extension ".node" for ${name}`);
  if (isCommonJS(name, src)) {
    const m = loadModule(name, undefined).exports;
    return syntheticModule(`globalThis[Symbol.for('airlock.cjs')](${JSON.stringify(name)})`, m);
  }
  return moduleSource(src, name);
}

function isCommonJS(file, src) {
  const ext = path.extname(file);
  if (ext === '.cjs') return true;
  if (ext === '.mjs') return false;
  const t = packageType(file);
  if (t === 'module') return false;
  if (t === 'commonjs') return true;
  // No "type": node 22 runs the file as CommonJS unless that fails to parse on ESM syntax.
  if (!esmHint.test(src)) return true;
  try {
    ops.compile(cjsWrapper(src), file, false);
    return true;
  } catch (e) {
    return !(e instanceof SyntaxError);
  }
}

// esmHint is a cheap pre-check for import/export/import.meta/await before trying a parse.
const esmHint = /(^|[^\w$.])(import\s*[\w{*'"$]|import\s*\.\s*meta|export\s|await\s)/;
const looksLikeESM = (src, err) => err instanceof SyntaxError && esmHint.test(src);
const cjsWrapper = (src) => `(function (exports, require, module, __filename, __dirname) { ${src.startsWith('#!') ? `//${src.slice(2)}` : src}\n})`;

// Hidden hooks the synthetic module sources use.
Object.defineProperty(G, Symbol.for('airlock.builtin'), { value: requireBuiltin });
Object.defineProperty(G, Symbol.for('airlock.cjs'), { value: (f) => loadModule(f, undefined).exports });
Object.defineProperty(G, Symbol.for('airlock.resolve'), {
  value: (s, base) => {
    const r = esmResolve(base, s);
    return r.startsWith('node:') ? r : pathToFileURL(r).href;
  },
});
