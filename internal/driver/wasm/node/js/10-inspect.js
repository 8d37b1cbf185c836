// util.inspect and util.format, following node's output rules closely: single quotes, 80
// column break length, depth 2, compact 3, grouped number arrays, <ref *1> / [Circular *1].

const inspectDefaults = {
  showHidden: false, depth: 2, colors: false, customInspect: true, showProxy: false,
  maxArrayLength: 100, maxStringLength: 10000, breakLength: 80, compact: 3, sorted: false,
  getters: false, numericSeparator: false,
};
const kObjectType = 0, kArrayExtrasType = 2;

function inspect(value, opts) {
  const ctx = {
    budget: {}, indentationLvl: 0, seen: [], currentDepth: 0, circular: undefined,
    ...inspectDefaults, ...inspect.defaultOptions,
  };
  if (arguments.length > 1 && typeof opts !== 'object') {
    // Legacy signature: inspect(value, showHidden, depth, colors).
    if (opts !== undefined) ctx.showHidden = opts;
    if (arguments.length > 2 && arguments[2] !== undefined) ctx.depth = arguments[2];
  } else if (opts) {
    for (const k of Object.keys(opts)) {
      if (hasOwn(inspectDefaults, k) || k === 'stylize') ctx[k] = opts[k];
    }
  }
  if (ctx.depth === Infinity) ctx.depth = null;
  if (ctx.maxArrayLength === null) ctx.maxArrayLength = Infinity;
  if (ctx.maxStringLength === null) ctx.maxStringLength = Infinity;
  return formatValue(ctx, value, 0);
}
inspect.custom = kCustomInspect;
inspect.defaultOptions = { ...inspectDefaults };
inspect.colors = Object.create(null);
inspect.styles = Object.create(null);

