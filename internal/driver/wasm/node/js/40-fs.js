// fs: the synchronous API on the host filesystem ops, plus callback and promise wrappers and
// minimal streams. Paths are resolved against process.cwd() here; the host sees absolute paths.

function toPath(p, name = 'path') {
  if (typeof p === 'string') {
    if (p.includes('\u0000')) {
      throw codedError(TypeError, 'ERR_INVALID_ARG_VALUE', `The argument '${name}' must be a string, Uint8Array, or URL without null bytes. Received ${strEscape(p)}`);
    }
    return p;
  }
  if (p instanceof Uint8Array) return Buffer.from(p.buffer, p.byteOffset, p.byteLength).toString();
  if (p != null && typeof p === 'object' && typeof p.href === 'string' && p.protocol !== undefined) {
    if (p.protocol !== 'file:') throw codedError(TypeError, 'ERR_INVALID_URL_SCHEME', 'The URL must be of scheme file');
    return decodeURIComponent(p.pathname);
  }
  throw invalidArgType(name, 'of type string or an instance of Buffer or URL', p);
}
const absPath = (p) => path.resolve(p);

function getOptions(options, defaults) {
  if (options == null || typeof options === 'function') return { ...defaults };
  if (typeof options === 'string') return { ...defaults, encoding: options };
  if (typeof options !== 'object') throw invalidArgType('options', 'one of type string or object', options);
  return { ...defaults, ...options };
}

function dataBytes(data, encoding) {
  if (typeof data === 'string') {
    const e = normEnc(encoding);
    return e === 'utf8' ? data : encodeString(data, e);
  }
  if (ArrayBuffer.isView(data)) return abOf(data);
  if (data instanceof ArrayBuffer) return data;
  throw invalidArgType('data', 'of type string or an instance of Buffer, TypedArray, or DataView', data);
}

const S_IFMT = 0o170000;
class Stats {
  constructor(s) {
    this.dev = s.dev; this.mode = s.mode; this.nlink = s.nlink; this.uid = 0; this.gid = 0;
    this.rdev = 0; this.blksize = 4096; this.ino = s.ino; this.size = s.size;
    this.blocks = Math.ceil(s.size / 512);
    this.atimeMs = s.atimeMs; this.mtimeMs = s.mtimeMs; this.ctimeMs = s.ctimeMs; this.birthtimeMs = s.ctimeMs;
    this.atime = new Date(s.atimeMs); this.mtime = new Date(s.mtimeMs);
    this.ctime = new Date(s.ctimeMs); this.birthtime = new Date(s.ctimeMs);
  }
  isFile() { return (this.mode & S_IFMT) === 0o100000; }
  isDirectory() { return (this.mode & S_IFMT) === 0o040000; }
  isSymbolicLink() { return (this.mode & S_IFMT) === 0o120000; }
  isFIFO() { return (this.mode & S_IFMT) === 0o010000; }
  isSocket() { return (this.mode & S_IFMT) === 0o140000; }
  isCharacterDevice() { return (this.mode & S_IFMT) === 0o020000; }
  isBlockDevice() { return (this.mode & S_IFMT) === 0o060000; }
}

class Dirent {
  constructor(name, kind, parent) {
    this.name = name;
    this.parentPath = parent;
    this.path = parent;
    Object.defineProperty(this, '_kind', { value: kind });
  }
  isFile() { return this._kind === 1; }
  isDirectory() { return this._kind === 2; }
  isSymbolicLink() { return this._kind === 3; }
  isFIFO() { return false; }
  isSocket() { return false; }
  isCharacterDevice() { return false; }
  isBlockDevice() { return false; }
}

