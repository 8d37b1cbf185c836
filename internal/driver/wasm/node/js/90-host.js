// The entry points the host calls: boot() with the run's configuration, step() from the event
// loop, uncaught() for exceptions that reached the top, finish() at the end, and the ES module
// resolve/load hooks. The prelude function returns them as `host`.

// Math.random: QuickJS seeds its PRNG once, when the context is created, and every run starts
// from the same memory image; so runs reseed a xoshiro128** from host entropy at boot.
let rs0 = 1, rs1 = 2, rs2 = 3, rs3 = 4;
const rotl = (x, k) => (x << k) | (x >>> (32 - k));
function next32() {
  const result = Math.imul(rotl(Math.imul(rs1, 5), 7), 9) >>> 0;
  const t = rs1 << 9;
  rs2 ^= rs0; rs3 ^= rs1; rs1 ^= rs2; rs0 ^= rs3; rs2 ^= t;
  rs3 = rotl(rs3, 11);
  return result;
}
Object.defineProperty(Math, 'random', {
  value: function random() { return ((next32() >>> 5) * 67108864 + (next32() >>> 6)) / 9007199254740992; },
  writable: true, configurable: true, enumerable: false,
});

// process.env is parsed from the host's JSON on first use.
let pendingEnv = '{}';
let envObject = null;
Object.defineProperty(process, 'env', {
  get() {
    if (envObject === null) envObject = makeEnv(JSON.parse(pendingEnv));
    return envObject;
  },
  set(v) { envObject = v; },
  enumerable: true,
  configurable: true,
});

function makeEnv(vars) {
  const target = {};
  for (const k of Object.keys(vars)) target[k] = String(vars[k]);
  return new Proxy(target, {
    set(t, k, v) { t[k] = typeof k === 'symbol' ? v : String(v); return true; },
    defineProperty(t, k, d) { if ('value' in d) d = { ...d, value: String(d.value) }; return Reflect.defineProperty(t, k, d); },
  });
}

// sourceContext renders node's "file:line\n<source line>\n   ^\n" header for an error whose top
// frame is in a file we can read (or the -e code).
let evalSource = null;
function sourceContext(err) {
  const stack = errorStack(err);
  const m = /\n\s+at (?:.*? \()?(.+?):(\d+):(\d+)\)?(?:\n|$)/.exec(stack);
  if (!m) return '';
  const [, file, lineStr, colStr] = m;
  let src;
  if ((file === '[eval]' || file === '[stdin]') && evalSource !== null) src = evalSource;
  else if (file.startsWith('/')) {
    try { src = ops.readFile(file, true); } catch { return ''; }
  } else return '';
  const line = src.split('\n')[Number(lineStr) - 1];
  if (line === undefined || line.length > 500) return '';
  const col = Math.max(1, Number(colStr));
  return `${file}:${lineStr}\n${line}\n${' '.repeat(col - 1)}^\n\n`;
}

function printFatal(err) {
  let text;
  if (err instanceof Error || isError(err)) {
    let ctx = '';
    try { ctx = sourceContext(err); } catch { ctx = ''; }
    text = `${ctx}${inspect(err)}\n`;
  } else {
    text = `Uncaught ${inspect(err)}\n`;
  }
  text += `\nNode.js ${NODE_VERSION} (airlock wasm, QuickJS-NG ${ENGINE_VERSION})\n`;
  ops.write(2, text);
}

// handleUncaught returns the exit code to end with, or -1 when a listener took the error.
function handleUncaught(err, isRejection, promise) {
  try {
    if (isRejection) {
      if (process.listenerCount('unhandledRejection') > 0) {
        process.emit('unhandledRejection', err, promise);
        return -1;
      }
      if (unhandledMode === 'none') return -1;
      if (unhandledMode === 'warn' || unhandledMode === 'warn-with-error-code') {
        ops.write(2, `(node:42) UnhandledPromiseRejectionWarning: ${err instanceof Error ? errorStack(err) : inspect(err)}\n`);
        if (unhandledMode === 'warn-with-error-code') exitCode = 1;
        return -1;
      }
      if (!(err instanceof Error)) {
        const wrapped = new Error('This error originated either by throwing inside of an async function without a catch block, ' +
          `or by rejecting a promise which was not handled with .catch(). The promise rejected with the reason "${inspect(err)}".`);
        wrapped.name = 'UnhandledPromiseRejection';
        wrapped.code = 'ERR_UNHANDLED_REJECTION';
        err = wrapped;
      }
    }
    if (process.listenerCount('uncaughtException') > 0) {
      process.emit('uncaughtException', err, isRejection ? 'unhandledRejection' : 'uncaughtException');
      return -1;
    }
  } catch (e) {
    printFatal(e);
    return 7;
  }
  printFatal(err);
  return 1;
}

function runExitHandlers(code) {
  if (exiting) return;
  exiting = true;
  if (exitCode === undefined) exitCode = code;
  process.emit('exit', exitCode);
}

// exitNow ends the run from inside JS: 'exit' listeners, then the host's exit (never returns).
function exitNow(code) {
  if (exitCode === undefined || code !== 0) exitCode = code;
  try { runExitHandlers(code); } catch (e) { printFatal(e); exitCode = 7; }
  ops.exit(exitCode === undefined ? 0 : exitCode);
}