const identRe = /^[a-zA-Z_][a-zA-Z_0-9]*$/;
const escapeNeeded = /[\x00-\x1f\x27\x5c\x7f-\x9f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const escapeNeededNoQuote = /[\x00-\x1f\x5c\x7f-\x9f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const metaEscapes = { 8: '\\b', 9: '\\t', 10: '\\n', 12: '\\f', 13: '\\r', 92: '\\\\' };

function strEscape(str) {
  let quote = "'";
  let test = escapeNeeded;
  if (str.includes("'")) {
    if (!str.includes('"')) quote = '"';
    else if (!str.includes('`') && !str.includes('${')) quote = '`';
    if (quote !== "'") test = escapeNeededNoQuote;
  }
  if (!test.test(str)) return quote + str + quote;
  let out = '';
  for (let i = 0; i < str.length; i++) {
    const c = str.charCodeAt(i);
    if (c === 39 && quote === "'") out += "\\'";
    else if (metaEscapes[c] !== undefined) out += metaEscapes[c];
    else if (c < 0x20 || (c >= 0x7f && c <= 0x9f)) out += '\\x' + c.toString(16).toUpperCase().padStart(2, '0');
    else if (c >= 0xd800 && c <= 0xdfff) {
      const n = str.charCodeAt(i + 1);
      if (c <= 0xdbff && n >= 0xdc00 && n <= 0xdfff) { out += str[i] + str[i + 1]; i++; }
      else out += '\\u' + c.toString(16).toUpperCase();
    } else out += str[i];
  }
  return quote + out + quote;
}

function formatNumber(n, numericSeparator) {
  if (Object.is(n, -0)) return '-0';
  if (!numericSeparator) return `${n}`;
  const s = `${n}`;
  if (!Number.isInteger(n)) return s;
  return s.replace(/\B(?=(\d{3})+(?!\d))/g, '_');
}

function formatPrimitive(ctx, value) {
  switch (typeof value) {
    case 'string': {
      let trailer = '';
      if (value.length > ctx.maxStringLength) {
        const remaining = value.length - ctx.maxStringLength;
        value = value.slice(0, ctx.maxStringLength);
        trailer = `... ${remaining} more character${remaining > 1 ? 's' : ''}`;
      }
      if (ctx.compact !== true && value.length > 16 && value.length > ctx.breakLength - ctx.indentationLvl - 4) {
        return value.split(/(?<=\n)/).map(strEscape).join(` +\n${' '.repeat(ctx.indentationLvl + 2)}`) + trailer;
      }
      return strEscape(value) + trailer;
    }
    case 'number': return formatNumber(value, ctx.numericSeparator);
    case 'bigint': return `${value}n`;
    case 'boolean': return `${value}`;
    case 'undefined': return 'undefined';
    case 'symbol': return symbolToString(value);
  }
  return String(value);
}

function symbolToString(sym) {
  const d = sym.description;
  if (d === undefined) return 'Symbol()';
  return `Symbol(${d})`;
}

// getCtorName finds the nearest constructor name on the prototype chain; null for null-proto.
function getCtorName(obj) {
  let o = obj;
  let guard = 0;
  while (o !== null && o !== undefined && guard++ < 1000) {
    const d = Object.getOwnPropertyDescriptor(o, 'constructor');
    if (d !== undefined && typeof d.value === 'function' && d.value.name !== '') {
      return String(d.value.name);
    }
    o = Object.getPrototypeOf(o);
  }
  return Object.getPrototypeOf(obj) === null ? null : 'Object';
}

function getPrefix(constructor, tag, fallback, size = '') {
  if (constructor === null) {
    if (tag !== '' && fallback !== tag) return `[${fallback}${size}: null prototype] [${tag}] `;
    return `[${fallback}${size}: null prototype] `;
  }
  if (tag !== '' && constructor !== tag) return `${constructor}${size} [${tag}] `;
  return `${constructor}${size} `;
}

function getKeys(value, showHidden) {
  let keys;
  const symbols = Object.getOwnPropertySymbols(value);
  if (showHidden) {
    keys = Object.getOwnPropertyNames(value);
    if (symbols.length) keys.push(...symbols);
  } else {
    keys = Object.keys(value);
    for (const s of symbols) {
      if (Object.prototype.propertyIsEnumerable.call(value, s)) keys.push(s);
    }
  }
  return keys;
}

const isIndex = (k) => typeof k === 'string' && /^(0|[1-9][0-9]*)$/.test(k) && Number(k) < 4294967295;

function getNonIndexKeys(value, showHidden) {
  return getKeys(value, showHidden).filter((k) => !isIndex(k));
}

const toStr = (v) => Object.prototype.toString.call(v);
const isError = (v) => v instanceof Error || toStr(v) === '[object Error]';
const isDate = (v) => v instanceof Date;
const isRegExp = (v) => v instanceof RegExp;
const isMap = (v) => v instanceof Map;
const isSet = (v) => v instanceof Set;
const isTypedArray = (v) => ArrayBuffer.isView(v) && !(v instanceof DataView);
const isPromise = (v) => v instanceof Promise;

function isBoxed(v) {
  return v instanceof Number || v instanceof String || v instanceof Boolean ||
    (typeof BigInt === 'function' && v instanceof BigInt) || v instanceof Symbol;
}

function formatValue(ctx, value, recurseTimes, typedArray) {
  if (typeof value !== 'object' && typeof value !== 'function') return formatPrimitive(ctx, value);
  if (value === null) return 'null';
  if (ctx.customInspect) {
    let fn;
    try { fn = value[kCustomInspect]; } catch { fn = undefined; }
    if (typeof fn === 'function' && fn !== inspect) {
      const depth = ctx.depth === null ? null : ctx.depth - recurseTimes;
      const opts = { ...ctx, depth, stylize: (s) => s };
      delete opts.seen; delete opts.budget; delete opts.indentationLvl; delete opts.currentDepth; delete opts.circular;
      const ret = fn.call(value, depth, opts, inspect);
      if (ret !== value) {
        if (typeof ret !== 'string') return formatValue(ctx, ret, recurseTimes);
        return ret.replaceAll('\n', `\n${' '.repeat(ctx.indentationLvl)}`);
      }
    }
  }
  if (ctx.seen.includes(value)) {
    let index = 1;
    if (ctx.circular === undefined) {
      ctx.circular = new Map([[value, index]]);
    } else {
      index = ctx.circular.get(value);
      if (index === undefined) {
        index = ctx.circular.size + 1;
        ctx.circular.set(value, index);
      }
    }
    return `[Circular *${index}]`;
  }
  return formatRaw(ctx, value, recurseTimes, typedArray);
}

function formatRaw(ctx, value, recurseTimes, typedArray) {
  let keys;
  const constructor = getCtorName(value);
  let tag = '';
  try { tag = value[Symbol.toStringTag]; } catch { tag = ''; }
  if (typeof tag !== 'string' || (tag !== '' && Object.prototype.propertyIsEnumerable.call(value, Symbol.toStringTag))) tag = '';
  let base = '';
  let formatter = () => [];
  let braces;
  let extrasType = kObjectType;
  let noIterator = true;

  if (Symbol.iterator in value || constructor === null) {
    noIterator = false;
    if (Array.isArray(value)) {
      const prefix = (constructor !== 'Array' || tag !== '') ? getPrefix(constructor, tag, 'Array', `(${value.length})`) : '';
      keys = getNonIndexKeys(value, ctx.showHidden);
      braces = [`${prefix}[`, ']'];
      if (value.length === 0 && keys.length === 0) return `${braces[0]}]`;
      extrasType = kArrayExtrasType;
      formatter = formatArray;
    } else if (isSet(value)) {
      const prefix = getPrefix(constructor, tag, 'Set', `(${value.size})`);
      keys = getKeys(value, ctx.showHidden);
      formatter = formatSet;
      if (value.size === 0 && keys.length === 0) return `${prefix}{}`;
      braces = [`${prefix}{`, '}'];
    } else if (isMap(value)) {
      const prefix = getPrefix(constructor, tag, 'Map', `(${value.size})`);
      keys = getKeys(value, ctx.showHidden);
      formatter = formatMap;
      if (value.size === 0 && keys.length === 0) return `${prefix}{}`;
      braces = [`${prefix}{`, '}'];
    } else if (isTypedArray(value)) {
      keys = getNonIndexKeys(value, ctx.showHidden);
      const fallback = constructor === null ? tag : '';
      const prefix = getPrefix(constructor, tag, fallback, `(${value.length})`);
      braces = [`${prefix}[`, ']'];
      if (value.length === 0 && keys.length === 0 && !ctx.showHidden) return `${braces[0]}]`;
      formatter = formatTypedArray;
      extrasType = kArrayExtrasType;
    } else {
      noIterator = true;
    }
  }
  if (noIterator) {
    keys = getKeys(value, ctx.showHidden);
    braces = ['{', '}'];
    if (constructor === null && tag === 'Module') {
      braces[0] = '[Module: null prototype] {';
      if (keys.length === 0) return '[Module: null prototype] {}';
    } else if (constructor === 'Object') {
      if (toStr(value) === '[object Arguments]') braces = ['[Arguments] [', ']'];
      else if (tag !== '') braces[0] = `${getPrefix(constructor, tag, 'Object')}{`;
      if (keys.length === 0) return `${braces[0]}${braces[1]}`;
    } else if (typeof value === 'function') {
      base = getFunctionBase(value, constructor, tag);
      keys = keys.filter((k) => k !== 'prototype');
      if (keys.length === 0) return base;
    } else if (isRegExp(value)) {
      base = RegExp.prototype.toString.call(value);
      const prefix = getPrefix(constructor, tag, 'RegExp');
      if (prefix !== 'RegExp ') base = `${prefix}${base}`;
      keys = keys.filter((k) => k !== 'lastIndex');
      if (keys.length === 0 || (ctx.depth !== null && recurseTimes > ctx.depth)) return base;
    } else if (isDate(value)) {
      const t = value.getTime();
      base = Number.isNaN(t) ? 'Invalid Date' : value.toISOString();
      const prefix = getPrefix(constructor, tag, 'Date');
      if (prefix !== 'Date ') base = `${prefix}${base}`;
      if (keys.length === 0) return base;
    } else if (isError(value)) {
      base = formatError(value, constructor, tag, ctx, keys);
      if (keys.length === 0) return base;
    } else if (value instanceof ArrayBuffer) {
      const prefix = getPrefix(constructor, tag, 'ArrayBuffer');
      if (typedArray === undefined) formatter = formatArrayBuffer;
      else if (keys.length === 0) return `${prefix}{ byteLength: ${formatNumber(value.byteLength)} }`;
      braces[0] = `${prefix}{`;
      keys.unshift('byteLength');
    } else if (value instanceof DataView) {
      braces[0] = `${getPrefix(constructor, tag, 'DataView')}{`;
      keys.unshift('byteLength', 'byteOffset', 'buffer');
    } else if (isPromise(value)) {
      braces[0] = `${getPrefix(constructor, tag, 'Promise')}{`;
      formatter = formatPromise;
    } else if (value instanceof WeakSet) {
      braces[0] = `${getPrefix(constructor, tag, 'WeakSet')}{`;
      formatter = () => ['<items unknown>'];
    } else if (value instanceof WeakMap) {
      braces[0] = `${getPrefix(constructor, tag, 'WeakMap')}{`;
      formatter = () => ['<items unknown>'];
    } else if (isBoxed(value)) {
      const prim = value.valueOf();
      let type = 'Object';
      if (typeof prim === 'number') type = 'Number';
      else if (typeof prim === 'string') { type = 'String'; keys = keys.filter((k) => !isIndex(k) && k !== 'length'); }
      else if (typeof prim === 'boolean') type = 'Boolean';
      else if (typeof prim === 'bigint') type = 'BigInt';
      else if (typeof prim === 'symbol') type = 'Symbol';
      base = `[${type}`;
      if (type !== constructor) base += constructor === null ? ' (null prototype)' : ` (${constructor})`;
      base += `: ${formatPrimitive({ ...ctx, compact: true }, prim)}]`;
      if (tag !== '' && tag !== constructor) base += ` [${tag}]`;
      if (keys.length === 0) return base;
    } else {
      if (keys.length === 0) return `${getPrefix(constructor, tag, 'Object')}{}`;
      braces[0] = `${getPrefix(constructor, tag, 'Object')}{`;
    }
  }
  if (ctx.depth !== null && recurseTimes > ctx.depth) {
    let name = getPrefix(constructor, tag, 'Object').slice(0, -1);
    if (constructor !== null) name = `[${name}]`;
    return name;
  }
  recurseTimes += 1;
  ctx.seen.push(value);
  ctx.currentDepth = recurseTimes;
  let output;
  try {
    output = formatter(ctx, value, recurseTimes);
    for (let i = 0; i < keys.length; i++) {
      output.push(formatProperty(ctx, value, recurseTimes, keys[i], extrasType));
    }
  } catch (err) {
    ctx.seen.pop();
    if (err instanceof RangeError || (err && err.name === 'InternalError')) {
      return `[${constructor || 'Object'}: Inspection interrupted prematurely. Maximum call stack size exceeded.]`;
    }
    throw err;
  }
  if (ctx.circular !== undefined) {
    const index = ctx.circular.get(value);
    if (index !== undefined) {
      const ref = `<ref *${index}>`;
      if (ctx.compact !== true) base = base === '' ? ref : `${ref} ${base}`;
      else braces[0] = `${ref} ${braces[0]}`;
    }
  }
  ctx.seen.pop();
  if (ctx.sorted) {
    const cmp = ctx.sorted === true ? undefined : ctx.sorted;
    if (extrasType === kObjectType) output.sort(cmp);
  }
  return reduceToSingleString(ctx, output, base, braces, extrasType, recurseTimes, value);
}

function getFunctionBase(value, constructor, tag) {
  let src = '';
  try { src = Function.prototype.toString.call(value); } catch { /* revoked proxy */ }
  if (src.startsWith('class') && src.endsWith('}')) {
    let base = `[class ${value.name || '(anonymous)'}`;
    const sup = Object.getPrototypeOf(value);
    if (sup && sup !== Function.prototype && sup.name) base += ` extends ${sup.name}`;
    else if (/^class\s*[\w$]*\s+extends\s/.test(src) && sup === Function.prototype) base += ' extends [null prototype]';
    base += ']';
    if (constructor !== 'Function' && constructor !== null) base += ` [${constructor}]`;
    return base;
  }
  let type = 'Function';
  if (constructor === 'AsyncFunction' || constructor === 'GeneratorFunction' || constructor === 'AsyncGeneratorFunction') type = constructor;
  let base = `[${type}`;
  if (constructor === null) base += ' (null prototype)';
  base += value.name === '' ? ' (anonymous)' : `: ${value.name}`;
  base += ']';
  if (constructor !== type && constructor !== null && constructor !== 'Function') base += ` ${constructor}`;
  if (tag !== '' && constructor !== tag) base += ` [${tag}]`;
  return base;
}

// Error stacks in V8's shape ("Name: message\n    at fn (file:line:col)"), which QuickJS-NG
// produces through Error.prepareStackTrace. The prelude's own frames are left out, and columns on
// line 1 are corrected for the wrapper text CommonJS and ES module sources get there.
const lineOneShift = new Map(); // filename → characters prepended to its line 1
// The host functions, and call/apply, which V8 leaves out of stacks too.
const hiddenNatives = new Set([...Object.keys(ops), 'call', 'apply']);
const kStackHead = Symbol('airlock.stackHead');

function formatFrame(cs) {
  const file = cs.getFileName();
  const fn = cs.getFunctionName();
  if (cs.isNative() || file === undefined || file === null) {
    return hiddenNatives.has(fn) ? null : `    at ${fn || '<anonymous>'} (native)`;
  }
  if (file === 'node:internal/airlock') return null;
  const line = cs.getLineNumber();
  let col = cs.getColumnNumber();
  if (line === 1 && lineOneShift.has(file)) col = Math.max(1, col - lineOneShift.get(file));
  const loc = `${file}:${line}:${col}`;
  if (!fn || fn === '<eval>' || fn === '<anonymous>') return `    at ${loc}`;
  return `    at ${fn} (${loc})`;
}

function stackHead(err) {
  try { return Error.prototype.toString.call(err); } catch { return 'Error'; }
}

// (An assignment, not defineProperty: QuickJS-NG keeps the hook behind an accessor.)
const OOMError = G.InternalError;
Error.prepareStackTrace = function prepareStackTrace(err, callsites) {
  // The run hit the memory limit, whether or not the script catches this.
  if (OOMError !== undefined && err instanceof OOMError && err.message === 'out of memory') ops.oom();
  const head = stackHead(err);
  if (err !== null && typeof err === 'object') {
    try { Object.defineProperty(err, kStackHead, { value: head, configurable: true }); } catch { /* frozen */ }
  }
  let out = head;
  for (const cs of callsites) {
    const f = formatFrame(cs);
    if (f) out += `\n${f}`;
  }
  return out;
};

// errorStack is err.stack for printing: the header is rebuilt from the error's current name and
// message (V8 formats stacks lazily, so a name set after construction shows; here the stack was
// formatted at construction).
function errorStack(err) {
  let stack;
  try { stack = err.stack; } catch { stack = undefined; }
  const head = stackHead(err);
  if (typeof stack !== 'string' || stack === '') return head;
  let captured;
  try { captured = err[kStackHead]; } catch { captured = undefined; }
  if (typeof captured === 'string' && stack.startsWith(captured)) stack = head + stack.slice(captured.length);
  else if (/^\s+at /.test(stack)) stack = `${head}\n${stack}`;
  return stack.replace(/\n$/, '');
}

function formatError(err, constructor, tag, ctx, keys) {
  const name = err.name != null ? String(err.name) : 'Error';
  let stack = errorStack(err);
  // Keys whose value the stack already shows are dropped.
  for (const k of ['name', 'message', 'stack']) {
    const i = keys.indexOf(k);
    if (i !== -1) {
      let v;
      try { v = err[k]; } catch { v = undefined; }
      if (typeof v === 'string' && stack.includes(v)) keys.splice(i, 1);
    }
  }
  if ('cause' in err && !keys.includes('cause')) keys.push('cause');
  if (Array.isArray(err.errors) && !keys.includes('errors')) keys.push('errors');
  // Name the class when the stack would not (class Foo extends Error without setting name).
  if (constructor === null || (name.endsWith('Error') && stack.startsWith(name) &&
      (stack.length === name.length || stack[name.length] === ':' || stack[name.length] === '\n'))) {
    let fallback = 'Error';
    if (constructor === null) {
      const start = stack.match(/^([A-Z][a-z_ A-Z0-9[\]()-]+)(?::|\n\s+at)/) || stack.match(/^([a-z_A-Z0-9-]*Error)$/);
      fallback = (start && start[1]) || '';
      stack = `[${fallback}: null prototype]` + stack.slice(fallback.length);
    } else if (constructor !== name && !constructor.includes(name) && !name.includes(constructor)) {
      stack = `${constructor} [${name}]` + stack.slice(name.length);
    }
  }
  if (typeof err.code === 'string' && stack.startsWith(name) && !stack.startsWith(`${name} [`) &&
      /^ERR_/.test(err.code) && Object.prototype.propertyIsEnumerable.call(err, 'code') === false) {
    stack = `${name} [${err.code}]` + stack.slice(name.length);
  }
  const msg = err.message;
  let pos = (typeof msg === 'string' && msg && stack.indexOf(msg)) || -1;
  if (pos !== -1) pos += msg.length;
  const stackStart = stack.indexOf('\n    at', pos);
  if (stackStart === -1) stack = `[${stack}]`;
  if (ctx.indentationLvl !== 0) stack = stack.replaceAll('\n', `\n${' '.repeat(ctx.indentationLvl)}`);
  return stack;
}

function formatArray(ctx, value, recurseTimes) {
  const len = value.length;
  const max = Math.min(Math.max(0, ctx.maxArrayLength), len);
  const output = [];
  let holes = 0;
  let shown = 0;
  const flushHoles = () => {
    if (holes > 0) {
      output.push(`<${holes} empty item${holes > 1 ? 's' : ''}>`);
      shown++;
      holes = 0;
    }
  };
  for (let i = 0; i < len && shown < max; i++) {
    if (!hasOwn(value, i)) { holes++; continue; }
    flushHoles();
    if (shown >= max) break;
    output.push(formatProperty(ctx, value, recurseTimes, i, kArrayExtrasType));
    shown++;
    if (shown >= max && i + 1 < len) {
      const remaining = len - i - 1;
      output.push(`... ${remaining} more item${remaining > 1 ? 's' : ''}`);
      return output;
    }
  }
  flushHoles();
  return output;
}

function formatTypedArray(ctx, value) {
  const len = value.length;
  const max = Math.min(Math.max(0, ctx.maxArrayLength), len);
  const output = [];
  for (let i = 0; i < max; i++) {
    output.push(typeof value[i] === 'bigint' ? `${value[i]}n` : formatNumber(value[i], ctx.numericSeparator));
  }
  if (len > max) output.push(`... ${len - max} more item${len - max > 1 ? 's' : ''}`);
  if (ctx.showHidden) {
    ctx.indentationLvl += 2;
    for (const k of ['BYTES_PER_ELEMENT', 'length', 'byteLength', 'byteOffset', 'buffer']) {
      output.push(`[${k}]: ${formatValue(ctx, value[k], ctx.currentDepth, true)}`);
    }
    ctx.indentationLvl -= 2;
  }
  return output;
}

function formatSet(ctx, value, recurseTimes) {
  const max = Math.min(Math.max(0, ctx.maxArrayLength), value.size);
  const output = [];
  ctx.indentationLvl += 2;
  let i = 0;
  for (const v of value) {
    if (i++ >= max) break;
    output.push(formatValue(ctx, v, recurseTimes));
  }
  if (value.size > max) output.push(`... ${value.size - max} more item${value.size - max > 1 ? 's' : ''}`);
  ctx.indentationLvl -= 2;
  return output;
}

function formatMap(ctx, value, recurseTimes) {
  const max = Math.min(Math.max(0, ctx.maxArrayLength), value.size);
  const output = [];
  ctx.indentationLvl += 2;
  let i = 0;
  for (const [k, v] of value) {
    if (i++ >= max) break;
    output.push(`${formatValue(ctx, k, recurseTimes)} => ${formatValue(ctx, v, recurseTimes)}`);
  }
  if (value.size > max) output.push(`... ${value.size - max} more item${value.size - max > 1 ? 's' : ''}`);
  ctx.indentationLvl -= 2;
  return output;
}

function formatArrayBuffer(ctx, value) {
  const bytes = new Uint8Array(value);
  const max = Math.min(ctx.maxArrayLength, bytes.length);
  let str = '';
  for (let i = 0; i < max; i++) str += (i ? ' ' : '') + bytes[i].toString(16).padStart(2, '0');
  const remaining = bytes.length - max;
  if (remaining > 0) str += ` ... ${remaining} more byte${remaining > 1 ? 's' : ''}`;
  return [`[Uint8Contents]: <${str}>`];
}

function formatPromise(ctx, value, recurseTimes) {
  const state = ops.promiseState(value);
  if (state === 0) return ['<pending>'];
  if (state < 0) return [];
  ctx.indentationLvl += 2;
  const str = formatValue(ctx, ops.promiseResult(value), recurseTimes);
  ctx.indentationLvl -= 2;
  return [state === 2 ? `<rejected> ${str}` : str];
}

function formatProperty(ctx, value, recurseTimes, key, type) {
  let desc = Object.getOwnPropertyDescriptor(value, key) || { value: value[key], enumerable: true };
  let str;
  if (desc.value !== undefined || !('get' in desc || 'set' in desc)) {
    ctx.indentationLvl += 2;
    str = formatValue(ctx, desc.value, recurseTimes);
    ctx.indentationLvl -= 2;
  } else if (desc.get !== undefined) {
    const label = desc.set !== undefined ? 'Getter/Setter' : 'Getter';
    if (ctx.getters) {
      try {
        const v = desc.get.call(value);
        ctx.indentationLvl += 2;
        str = `[${label}: ${formatValue(ctx, v, recurseTimes)}]`;
        ctx.indentationLvl -= 2;
      } catch (err) {
        str = `[${label}: <Inspection threw (${err.message})>]`;
      }
    } else str = `[${label}]`;
  } else if (desc.set !== undefined) str = '[Setter]';
  else str = 'undefined';
  if (type === kArrayExtrasType && typeof key === 'number') return str;
  let name;
  if (typeof key === 'symbol') name = `[${symbolToString(key)}]`;
  else if (key === '__proto__') name = "['__proto__']";
  else if (desc.enumerable === false) name = `[${identRe.test(key) ? key : strEscape(key)}]`;
  else if (identRe.test(key)) name = key;
  else name = strEscape(String(key));
  return `${name}: ${str}`;
}

function isBelowBreakLength(ctx, output, start, base) {
  let total = output.length + start;
  if (total + output.length > ctx.breakLength) return false;
  for (const s of output) {
    total += s.length;
    if (total > ctx.breakLength) return false;
  }
  return base === '' || !base.includes('\n');
}

function reduceToSingleString(ctx, output, base, braces, extrasType, recurseTimes, value) {
  if (ctx.compact !== true) {
    if (typeof ctx.compact === 'number' && ctx.compact >= 1) {
      const entries = output.length;
      if (extrasType === kArrayExtrasType && entries > 6) output = groupArrayElements(ctx, output, value);
      if (ctx.currentDepth - recurseTimes < ctx.compact && entries === output.length) {
        const start = output.length + ctx.indentationLvl + braces[0].length + base.length + 10;
        if (isBelowBreakLength(ctx, output, start, base)) {
          const joined = output.join(', ');
          if (!joined.includes('\n')) return `${base ? `${base} ` : ''}${braces[0]} ${joined} ${braces[1]}`;
        }
      }
    }
    const ind = `\n${' '.repeat(ctx.indentationLvl)}`;
    return `${base ? `${base} ` : ''}${braces[0]}${ind}  ${output.join(`,${ind}  `)}${ind}${braces[1]}`;
  }
  if (isBelowBreakLength(ctx, output, 0, base)) {
    return `${braces[0]}${base ? ` ${base}` : ''} ${output.join(', ')} ${braces[1]}`;
  }
  const ind = ' '.repeat(ctx.indentationLvl);
  const ln = base === '' && braces[0].length === 1 ? ' ' : `${base ? ` ${base}` : ''}\n${ind}  `;
  return `${braces[0]}${ln}${output.join(`,\n${ind}  `)} ${braces[1]}`;
}

// groupArrayElements lays long arrays of short items out in aligned columns, as node does.
function groupArrayElements(ctx, output, value) {
  let totalLength = 0;
  let maxLength = 0;
  let outputLength = output.length;
  if (ctx.maxArrayLength < output.length) outputLength--; // the "... more items" entry
  const separatorSpace = 2;
  const dataLen = new Array(outputLength);
  for (let i = 0; i < outputLength; i++) {
    const len = output[i].length;
    dataLen[i] = len;
    totalLength += len + separatorSpace;
    if (maxLength < len) maxLength = len;
  }
  const actualMax = maxLength + separatorSpace;
  if (actualMax * 3 + ctx.indentationLvl < ctx.breakLength &&
      (totalLength / actualMax > 5 || maxLength <= 6)) {
    const averageBias = Math.sqrt(actualMax - totalLength / output.length);
    const biasedMax = Math.max(actualMax - 3 - averageBias, 1);
    const columns = Math.min(
      Math.round(Math.sqrt(2.5 * biasedMax * outputLength) / biasedMax),
      Math.floor((ctx.breakLength - ctx.indentationLvl) / actualMax),
      ctx.compact * 4,
      15,
    );
    if (columns <= 1) return output;
    const tmp = [];
    const maxLineLength = [];
    for (let i = 0; i < columns; i++) {
      let lineLength = 0;
      for (let j = i; j < output.length; j += columns) {
        if (dataLen[j] > lineLength) lineLength = dataLen[j];
      }
      maxLineLength.push(lineLength + separatorSpace);
    }
    let padStart = true;
    if (value !== undefined) {
      for (let i = 0; i < output.length; i++) {
        if (typeof value[i] !== 'number' && typeof value[i] !== 'bigint') { padStart = false; break; }
      }
    }
    for (let i = 0; i < outputLength; i += columns) {
      const max = Math.min(i + columns, outputLength);
      let str = '';
      let j = i;
      for (; j < max - 1; j++) {
        const cell = `${output[j]}, `;
        str += padStart ? cell.padStart(maxLineLength[j - i], ' ') : cell.padEnd(maxLineLength[j - i], ' ');
      }
      if (padStart) str += output[j].padStart(maxLineLength[j - i] - separatorSpace, ' ');
      else str += output[j];
      tmp.push(str);
    }
    if (ctx.maxArrayLength < output.length) tmp.push(output[outputLength]);
    output = tmp;
  }
  return output;
}

// ---- util.format ----

function hasBuiltInToString(value) {
  let proto = value;
  while (proto !== null && typeof proto === 'object') {
    const d = Object.getOwnPropertyDescriptor(proto, 'toString');
    if (d !== undefined) {
      return d.value === Object.prototype.toString || d.value === Error.prototype.toString ||
        d.value === Array.prototype.toString || d.value === Date.prototype.toString ||
        d.value === RegExp.prototype.toString || d.value === Function.prototype.toString;
    }
    proto = Object.getPrototypeOf(proto);
  }
  return true;
}

function tryStringify(v) {
  try {
    return JSON.stringify(v);
  } catch (err) {
    if (err instanceof TypeError && /circular/i.test(err.message)) return '[Circular]';
    throw err;
  }
}

function formatWithOptions(inspectOptions, ...args) {
  const first = args[0];
  let a = 0;
  let str = '';
  let join = '';
  if (typeof first === 'string') {
    if (args.length === 1) return first;
    let lastPos = 0;
    for (let i = 0; i < first.length - 1; i++) {
      if (first.charCodeAt(i) !== 37) continue; // '%'
      const c = first[++i];
      if (a + 1 !== args.length) {
        let s;
        switch (c) {
          case 's': {
            const v = args[++a];
            if (typeof v === 'number') s = formatNumber(v);
            else if (typeof v === 'bigint') s = `${v}n`;
            else if (typeof v !== 'object' || v === null || !hasBuiltInToString(v)) s = String(v);
            else s = inspect(v, { ...inspectOptions, depth: 0, compact: 3 });
            break;
          }
          case 'j': s = tryStringify(args[++a]); break;
          case 'd': {
            const v = args[++a];
            if (typeof v === 'bigint') s = `${v}n`;
            else if (typeof v === 'symbol') s = 'NaN';
            else s = formatNumber(Number(v));
            break;
          }
          case 'O': s = inspect(args[++a], inspectOptions); break;
          case 'o': s = inspect(args[++a], { ...inspectOptions, showHidden: true, showProxy: true, depth: 4 }); break;
          case 'i': {
            const v = args[++a];
            if (typeof v === 'bigint') s = `${v}n`;
            else if (typeof v === 'symbol') s = 'NaN';
            else s = formatNumber(Number.parseInt(v));
            break;
          }
          case 'f': {
            const v = args[++a];
            s = typeof v === 'symbol' ? 'NaN' : formatNumber(Number.parseFloat(v));
            break;
          }
          case 'c': a++; s = ''; break;
          case '%': str += first.slice(lastPos, i); lastPos = i + 1; continue;
          default: continue;
        }
        if (lastPos !== i - 1) str += first.slice(lastPos, i - 1);
        str += s;
        lastPos = i + 1;
      } else if (c === '%') {
        str += first.slice(lastPos, i);
        lastPos = i + 1;
      }
    }
    if (lastPos !== 0) {
      a++;
      join = ' ';
      if (lastPos < first.length) str += first.slice(lastPos);
    }
  }
  while (a < args.length) {
    const v = args[a];
    str += join;
    str += typeof v !== 'string' ? inspect(v, inspectOptions) : v;
    join = ' ';
    a++;
  }
  return str;
}

function format(...args) {
  return formatWithOptions(undefined, ...args);
}