const fsConstants = {
  F_OK: 0, R_OK: 4, W_OK: 2, X_OK: 1,
  O_RDONLY: 0, O_WRONLY: 1, O_RDWR: 2, O_CREAT: 64, O_EXCL: 128, O_NOCTTY: 256, O_TRUNC: 512,
  O_APPEND: 1024, O_DIRECTORY: 65536, O_NOFOLLOW: 131072, O_SYNC: 1052672, O_DSYNC: 4096,
  S_IFMT, S_IFREG: 0o100000, S_IFDIR: 0o040000, S_IFCHR: 0o020000, S_IFBLK: 0o060000,
  S_IFIFO: 0o010000, S_IFLNK: 0o120000, S_IFSOCK: 0o140000,
  S_IRWXU: 0o700, S_IRUSR: 0o400, S_IWUSR: 0o200, S_IXUSR: 0o100,
  S_IRWXG: 0o70, S_IRGRP: 0o40, S_IWGRP: 0o20, S_IXGRP: 0o10,
  S_IRWXO: 0o7, S_IROTH: 0o4, S_IWOTH: 0o2, S_IXOTH: 0o1,
  COPYFILE_EXCL: 1, COPYFILE_FICLONE: 2, COPYFILE_FICLONE_FORCE: 4, UV_FS_COPYFILE_EXCL: 1,
};

function readFd(fd) {
  if (fd === 0) return new Uint8Array(hostCall('read', undefined, undefined, () => ops.readStdin(true)));
  const chunks = [];
  let total = 0;
  for (;;) {
    const ab = hostCall('read', undefined, undefined, () => ops.read(fd, 65536, -1));
    if (ab.byteLength === 0) break;
    chunks.push(new Uint8Array(ab));
    total += ab.byteLength;
  }
  const out = new Uint8Array(total);
  let pos = 0;
  for (const c of chunks) { out.set(c, pos); pos += c.length; }
  return out;
}