// fatal handles an exception thrown by a callback the prelude invoked (timers, ticks).
function fatal(err) {
  const code = handleUncaught(err, false);
  if (code >= 0) exitNow(code);
}

function uncaught(err, isRejection, promise) {
  const code = handleUncaught(err, isRejection, promise);
  if (code >= 0) exitCode = code;
  return code;
}

function finish(code) {
  if (code >= 0) exitCode = code;
  try {
    runExitHandlers(exitCode === undefined ? 0 : exitCode);
  } catch (e) {
    printFatal(e);
    return 7;
  }
  return exitCode === undefined ? 0 : exitCode;
}

function resolveMain(script) {
  const p = path.resolve(script);
  const found = tryFile(p) || tryExtensions(p) || (kindOf(p) === 2 && tryDirectory(p, CJS_CONDITIONS));
  if (!found) throw moduleNotFound(p, undefined);
  return found;
}

// The -e / stdin globals require, module, exports, __filename and __dirname are accessors,
// defined once in the snapshot, that build the [eval] module only when a script uses them.
let evalName = null; // '[eval]' or '[stdin]' while running such code; null otherwise
let evalMod = null;
let evalRequire = null;
function getEvalModule() {
  if (evalName === null) return undefined;
  if (evalMod === null) {
    evalMod = new Module(evalName);
    evalMod.filename = path.join(process.cwd(), evalName);
    evalMod.paths = nodeModulePaths(process.cwd());
    evalMod.path = process.cwd();
    evalRequire = makeRequire(evalMod);
  }
  return evalMod;
}
for (const [name, get] of Object.entries({
  require: () => (getEvalModule() ? evalRequire : undefined),
  module: () => getEvalModule(),
  exports: () => getEvalModule()?.exports,
  __filename: () => evalName ?? undefined,
  __dirname: () => (evalName === null ? undefined : '.'),
})) {
  Object.defineProperty(G, name, {
    get,
    set(v) { Object.defineProperty(G, name, { value: v, writable: true, configurable: true, enumerable: false }); },
    configurable: true,
    enumerable: false,
  });
}

function evalCode(code, name, print, inputType) {
  evalSource = code;
  const asModule = () => {
    evalName = null;
    const filename = path.join(process.cwd(), name === '[eval]' ? '[eval1]' : name);
    return ops.evalModule(moduleSource(code, filename), filename);
  };
  if (inputType === 'module') return asModule();
  evalName = name;
  let result;
  try {
    result = ops.evalScript(code, name);
  } catch (e) {
    // node 22 runs input that fails to parse as CommonJS because of ESM syntax (import,
    // export, import.meta, top-level await) again as an ES module.
    if (!print && inputType !== 'commonjs' && looksLikeESM(code, e)) return asModule();
    throw e;
  }
  if (print) console.log(result);
  return undefined;
}

function runFile(script, check) {
  const filename = resolveMain(script);
  process.argv[1] = path.resolve(script);
  const src = stripBOM(hostCall('open', filename, undefined, () => ops.readFile(filename, true)));
  const ext = path.extname(filename);
  const esm = ext === '.mjs' || (ext !== '.cjs' && !isCommonJS(filename, src));
  if (check) {
    if (esm) ops.compile(moduleSource(src, filename), filename, true);
    else ops.compile(cjsWrapper(src), filename, false);
    return undefined;
  }
  if (esm) return ops.evalModule(moduleSource(src, filename), filename);
  if (ext === '.json') {
    loadModule(filename, undefined);
    return undefined;
  }
  const mod = new Module('.', null);
  mod.filename = filename;
  mod.path = path.dirname(filename);
  mod.paths = nodeModulePaths(mod.path);
  mainModule = mod;
  process.mainModule = mod;
  moduleCache[filename] = mod;
  try {
    compileCJS(mod, src, filename);
  } catch (e) {
    delete moduleCache[filename];
    throw e;
  }
  mod.loaded = true;
  return undefined;
}

// boot sets the run up from the host's arguments (see bootArgs in vm.go) and runs the script.
function boot(mode, code, script, dir, argv, envJSON, extraJSON) {
  const seed = new Uint32Array(ops.random(16));
  [rs0, rs1, rs2, rs3] = seed;
  if ((rs0 | rs1 | rs2 | rs3) === 0) rs0 = 1;
  bootTime = perfNow();
  bootWallTime = Date.now();
  cwd = dir;
  pendingEnv = envJSON;
  process.argv = argv === '' ? [process.execPath] : [process.execPath, ...argv.split('\0')];
  let inputType = '';
  if (extraJSON !== '') {
    const x = JSON.parse(extraJSON);
    process.execArgv = x.execArgv;
    unhandledMode = x.unhandled || 'throw';
    inputType = x.inputType;
    for (const m of x.preload) requireFrom(cwdModule(), m);
  }
  switch (mode) {
    case 'eval': return evalCode(code, '[eval]', false, inputType);
    case 'print': return evalCode(code, '[eval]', true, inputType);
    case 'stdin': return evalCode(hostCall('read', undefined, undefined, () => ops.readStdin(false)), '[stdin]', false, inputType);
    case 'file':
      process.argv.splice(1, 0, script);
      return runFile(script, false);
    case 'check':
      process.argv.splice(1, 0, script);
      return runFile(script, true);
  }
  throw new Error(`unknown mode ${mode}`);
}

const host = { boot, step, uncaught, finish, esmResolve, esmLoad };
