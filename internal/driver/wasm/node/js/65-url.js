// URL and URLSearchParams (a compact WHATWG-style parser: special schemes, IPv6 literals,
// percent-encoding, dot segments; no IDNA), plus the url module's helpers.

const specialPorts = { 'http:': '80', 'https:': '443', 'ws:': '80', 'wss:': '443', 'ftp:': '21', 'file:': '' };
const isSpecial = (scheme) => hasOwn(specialPorts, scheme);

function pctEncode(s, keep) {
  let out = '';
  for (const ch of s) {
    const c = ch.codePointAt(0);
    if (c > 0x20 && c < 0x7f && !keep.includes(ch)) out += ch;
    else if (c <= 0x20 || c >= 0x7f || keep.includes(ch)) {
      for (const b of new Uint8Array(ops.encode(ch, 'utf8'))) out += `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
    }
  }
  return out;
}
const PATH_SET = '"#<>?`{}', QUERY_SET = '"#<>', SPECIAL_QUERY_SET = '"#<>\'', FRAGMENT_SET = '"<>`', USERINFO_SET = '"#<>?`{}/:;=@[\\]^|';

function invalidURL(input) {
  const err = codedError(TypeError, 'ERR_INVALID_URL', 'Invalid URL');
  err.input = input;
  return err;
}

function removeDotSegments(segs) {
  const out = [];
  for (let i = 0; i < segs.length; i++) {
    const s = segs[i];
    const last = i === segs.length - 1;
    if (s === '..' || s.toLowerCase() === '%2e%2e' || s.toLowerCase() === '.%2e' || s.toLowerCase() === '%2e.') {
      if (out.length > 0) out.pop();
      if (last) out.push('');
    } else if (s === '.' || s.toLowerCase() === '%2e') {
      if (last) out.push('');
    } else out.push(s);
  }
  return out;
}

function parseURL(input, base) {
  const raw = input;
  input = input.replace(/^[\u0000-\u0020]+|[\u0000-\u0020]+$/g, '').replace(/[\t\n\r]/g, '');
  const u = { protocol: '', username: '', password: '', hostname: '', port: '', pathname: '', search: '', hash: '', opaque: false };
  const m = /^([a-zA-Z][a-zA-Z0-9+\-.]*):(.*)$/s.exec(input);
  let rest;
  if (m) {
    u.protocol = `${m[1].toLowerCase()}:`;
    rest = m[2];
    if (isSpecial(u.protocol) && base && base.protocol === u.protocol && !/^[/\\]/.test(rest)) {
      return parseRelative(rest, base, raw);
    }
  } else {
    if (!base) throw invalidURL(raw);
    return parseRelative(input, base, raw);
  }
  const special = isSpecial(u.protocol);
  if (special) rest = rest.replace(/\\/g, '/');
  if (special || rest.startsWith('//')) {
    if (special && u.protocol !== 'file:') rest = rest.replace(/^\/*/, '');
    else rest = rest.replace(/^\/\//, '');
    const end = rest.search(/[/?#]/);
    const authority = end === -1 ? rest : rest.slice(0, end);
    rest = end === -1 ? '' : rest.slice(end);
    parseAuthority(u, authority, raw);
    if (special && u.protocol !== 'file:' && u.hostname === '') throw invalidURL(raw);
  } else {
    u.opaque = !rest.startsWith('/');
  }
  parsePathQueryFragment(u, rest, special);
  return u;
}

function parseAuthority(u, authority, raw) {
  const at = authority.lastIndexOf('@');
  if (at !== -1) {
    const info = authority.slice(0, at);
    authority = authority.slice(at + 1);
    const colon = info.indexOf(':');
    u.username = pctEncode(colon === -1 ? info : info.slice(0, colon), USERINFO_SET);
    u.password = colon === -1 ? '' : pctEncode(info.slice(colon + 1), USERINFO_SET);
  }
  let host = authority, port = '';
  const pm = /^(\[[^\]]*\]|[^:]*)(?::(.*))?$/.exec(authority);
  if (pm) { host = pm[1]; port = pm[2] || ''; }
  if (port !== '') {
    if (!/^\d+$/.test(port) || Number(port) > 65535) throw invalidURL(raw);
    port = String(Number(port));
    if (specialPorts[u.protocol] === port) port = '';
  }
  if (isSpecial(u.protocol)) {
    try { host = decodeURIComponent(host); } catch { throw invalidURL(raw); }
    host = host.toLowerCase();
    if (/[\u0000\t\n\r #%/:<>?@[\\\]^|]/.test(host.replace(/^\[.*\]$/, 'x'))) throw invalidURL(raw);
    if (/^\d+\.\d+\.\d+\.\d+$/.test(host) && host.split('.').some((n) => Number(n) > 255)) throw invalidURL(raw);
    if (u.protocol === 'file:' && host === 'localhost') host = '';
  }
  u.hostname = host;
  u.port = port;
}

function parsePathQueryFragment(u, rest, special) {
  const hashAt = rest.indexOf('#');
  if (hashAt !== -1) {
    u.hash = `#${pctEncode(rest.slice(hashAt + 1), FRAGMENT_SET)}`;
    rest = rest.slice(0, hashAt);
    if (u.hash === '#') u.hash = '';
  }
  const qAt = rest.indexOf('?');
  if (qAt !== -1) {
    u.search = `?${pctEncode(rest.slice(qAt + 1), special ? SPECIAL_QUERY_SET : QUERY_SET)}`;
    rest = rest.slice(0, qAt);
    if (u.search === '?') u.search = '';
  }
  if (u.opaque) {
    u.pathname = pctEncode(rest, '');
    return;
  }
  const segs = rest.split('/');
  if (segs[0] === '') segs.shift();
  const path = removeDotSegments(segs.map((s) => pctEncode(s, PATH_SET)));
  u.pathname = special || rest !== '' ? `/${path.join('/')}` : '';
}

function parseRelative(input, base, raw) {
  if (base.opaque) throw invalidURL(raw);
  const special = isSpecial(base.protocol);
  if (special) input = input.replace(/\\/g, '/');
  if (input.startsWith('//')) return parseURL(base.protocol + input);
  const u = { ...base, hash: '' };
  if (input === '') return u;
  if (input.startsWith('#')) { parsePathQueryFragment(u, `${base.search}${input}`.replace(/^\?/, '?'), special); u.pathname = base.pathname; u.search = base.search; return u; }
  if (input.startsWith('?')) { u.search = ''; parsePathQueryFragment(u, input, special); u.pathname = base.pathname; return u; }
  u.search = '';
  if (input.startsWith('/')) { parsePathQueryFragment(u, input, special); return u; }
  const dir = base.pathname.slice(0, base.pathname.lastIndexOf('/') + 1);
  parsePathQueryFragment(u, dir + input, special);
  return u;
}

class URLSearchParams {
  #list = [];
  #url = null;
  constructor(init = '') {
    if (init instanceof URLSearchParams) this.#list = init.#list.map(([k, v]) => [k, v]);
    else if (typeof init === 'object' && init !== null) {
      if (typeof init[Symbol.iterator] === 'function') {
        for (const pair of init) {
          const p = [...pair];
          if (p.length !== 2) throw codedError(TypeError, 'ERR_INVALID_TUPLE', 'Each query pair must be an iterable [name, value] tuple');
          this.#list.push([String(p[0]), String(p[1])]);
        }
      } else for (const k of Object.keys(init)) this.#list.push([k, String(init[k])]);
    } else this.#parse(String(init));
  }
  #parse(s) {
    this.#list = [];
    if (s.startsWith('?')) s = s.slice(1);
    for (const part of s.split('&')) {
      if (part === '') continue;
      const eq = part.indexOf('=');
      const k = eq === -1 ? part : part.slice(0, eq);
      const v = eq === -1 ? '' : part.slice(eq + 1);
      this.#list.push([formDecode(k), formDecode(v)]);
    }
  }
  static _attach(params, url, search) { params.#url = url; params.#parse(search); }
  static _reparse(params, search) { params.#parse(search); }
  #update() { if (this.#url) this.#url._setSearchFromParams(this.toString()); }
  get size() { return this.#list.length; }
  append(k, v) { this.#list.push([String(k), String(v)]); this.#update(); }
  delete(k, v) { k = String(k); this.#list = this.#list.filter(([a, b]) => a !== k || (v !== undefined && b !== String(v))); this.#update(); }
  get(k) { k = String(k); const e = this.#list.find(([a]) => a === k); return e ? e[1] : null; }
  getAll(k) { k = String(k); return this.#list.filter(([a]) => a === k).map(([, b]) => b); }
  has(k, v) { k = String(k); return this.#list.some(([a, b]) => a === k && (v === undefined || b === String(v))); }
  set(k, v) {
    k = String(k); v = String(v);
    const i = this.#list.findIndex(([a]) => a === k);
    if (i === -1) this.#list.push([k, v]);
    else { this.#list[i][1] = v; this.#list = this.#list.filter(([a], j) => a !== k || j === i); }
    this.#update();
  }
  sort() { this.#list.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)); this.#update(); }
  forEach(fn, thisArg) { for (const [k, v] of this.#list) fn.call(thisArg, v, k, this); }
  *keys() { for (const [k] of this.#list) yield k; }
  *values() { for (const [, v] of this.#list) yield v; }
  *entries() { for (const [k, v] of this.#list) yield [k, v]; }
  [Symbol.iterator]() { return this.entries(); }
  toString() { return this.#list.map(([k, v]) => `${formEncode(k)}=${formEncode(v)}`).join('&'); }
  get [Symbol.toStringTag]() { return 'URLSearchParams'; }
  [kCustomInspect](depth, opts) {
    if (this.#list.length === 0) return 'URLSearchParams {}';
    return `URLSearchParams { ${this.#list.map(([k, v]) => `${strEscape(k)} => ${strEscape(v)}`).join(', ')} }`;
  }
}
function formDecode(s) {
  s = s.replace(/\+/g, ' ');
  try { return decodeURIComponent(s); } catch { return s.replace(/%([0-9a-fA-F]{2})/g, (m, h) => String.fromCharCode(parseInt(h, 16))); }
}
function formEncode(s) {
  return encodeURIComponent(s).replace(/[!'()~]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`).replace(/%20/g, '+');
}

class URL {
  #u;
  #params = null;
  constructor(input, base) {
    if (arguments.length === 0) throw codedError(TypeError, 'ERR_MISSING_ARGS', 'The "url" argument must be specified');
    const b = base === undefined ? undefined : parseURL(String(base));
    this.#u = parseURL(String(input), b);
  }
  static canParse(input, base) { try { new URL(input, base); return true; } catch { return false; } }
  static parse(input, base) { try { return new URL(input, base); } catch { return null; } }
  get href() {
    const u = this.#u;
    let s = u.protocol;
    if (u.hostname !== '' || isSpecial(u.protocol) || (!u.opaque && u.pathname.startsWith('//'))) {
      s += '//';
      if (u.username || u.password) s += `${u.username}${u.password ? `:${u.password}` : ''}@`;
      s += u.hostname;
      if (u.port) s += `:${u.port}`;
    }
    return s + u.pathname + u.search + u.hash;
  }
  set href(v) { this.#u = parseURL(String(v)); if (this.#params) URLSearchParams._reparse(this.#params, this.#u.search); }
  get origin() {
    const u = this.#u;
    if (u.protocol === 'blob:') { try { return new URL(u.pathname).origin; } catch { return 'null'; } }
    if (!isSpecial(u.protocol) || u.protocol === 'file:') return 'null';
    return `${u.protocol}//${u.hostname}${u.port ? `:${u.port}` : ''}`;
  }
  get protocol() { return this.#u.protocol; }
  set protocol(v) {
    const p = `${String(v).replace(/:.*$/, '').toLowerCase()}:`;
    if (/^[a-z][a-z0-9+\-.]*:$/.test(p) && isSpecial(p) === isSpecial(this.#u.protocol)) this.#u.protocol = p;
  }
  get username() { return this.#u.username; }
  set username(v) { this.#u.username = pctEncode(String(v), USERINFO_SET); }
  get password() { return this.#u.password; }
  set password(v) { this.#u.password = pctEncode(String(v), USERINFO_SET); }
  get host() { return this.#u.hostname + (this.#u.port ? `:${this.#u.port}` : ''); }
  set host(v) { if (!this.#u.opaque) parseAuthority(this.#u, String(v), String(v)); }
  get hostname() { return this.#u.hostname; }
  set hostname(v) { if (!this.#u.opaque) { const port = this.#u.port; parseAuthority(this.#u, String(v), String(v)); this.#u.port = port; } }
  get port() { return this.#u.port; }
  set port(v) {
    const s = String(v);
    if (s === '') { this.#u.port = ''; return; }
    const m = /^\d+/.exec(s);
    if (m && Number(m[0]) <= 65535) this.#u.port = specialPorts[this.#u.protocol] === String(Number(m[0])) ? '' : String(Number(m[0]));
  }
  get pathname() { return this.#u.pathname; }
  set pathname(v) {
    if (this.#u.opaque) return;
    const u = { ...this.#u };
    let p = String(v);
    if (isSpecial(u.protocol)) p = p.replace(/\\/g, '/');
    if (!p.startsWith('/')) p = `/${p}`;
    const segs = p.split('/').slice(1);
    this.#u.pathname = `/${removeDotSegments(segs.map((s) => pctEncode(s, `${PATH_SET}?#`))).join('/')}`;
  }
  get search() { return this.#u.search; }
  set search(v) {
    let s = String(v);
    if (s.startsWith('?')) s = s.slice(1);
    this.#u.search = s === '' ? '' : `?${pctEncode(s, isSpecial(this.#u.protocol) ? SPECIAL_QUERY_SET : QUERY_SET)}`;
    if (this.#params) URLSearchParams._reparse(this.#params, this.#u.search);
  }
  _setSearchFromParams(s) { this.#u.search = s === '' ? '' : `?${s}`; }
  get searchParams() {
    if (!this.#params) {
      this.#params = new URLSearchParams();
      URLSearchParams._attach(this.#params, this, this.#u.search);
    }
    return this.#params;
  }
  get hash() { return this.#u.hash; }
  set hash(v) {
    let s = String(v);
    if (s.startsWith('#')) s = s.slice(1);
    this.#u.hash = s === '' ? '' : `#${pctEncode(s, FRAGMENT_SET)}`;
  }
  toString() { return this.href; }
  toJSON() { return this.href; }
  get [Symbol.toStringTag]() { return 'URL'; }
  [kCustomInspect](depth, opts) {
    const obj = {
      href: this.href, origin: this.origin, protocol: this.protocol, username: this.username,
      password: this.password, host: this.host, hostname: this.hostname, port: this.port,
      pathname: this.pathname, search: this.search, searchParams: this.searchParams, hash: this.hash,
    };
    if (depth < 0) return '[URL]';
    return `URL ${inspect(obj, { ...opts, depth }).replace(/^\{/, '{')}`;
  }
}

function fileURLToPath(u) {
  if (typeof u === 'string') u = new URL(u);
  else if (!(u instanceof URL)) throw invalidArgType('path', 'of type string or an instance of URL', u);
  if (u.protocol !== 'file:') throw codedError(TypeError, 'ERR_INVALID_URL_SCHEME', 'The URL must be of scheme file');
  if (u.hostname !== '') throw codedError(TypeError, 'ERR_INVALID_FILE_URL_HOST', `File URL host must be "localhost" or empty on ${process.platform}`);
  if (/%2f/i.test(u.pathname)) throw codedError(TypeError, 'ERR_INVALID_FILE_URL_PATH', 'File URL path must not include encoded / characters');
  return decodeURIComponent(u.pathname);
}

function pathToFileURL(p) {
  let resolved = path.resolve(p);
  if (p.endsWith('/') && !resolved.endsWith('/')) resolved += '/';
  const u = new URL('file:///');
  u.pathname = resolved.replace(/%/g, '%25').replace(/\\/g, '%5C').replace(/\n/g, '%0A').replace(/\r/g, '%0D').replace(/\t/g, '%09');
  return u;
}

// The legacy url.parse/format/resolve, on top of URL where the input is absolute.
function urlParse(str, parseQuery) {
  const out = { protocol: null, slashes: null, auth: null, host: null, port: null, hostname: null, hash: null, search: null, query: null, pathname: null, path: null, href: str };
  let rest = String(str).trim();
  const hashAt = rest.indexOf('#');
  if (hashAt !== -1) { out.hash = rest.slice(hashAt); rest = rest.slice(0, hashAt); }
  const qAt = rest.indexOf('?');
  if (qAt !== -1) { out.search = rest.slice(qAt); out.query = rest.slice(qAt + 1); rest = rest.slice(0, qAt); }
  else if (parseQuery) { out.search = ''; out.query = {}; }
  const pm = /^([a-zA-Z][a-zA-Z0-9+\-.]*:)/.exec(rest);
  if (pm) { out.protocol = pm[1].toLowerCase(); rest = rest.slice(pm[1].length); }
  if (rest.startsWith('//')) {
    out.slashes = true;
    rest = rest.slice(2);
    const end = rest.search(/[/]/);
    const auth = end === -1 ? rest : rest.slice(0, end);
    rest = end === -1 ? '' : rest.slice(end);
    const at = auth.lastIndexOf('@');
    const hostPart = at === -1 ? auth : auth.slice(at + 1);
    if (at !== -1) out.auth = decodeURIComponent(auth.slice(0, at));
    out.host = hostPart.toLowerCase();
    const hm = /^(\[[^\]]*\]|[^:]*)(?::(\d*))?$/.exec(out.host);
    out.hostname = hm ? hm[1].replace(/^\[|\]$/g, '') : out.host;
    out.port = hm && hm[2] ? hm[2] : null;
    if (rest === '' && out.protocol && isSpecial(out.protocol)) rest = '/';
  }
  out.pathname = rest === '' ? null : rest;
  if (parseQuery && typeof out.query === 'string') out.query = Object.fromEntries(new URLSearchParams(out.query));
  out.path = (out.pathname || '') + (out.search || '') || null;
  out.href = urlFormat(out);
  return out;
}
function urlFormat(o) {
  if (typeof o === 'string') o = urlParse(o);
  if (o instanceof URL) return o.href;
  let s = o.protocol || '';
  if (s && !s.endsWith(':')) s += ':';
  if (o.slashes || (o.host || o.hostname) || (s && isSpecial(s))) s += '//';
  if (o.auth) s += `${encodeURIComponent(o.auth).replace(/%3A/i, ':')}@`;
  s += o.host || ((o.hostname || '') + (o.port ? `:${o.port}` : ''));
  s += o.pathname || '';
  let search = o.search || '';
  if (!search && o.query && typeof o.query === 'object') {
    const q = new URLSearchParams(o.query).toString();
    if (q) search = `?${q}`;
  }
  if (search && !search.startsWith('?')) search = `?${search}`;
  let hash = o.hash || '';
  if (hash && !hash.startsWith('#')) hash = `#${hash}`;
  return s + search + hash;
}
const urlModule = {
  URL, URLSearchParams, fileURLToPath, pathToFileURL,
  parse: urlParse,
  format: urlFormat,
  resolve(from, to) {
    const r = new URL(to, new URL(from, 'resolve://'));
    if (r.protocol === 'resolve:') { const { pathname, search, hash } = r; return pathname + search + hash; }
    return r.toString();
  },
  domainToASCII: (d) => d.toLowerCase(),
  domainToUnicode: (d) => d,
};

const querystring = {
  parse(str, sep = '&', eq = '=') {
    const out = Object.create(null);
    for (const part of String(str).split(sep)) {
      if (part === '') continue;
      const i = part.indexOf(eq);
      const k = formDecode(i === -1 ? part : part.slice(0, i));
      const v = i === -1 ? '' : formDecode(part.slice(i + eq.length));
      if (k in out) out[k] = [].concat(out[k], v);
      else out[k] = v;
    }
    return out;
  },
  stringify(obj, sep = '&', eq = '=') {
    if (obj === null || typeof obj !== 'object') return '';
    const enc = (v) => encodeURIComponent(typeof v === 'string' || typeof v === 'number' || typeof v === 'bigint' || typeof v === 'boolean' ? String(v) : '');
    return Object.keys(obj).map((k) => (Array.isArray(obj[k]) ? obj[k].map((v) => `${enc(k)}${eq}${enc(v)}`).join(sep) : `${enc(k)}${eq}${enc(obj[k])}`)).filter(Boolean).join(sep);
  },
  escape: (s) => encodeURIComponent(s),
  unescape: (s) => formDecode(s),
};
querystring.decode = querystring.parse;
querystring.encode = querystring.stringify;