const fs = {
  constants: fsConstants,
  F_OK: 0, R_OK: 4, W_OK: 2, X_OK: 1,
  Stats, Dirent,
  readFileSync(p, options) {
    const opts = getOptions(options, { encoding: null, flag: 'r' });
    const enc = opts.encoding == null ? null : normEnc(opts.encoding);
    if (opts.encoding != null && enc === undefined) throw codedError(TypeError, 'ERR_INVALID_ARG_VALUE', `The argument 'encoding' is invalid encoding. Received '${opts.encoding}'`);
    if (p === '/dev/stdin') p = 0;
    if (p === '/dev/null') return enc ? '' : Buffer.alloc(0);
    if (typeof p === 'number') {
      const bytes = readFd(p);
      const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      return enc ? b.toString(enc) : b;
    }
    const s = toPath(p);
    const a = absPath(s);
    try {
      if (enc === 'utf8') return hostCall('open', s, undefined, () => ops.readFile(a, true));
      const b = new Buffer(hostCall('open', s, undefined, () => ops.readFile(a, false)));
      return enc ? b.toString(enc) : b;
    } catch (e) {
      if (e.code === 'EISDIR') throw uvException('EISDIR', 'read'); // node's wording
      throw e;
    }
  },
  writeFileSync(p, data, options) {
    const opts = getOptions(options, { encoding: 'utf8', flag: 'w', mode: 0o666 });
    const bytes = dataBytes(data, opts.encoding);
    const stdio = { '/dev/stdout': 1, '/dev/stderr': 2, '/dev/null': -1 }[p];
    if (stdio === -1) return;
    if (stdio !== undefined) p = stdio;
    if (typeof p === 'number') { fs.writeSync(p, typeof bytes === 'string' ? bytes : new Uint8Array(bytes)); return; }
    const s = toPath(p);
    const a = absPath(s);
    hostCall('open', s, undefined, () => ops.writeFile(a, bytes, opts.flag, opts.mode));
  },
  appendFileSync(p, data, options) {
    const opts = getOptions(options, { encoding: 'utf8', flag: 'a', mode: 0o666 });
    fs.writeFileSync(p, data, opts);
  },
  existsSync(p) {
    try { return ops.kind(absPath(toPath(p))) !== 0; } catch { return false; }
  },
  accessSync(p, mode) {
    const s = toPath(p);
    hostCall('access', s, undefined, () => ops.stat(absPath(s), true));
  },
  statSync(p, options) {
    const s = toPath(p);
    try {
      return new Stats(JSON.parse(hostCall('stat', s, undefined, () => ops.stat(absPath(s), true))));
    } catch (e) {
      if (options && options.throwIfNoEntry === false && e.code === 'ENOENT') return undefined;
      throw e;
    }
  },
  lstatSync(p, options) {
    const s = toPath(p);
    try {
      return new Stats(JSON.parse(hostCall('lstat', s, undefined, () => ops.stat(absPath(s), false))));
    } catch (e) {
      if (options && options.throwIfNoEntry === false && e.code === 'ENOENT') return undefined;
      throw e;
    }
  },
  fstatSync(fd) {
    return new Stats(JSON.parse(hostCall('fstat', undefined, undefined, () => ops.fstat(fd))));
  },
  readdirSync(p, options) {
    const opts = getOptions(options, { encoding: 'utf8', withFileTypes: false, recursive: false });
    const s = toPath(p);
    const root = absPath(s);
    const out = [];
    const walk = (dir, rel) => {
      const ents = JSON.parse(hostCall('scandir', rel === '' ? s : path.join(s, rel), undefined, () => ops.readdir(dir)));
      for (const [name, kind] of ents) {
        const relName = rel === '' ? name : `${rel}/${name}`;
        if (opts.withFileTypes) out.push(new Dirent(name, kind, rel === '' ? s : path.join(s, rel)));
        else out.push(opts.encoding === 'buffer' ? Buffer.from(relName) : relName);
        if (opts.recursive && kind === 2) walk(`${dir}/${name}`, relName);
      }
    };
    walk(root, '');
    return out;
  },
  mkdirSync(p, options) {
    const opts = typeof options === 'number' || typeof options === 'string' ? { mode: options } : getOptions(options, { recursive: false, mode: 0o777 });
    const s = toPath(p);
    const mode = typeof opts.mode === 'string' ? parseInt(opts.mode, 8) : opts.mode;
    const r = hostCall('mkdir', s, undefined, () => ops.mkdir(absPath(s), !!opts.recursive, mode));
    return opts.recursive ? r : undefined;
  },
  mkdtempSync(prefix, options) {
    const chars = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
    for (let tries = 0; ; tries++) {
      const rnd = new Uint8Array(ops.random(6));
      const name = `${toPath(prefix, 'prefix')}${Array.from(rnd, (b) => chars[b % chars.length]).join('')}`;
      try {
        hostCall('mkdtemp', `${prefix}XXXXXX`, undefined, () => ops.mkdir(absPath(name), false, 0o700));
        return name;
      } catch (e) {
        if (e.code !== 'EEXIST' || tries > 10) throw e;
      }
    }
  },
  rmSync(p, options) {
    const opts = getOptions(options, { recursive: false, force: false });
    const s = toPath(p);
    hostCall(fs.existsSync(s) ? 'rm' : 'lstat', s, undefined, () => ops.rm(absPath(s), !!opts.recursive, !!opts.force));
  },
  rmdirSync(p, options) {
    const opts = getOptions(options, { recursive: false });
    const s = toPath(p);
    hostCall('rmdir', s, undefined, () => ops.rmdir(absPath(s), !!opts.recursive));
  },
  unlinkSync(p) {
    const s = toPath(p);
    hostCall('unlink', s, undefined, () => ops.unlink(absPath(s)));
  },
  renameSync(from, to) {
    const f = toPath(from, 'oldPath'), t = toPath(to, 'newPath');
    hostCall('rename', f, t, () => ops.rename(absPath(f), absPath(t)));
  },
  copyFileSync(src, dst, mode = 0) {
    const f = toPath(src, 'src'), t = toPath(dst, 'dest');
    hostCall('copyfile', f, t, () => ops.copyFile(absPath(f), absPath(t), (mode & 1) !== 0));
  },
  cpSync(src, dst, options) {
    const opts = getOptions(options, { recursive: false, force: true, errorOnExist: false });
    const f = toPath(src, 'src'), t = toPath(dst, 'dest');
    const st = fs.statSync(f);
    if (st.isDirectory()) {
      if (!opts.recursive) {
        throw codedError(Error, 'ERR_FS_EISDIR', `Recursive option is required to copy a directory: ${f}`);
      }
      fs.mkdirSync(t, { recursive: true });
      for (const name of fs.readdirSync(f)) fs.cpSync(path.join(f, name), path.join(t, name), opts);
      return;
    }
    if (!opts.force && fs.existsSync(t)) {
      if (opts.errorOnExist) throw uvException('EEXIST', 'cp', t);
      return;
    }
    fs.copyFileSync(f, t);
  },
  realpathSync(p) {
    const s = toPath(p);
    return hostCall('realpath', s, undefined, () => ops.realpath(absPath(s)));
  },
  readlinkSync(p) {
    const s = toPath(p);
    return hostCall('readlink', s, undefined, () => ops.readlink(absPath(s)));
  },
  symlinkSync(target, p) {
    const t = toPath(target, 'target'), s = toPath(p);
    hostCall('symlink', t, s, () => ops.symlink(t, absPath(s)));
  },
  linkSync(existing, p) {
    const e = toPath(existing, 'existingPath'), s = toPath(p, 'newPath');
    hostCall('link', e, s, () => ops.link(absPath(e), absPath(s)));
  },
  chmodSync(p, mode) {
    const s = toPath(p);
    const m = typeof mode === 'string' ? parseInt(mode, 8) : mode;
    hostCall('chmod', s, undefined, () => ops.chmod(absPath(s), m));
  },
  chownSync() {},
  lchownSync() {},
  utimesSync(p, atime, mtime) {
    const s = toPath(p);
    const ms = (t) => (t instanceof Date ? t.getTime() : typeof t === 'string' ? Number(t) * 1000 : t * 1000);
    hostCall('utime', s, undefined, () => ops.utimes(absPath(s), ms(atime), ms(mtime)));
  },
  truncateSync(p, len = 0) {
    if (typeof p === 'number') return fs.ftruncateSync(p, len);
    const s = toPath(p);
    hostCall('open', s, undefined, () => ops.truncate(absPath(s), len));
  },
  openSync(p, flags = 'r', mode = 0o666) {
    const s = toPath(p);
    return hostCall('open', s, undefined, () => ops.open(absPath(s), flags, mode));
  },
  closeSync(fd) { hostCall('close', undefined, undefined, () => ops.close(fd)); },
  fsyncSync(fd) { hostCall('fsync', undefined, undefined, () => ops.fsync(fd)); },
  fdatasyncSync(fd) { fs.fsyncSync(fd); },
  ftruncateSync(fd, len = 0) { hostCall('ftruncate', undefined, undefined, () => ops.ftruncate(fd, len)); },
  readSync(fd, buffer, offset, length, position) {
    if (offset !== null && typeof offset === 'object') ({ offset = 0, length = buffer.byteLength - offset, position = null } = offset);
    offset = offset ?? 0;
    length = length ?? buffer.byteLength - offset;
    const ab = hostCall('read', undefined, undefined, () => ops.read(fd, length, position == null ? -1 : Number(position)));
    const src = new Uint8Array(ab);
    const n = Math.min(src.length, length);
    new Uint8Array(buffer.buffer, buffer.byteOffset + offset, n).set(src.subarray(0, n));
    return n;
  },
  writeSync(fd, data, offsetOrPosition, lengthOrEncoding, position) {
    let bytes;
    if (typeof data === 'string') {
      bytes = dataBytes(data, typeof lengthOrEncoding === 'string' ? lengthOrEncoding : 'utf8');
      position = offsetOrPosition;
    } else {
      const off = offsetOrPosition ?? 0;
      const len = typeof lengthOrEncoding === 'number' ? lengthOrEncoding : data.byteLength - off;
      bytes = abOf(new Uint8Array(data.buffer, data.byteOffset + off, len));
    }
    return hostCall('write', undefined, undefined, () => ops.fwrite(fd, bytes, position == null ? undefined : Number(position)));
  },
  watch() { throw codedError(Error, 'ERR_UNAVAILABLE', "fs.watch is not available in airlock's wasm sandbox"); },
  watchFile() { throw codedError(Error, 'ERR_UNAVAILABLE', "fs.watchFile is not available in airlock's wasm sandbox"); },
  unwatchFile() {},
  globSync(pattern, options = {}) {
    const cwd = options.cwd ? toPath(options.cwd) : process.cwd();
    const patterns = Array.isArray(pattern) ? pattern : [pattern];
    const res = patterns.map((p) => globToRegExp(p));
    const out = [];
    for (const rel of fs.readdirSync(cwd, { recursive: true })) {
      if (res.some((re) => re.test(rel))) out.push(rel);
    }
    return out;
  },
};
fs.realpathSync.native = fs.realpathSync;

