// path: the POSIX flavour (path.win32 is the same object: there is no Windows here).

function assertPath(p, name = 'path') {
  if (typeof p !== 'string') throw invalidArgType(name, 'of type string', p);
}

// normalizeSegments resolves '.' and '..' in a slash-separated path.
function normalizeSegments(p, allowAboveRoot) {
  const out = [];
  for (const seg of p.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') {
      if (out.length && out[out.length - 1] !== '..') out.pop();
      else if (allowAboveRoot) out.push('..');
      continue;
    }
    out.push(seg);
  }
  return out.join('/');
}

const path = {
  sep: '/',
  delimiter: ':',
  normalize(p) {
    assertPath(p);
    if (p === '') return '.';
    const abs = p.startsWith('/');
    const trailing = p.endsWith('/');
    let s = normalizeSegments(p, !abs);
    if (s === '' && !abs) s = '.';
    if (s !== '' && trailing) s += '/';
    return abs ? `/${s}` : s;
  },
  join(...parts) {
    for (const p of parts) assertPath(p);
    const joined = parts.filter((p) => p !== '').join('/');
    return joined === '' ? '.' : path.normalize(joined);
  },
  resolve(...parts) {
    let resolved = '';
    let abs = false;
    for (let i = parts.length - 1; i >= -1 && !abs; i--) {
      const p = i >= 0 ? parts[i] : process.cwd();
      assertPath(p, `paths[${i}]`);
      if (p === '') continue;
      resolved = `${p}/${resolved}`;
      abs = p.startsWith('/');
    }
    const s = normalizeSegments(resolved, !abs);
    return abs ? `/${s}` : (s || '.');
  },
  isAbsolute(p) { assertPath(p); return p.startsWith('/'); },
  dirname(p) {
    assertPath(p);
    if (p === '') return '.';
    let end = p.length;
    while (end > 1 && p[end - 1] === '/') end--;
    const i = p.lastIndexOf('/', end - 1);
    if (i === -1) return '.';
    if (i === 0) return '/';
    let d = p.slice(0, i);
    while (d.length > 1 && d.endsWith('/')) d = d.slice(0, -1);
    return d;
  },
  basename(p, ext) {
    assertPath(p);
    if (ext !== undefined) assertPath(ext, 'ext');
    let end = p.length;
    while (end > 0 && p[end - 1] === '/') end--;
    if (end === 0) return '';
    const b = p.slice(p.lastIndexOf('/', end - 1) + 1, end);
    if (ext !== undefined && ext !== b && b.endsWith(ext)) return b.slice(0, b.length - ext.length);
    return b;
  },
  extname(p) {
    assertPath(p);
    const b = path.basename(p);
    const i = b.lastIndexOf('.');
    if (i <= 0 || b === '..') return '';
    return b.slice(i);
  },
  relative(from, to) {
    assertPath(from, 'from');
    assertPath(to, 'to');
    if (from === to) return '';
    const f = path.resolve(from).split('/').filter(Boolean);
    const t = path.resolve(to).split('/').filter(Boolean);
    let i = 0;
    while (i < f.length && i < t.length && f[i] === t[i]) i++;
    return [...Array(f.length - i).fill('..'), ...t.slice(i)].join('/');
  },
  parse(p) {
    assertPath(p);
    const root = p.startsWith('/') ? '/' : '';
    const base = path.basename(p);
    const ext = path.extname(p);
    let dir = path.dirname(p);
    if (dir === '.' && !p.startsWith('.')) dir = '';
    if (p === '/') return { root: '/', dir: '/', base: '', ext: '', name: '' };
    return { root, dir, base, ext, name: ext ? base.slice(0, -ext.length) : base };
  },
  format(o) {
    if (o === null || typeof o !== 'object') throw invalidArgType('pathObject', 'of type object', o);
    const dir = o.dir || o.root || '';
    const base = o.base || `${o.name || ''}${o.ext ? (o.ext.startsWith('.') ? '' : '.') + o.ext : ''}`;
    if (!dir) return base;
    return dir === o.root ? `${dir}${base}` : `${dir}/${base}`;
  },
  toNamespacedPath(p) { return p; },
  matchesGlob(p, pattern) { return globToRegExp(pattern).test(p); },
};
path.posix = path;
path.win32 = path;

// globToRegExp supports *, **, ? and {a,b} (enough for path.matchesGlob and fs.globSync).
function globToRegExp(glob) {
  let re = '';
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i];
    if (c === '*') {
      if (glob[i + 1] === '*') {
        i++;
        if (glob[i + 1] === '/') { i++; re += '(?:.*/)?'; } else re += '.*';
      } else re += '[^/]*';
    } else if (c === '?') re += '[^/]';
    else if (c === '{') {
      const end = glob.indexOf('}', i);
      if (end === -1) { re += '\\{'; continue; }
      re += `(?:${glob.slice(i + 1, end).split(',').map((s) => s.replace(/[.+^$()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*')).join('|')})`;
      i = end;
    } else re += c.replace(/[.+^$()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${re}$`);
}