// Callback versions: do the work now, call back on the next tick.
const callbackified = {};
for (const name of Object.keys(fs)) {
  if (!name.endsWith('Sync')) continue;
  const sync = fs[name];
  const base = name.slice(0, -4);
  callbackified[base] = function (...args) {
    const cb = args.pop();
    if (typeof cb !== 'function') throw invalidArgType('cb', 'of type function', cb);
    let result;
    try { result = sync(...args); } catch (e) { process.nextTick(cb, e); return; }
    process.nextTick(cb, null, result);
  };
}
callbackified.exists = (p, cb) => process.nextTick(cb, fs.existsSync(p));
callbackified.read = function (fd, buffer, offset, length, position, cb) {
  if (typeof buffer === 'function') { cb = buffer; buffer = Buffer.alloc(16384); offset = 0; length = buffer.length; position = null; }
  else if (typeof offset === 'function') { cb = offset; offset = 0; length = buffer.length; position = null; }
  let n;
  try { n = fs.readSync(fd, buffer, offset, length, position); } catch (e) { process.nextTick(cb, e); return; }
  process.nextTick(cb, null, n, buffer);
};
callbackified.write = function (fd, data, ...rest) {
  const cb = rest.pop();
  let n;
  try { n = fs.writeSync(fd, data, ...rest); } catch (e) { process.nextTick(cb, e); return; }
  process.nextTick(cb, null, n, data);
};
Object.assign(fs, callbackified);
fs.realpath.native = fs.realpath;

// fs.promises
class FileHandle {
  constructor(fd) { this.fd = fd; }
  async readFile(options) { return fs.readFileSync(this.fd, options); }
  async writeFile(data, options) {
    const bytes = dataBytes(data, getOptions(options, { encoding: 'utf8' }).encoding);
    fs.writeSync(this.fd, typeof bytes === 'string' ? bytes : new Uint8Array(bytes));
  }
  async appendFile(data, options) { return this.writeFile(data, options); }
  async read(buffer = Buffer.alloc(16384), offset = 0, length = buffer.byteLength - offset, position = null) {
    if (buffer !== null && !ArrayBuffer.isView(buffer) && typeof buffer === 'object') ({ buffer = Buffer.alloc(16384), offset = 0, length = buffer.byteLength - offset, position = null } = buffer);
    const bytesRead = fs.readSync(this.fd, buffer, offset, length, position);
    return { bytesRead, buffer };
  }
  async write(data, ...rest) { const bytesWritten = fs.writeSync(this.fd, data, ...rest); return { bytesWritten, buffer: data }; }
  async stat() { return fs.fstatSync(this.fd); }
  async truncate(len) { fs.ftruncateSync(this.fd, len); }
  async sync() { fs.fsyncSync(this.fd); }
  async datasync() { fs.fsyncSync(this.fd); }
  async close() { fs.closeSync(this.fd); }
  async [Symbol.asyncDispose]() { return this.close(); }
}
const fsPromises = { constants: fsConstants, FileHandle };
for (const name of Object.keys(fs)) {
  if (!name.endsWith('Sync') || name === 'existsSync') continue;
  const sync = fs[name];
  fsPromises[name.slice(0, -4)] = async (...args) => sync(...args);
}
fsPromises.open = async (p, flags, mode) => new FileHandle(fs.openSync(p, flags, mode));
fsPromises.readFile = async (p, options) => (p instanceof FileHandle ? p.readFile(options) : fs.readFileSync(p, options));
fsPromises.writeFile = async (p, data, options) => (p instanceof FileHandle ? p.writeFile(data, options) : fs.writeFileSync(p, data, options));
delete fsPromises.close; delete fsPromises.fstat; delete fsPromises.fsync; delete fsPromises.ftruncate;
delete fsPromises.read; delete fsPromises.write; delete fsPromises.fdatasync;
fs.promises = fsPromises;

// Minimal streams: enough for createWriteStream(...).write/end and createReadStream(...).pipe.
class WriteStream extends EventEmitter {
  constructor(p, options) {
    super();
    const opts = getOptions(options, { flags: 'w', encoding: 'utf8', mode: 0o666 });
    this.path = p;
    this.bytesWritten = 0;
    this.writable = true;
    this._encoding = opts.encoding;
    try {
      this.fd = fs.openSync(p, opts.flags, opts.mode);
    } catch (e) {
      this.fd = null;
      process.nextTick(() => this.emit('error', e));
      return;
    }
    process.nextTick(() => { this.emit('open', this.fd); this.emit('ready'); });
  }
  write(chunk, encoding, cb) {
    if (typeof encoding === 'function') { cb = encoding; encoding = undefined; }
    try {
      if (this.fd === null) throw uvException('EBADF', 'write');
      const data = typeof chunk === 'string' ? Buffer.from(chunk, encoding || this._encoding) : chunk;
      this.bytesWritten += fs.writeSync(this.fd, data);
      if (cb) process.nextTick(cb, null);
    } catch (e) {
      if (cb) process.nextTick(cb, e);
      process.nextTick(() => this.emit('error', e));
    }
    return true;
  }
  end(chunk, encoding, cb) {
    if (typeof chunk === 'function') { cb = chunk; chunk = undefined; }
    else if (typeof encoding === 'function') { cb = encoding; encoding = undefined; }
    if (chunk !== undefined && chunk !== null) this.write(chunk, encoding);
    this.writable = false;
    if (this.fd !== null) { try { fs.closeSync(this.fd); } catch { /* already closed */ } }
    process.nextTick(() => { this.emit('finish'); this.emit('close'); if (cb) cb(); });
    return this;
  }
  close(cb) { return this.end(cb); }
  destroy() { this.end(); return this; }
  cork() {}
  uncork() {}
  setDefaultEncoding(e) { this._encoding = e; return this; }
}

class ReadStream extends EventEmitter {
  constructor(p, options) {
    super();
    const opts = getOptions(options, { encoding: null });
    this.path = p;
    this.readable = true;
    this._encoding = opts.encoding;
    this._started = false;
    this._paused = false;
    setImmediate(() => this._flow());
  }
  setEncoding(e) { this._encoding = e; return this; }
  pause() { this._paused = true; return this; }
  resume() { this._paused = false; if (this._started) return this; setImmediate(() => this._flow()); return this; }
  _flow() {
    if (this._started || this._paused) return;
    this._started = true;
    let data;
    try {
      data = fs.readFileSync(this.path);
    } catch (e) {
      this.emit('error', e);
      return;
    }
    this.emit('open');
    if (data.length) this.emit('data', this._encoding ? data.toString(this._encoding) : data);
    this.readable = false;
    this.emit('end');
    this.emit('close');
  }
  pipe(dest) {
    this.on('data', (c) => dest.write(c));
    this.on('end', () => { if (dest !== process.stdout && dest !== process.stderr) dest.end(); });
    return dest;
  }
  destroy() { this._started = true; this.readable = false; return this; }
  async *[Symbol.asyncIterator]() {
    this._started = true;
    const data = fs.readFileSync(this.path);
    if (data.length) yield this._encoding ? data.toString(this._encoding) : data;
  }
}
fs.createWriteStream = (p, options) => new WriteStream(p, options);
fs.createReadStream = (p, options) => new ReadStream(p, options);
fs.WriteStream = WriteStream;
fs.ReadStream = ReadStream;
