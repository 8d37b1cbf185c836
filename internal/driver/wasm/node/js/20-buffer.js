// Buffer (a Uint8Array subclass), TextEncoder/TextDecoder and string_decoder. Encoding work
// (utf8, hex, base64, latin1, utf16le) is done by the host in Go.

const normEnc = (enc) => {
  if (enc === undefined || enc === null) return 'utf8';
  const e = String(enc).toLowerCase();
  switch (e) {
    case 'utf8': case 'utf-8': return 'utf8';
    case 'hex': case 'base64': case 'base64url': case 'latin1': case 'ascii': return e;
    case 'binary': return 'latin1';
    case 'ucs2': case 'ucs-2': case 'utf16le': case 'utf-16le': return 'utf16le';
  }
  return undefined;
};

// abOf returns an ArrayBuffer holding exactly the bytes of a view (no copy when it can).
function abOf(view) {
  if (view instanceof ArrayBuffer) return view;
  const { buffer, byteOffset, byteLength } = view;
  if (byteOffset === 0 && byteLength === buffer.byteLength) return buffer;
  return buffer.slice(byteOffset, byteOffset + byteLength);
}

function encodeString(str, enc) {
  const e = normEnc(enc);
  if (e === undefined) throw codedError(TypeError, 'ERR_UNKNOWN_ENCODING', `Unknown encoding: ${enc}`);
  return ops.encode(String(str), e);
}

class Buffer extends Uint8Array {
  static from(value, encOrOffset, length) {
    if (typeof value === 'string') return new Buffer(encodeString(value, encOrOffset));
    if (value instanceof ArrayBuffer || (typeof SharedArrayBuffer !== 'undefined' && value instanceof SharedArrayBuffer)) {
      const off = encOrOffset === undefined ? 0 : Number(encOrOffset);
      const len = length === undefined ? value.byteLength - off : Number(length);
      return new Buffer(value, off, len);
    }
    if (ArrayBuffer.isView(value)) {
      const b = new Buffer(value.length);
      b.set(value);
      return b;
    }
    if (value == null) throw invalidArgType('first argument', 'of type string or an instance of Buffer, ArrayBuffer, or Array or an Array-like Object', value);
    if (typeof value.valueOf === 'function') {
      const prim = value.valueOf();
      if (prim !== value && prim != null && (typeof prim === 'string' || typeof prim === 'object')) return Buffer.from(prim, encOrOffset, length);
    }
    if (value.type === 'Buffer' && Array.isArray(value.data)) return Buffer.from(value.data);
    if (typeof value.length === 'number' || Array.isArray(value)) {
      const b = new Buffer(value.length >>> 0);
      for (let i = 0; i < b.length; i++) b[i] = value[i];
      return b;
    }
    throw invalidArgType('first argument', 'of type string or an instance of Buffer, ArrayBuffer, or Array or an Array-like Object', value);
  }
  static alloc(size, fill, enc) {
    const b = new Buffer(size);
    if (fill !== undefined && fill !== 0) b.fill(fill, 0, b.length, enc);
    return b;
  }
  static allocUnsafe(size) { return new Buffer(size); }
  static allocUnsafeSlow(size) { return new Buffer(size); }
  static isBuffer(b) { return b instanceof Buffer; }
  static isEncoding(e) { return typeof e === 'string' && e !== '' && normEnc(e) !== undefined; }
  static byteLength(v, enc) {
    if (typeof v !== 'string') return v.byteLength;
    const e = normEnc(enc);
    if (e === 'utf8' || e === undefined) return ops.encode(v, 'utf8').byteLength;
    if (e === 'latin1' || e === 'ascii') return v.length;
    if (e === 'utf16le') return v.length * 2;
    return ops.encode(v, e).byteLength;
  }
  static concat(list, total) {
    if (!Array.isArray(list)) throw invalidArgType('list', 'an instance of Array', list);
    if (total === undefined) total = list.reduce((n, b) => n + b.length, 0);
    const out = Buffer.alloc(total);
    let pos = 0;
    for (const b of list) {
      if (pos >= total) break;
      const src = b.length > total - pos ? b.subarray(0, total - pos) : b;
      out.set(src, pos);
      pos += src.length;
    }
    return out;
  }
  static compare(a, b) { return a.compare(b); }
  toString(enc, start, end) {
    const e = normEnc(enc);
    if (e === undefined) throw codedError(TypeError, 'ERR_UNKNOWN_ENCODING', `Unknown encoding: ${enc}`);
    start = start === undefined ? 0 : Math.max(0, start | 0);
    end = end === undefined ? this.length : Math.min(this.length, end | 0);
    if (end <= start) return '';
    const view = start === 0 && end === this.length ? this : this.subarray(start, end);
    return ops.decode(abOf(view), e);
  }
  toJSON() { return { type: 'Buffer', data: Array.from(this) }; }
  equals(other) {
    if (!(other instanceof Uint8Array)) throw invalidArgType('otherBuffer', 'an instance of Buffer or Uint8Array', other);
    if (this.length !== other.length) return false;
    for (let i = 0; i < this.length; i++) if (this[i] !== other[i]) return false;
    return true;
  }
  compare(target, tStart = 0, tEnd = target.length, sStart = 0, sEnd = this.length) {
    const a = this.subarray(sStart, sEnd), b = target.subarray(tStart, tEnd);
    const n = Math.min(a.length, b.length);
    for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i] < b[i] ? -1 : 1;
    return a.length === b.length ? 0 : a.length < b.length ? -1 : 1;
  }
  slice(start, end) { return this.subarray(start, end); }
  write(str, offset, length, enc) {
    if (typeof offset === 'string') { enc = offset; offset = 0; length = undefined; }
    else if (typeof length === 'string') { enc = length; length = undefined; }
    offset = offset === undefined ? 0 : offset >>> 0;
    const bytes = new Uint8Array(encodeString(str, enc));
    const n = Math.min(bytes.length, this.length - offset, length === undefined ? Infinity : length);
    this.set(bytes.subarray(0, n), offset);
    return n;
  }
  fill(value, offset = 0, end = this.length, enc) {
    if (typeof offset === 'string') { enc = offset; offset = 0; end = this.length; }
    if (typeof value === 'string') {
      const bytes = value.length === 1 && value.charCodeAt(0) < 128 ? [value.charCodeAt(0)] : new Uint8Array(encodeString(value, enc));
      if (bytes.length === 0) return super.fill(0, offset, end);
      for (let i = offset, j = 0; i < end; i++, j = (j + 1) % bytes.length) this[i] = bytes[j];
      return this;
    }
    if (value instanceof Uint8Array) {
      for (let i = offset, j = 0; i < end; i++, j = (j + 1) % value.length) this[i] = value[j];
      return this;
    }
    return super.fill(Number(value) & 255, offset, end);
  }
  indexOf(value, byteOffset = 0, enc) {
    if (typeof value === 'number') return super.indexOf(value & 255, byteOffset);
    const needle = typeof value === 'string' ? new Uint8Array(encodeString(value, enc)) : value;
    if (byteOffset < 0) byteOffset = Math.max(0, this.length + byteOffset);
    if (needle.length === 0) return Math.min(byteOffset, this.length);
    outer: for (let i = byteOffset; i <= this.length - needle.length; i++) {
      for (let j = 0; j < needle.length; j++) if (this[i + j] !== needle[j]) continue outer;
      return i;
    }
    return -1;
  }
  lastIndexOf(value, byteOffset = this.length, enc) {
    const needle = typeof value === 'number' ? [value & 255] : typeof value === 'string' ? new Uint8Array(encodeString(value, enc)) : value;
    for (let i = Math.min(byteOffset, this.length - needle.length); i >= 0; i--) {
      let ok = true;
      for (let j = 0; j < needle.length; j++) if (this[i + j] !== needle[j]) { ok = false; break; }
      if (ok) return i;
    }
    return -1;
  }
  includes(value, byteOffset, enc) { return this.indexOf(value, byteOffset, enc) !== -1; }
  copy(target, tStart = 0, sStart = 0, sEnd = this.length) {
    const src = this.subarray(sStart, Math.min(sEnd, sStart + target.length - tStart));
    target.set(src, tStart);
    return src.length;
  }
  swap16() { for (let i = 0; i + 1 < this.length; i += 2) { const t = this[i]; this[i] = this[i + 1]; this[i + 1] = t; } return this; }
  toLocaleString(enc, s, e) { return this.toString(enc, s, e); }
  [kCustomInspect](depth, options) {
    const max = 50;
    let str = '';
    for (let i = 0; i < Math.min(max, this.length); i++) str += (i ? ' ' : '') + this[i].toString(16).padStart(2, '0');
    if (this.length > max) str += ` ... ${this.length - max} more byte${this.length - max > 1 ? 's' : ''}`;
    return `<${this.constructor.name} ${str}>`.replace(/ >$/, '>');
  }
}
// DataView-backed numeric readers and writers: readUInt32LE, writeDoubleBE, readBigInt64LE...
{
  const dv = (b) => new DataView(b.buffer, b.byteOffset, b.byteLength);
  const kinds = [
    ['UInt8', 'Uint8', 1], ['Int8', 'Int8', 1], ['UInt16', 'Uint16', 2], ['Int16', 'Int16', 2],
    ['UInt32', 'Uint32', 4], ['Int32', 'Int32', 4], ['Float', 'Float32', 4], ['Double', 'Float64', 8],
    ['BigUInt64', 'BigUint64', 8], ['BigInt64', 'BigInt64', 8],
  ];
  const P = Buffer.prototype;
  for (const [name, dvName, size] of kinds) {
    const ends = size === 1 ? [['', false]] : [['LE', true], ['BE', false]];
    for (const [suffix, little] of ends) {
      const check = (b, off) => {
        if (off < 0 || off + size > b.length || off !== Math.floor(off)) {
          throw codedError(RangeError, 'ERR_OUT_OF_RANGE', `The value of "offset" is out of range. It must be >= 0 and <= ${b.length - size}. Received ${off}`);
        }
      };
      const read = function (off = 0) { check(this, off); return dv(this)[`get${dvName}`](off, little); };
      const write = function (value, off = 0) { check(this, off); dv(this)[`set${dvName}`](off, value, little); return off + size; };
      P[`read${name}${suffix}`] = read;
      P[`write${name}${suffix}`] = write;
      if (name.includes('UInt')) {
        P[`read${name.replace('UInt', 'Uint')}${suffix}`] = read;
        P[`write${name.replace('UInt', 'Uint')}${suffix}`] = write;
      }
    }
  }
}
Buffer.poolSize = 8192;
const kMaxLength = 2 ** 32 - 1;

class TextEncoder {
  get encoding() { return 'utf-8'; }
  encode(input = '') { return new Uint8Array(ops.encode(String(input), 'utf8')); }
  encodeInto(src, dest) {
    const bytes = this.encode(src);
    // Only whole characters: back off to a UTF-8 boundary.
    let n = Math.min(bytes.length, dest.length);
    while (n > 0 && n < bytes.length && (bytes[n] & 0xc0) === 0x80) n--;
    dest.set(bytes.subarray(0, n));
    const read = new TextDecoder().decode(bytes.subarray(0, n)).length;
    return { read, written: n };
  }
}

class TextDecoder {
  constructor(label = 'utf-8', options = {}) {
    const l = String(label).toLowerCase().trim();
    const map = { 'utf-8': 'utf8', utf8: 'utf8', 'unicode-1-1-utf-8': 'utf8', 'utf-16le': 'utf16le', 'utf-16': 'utf16le', latin1: 'latin1', 'iso-8859-1': 'latin1', ascii: 'latin1', 'us-ascii': 'latin1', 'windows-1252': 'latin1' };
    if (!map[l]) throw codedError(RangeError, 'ERR_ENCODING_NOT_SUPPORTED', `The "${label}" encoding is not supported`);
    this._enc = map[l];
    this._label = l === 'utf8' ? 'utf-8' : l;
    this.fatal = !!options.fatal;
    this.ignoreBOM = !!options.ignoreBOM;
    this._pending = null;
  }
  get encoding() { return this._label; }
  decode(input, options = {}) {
    let bytes = input === undefined ? new Uint8Array(0)
      : input instanceof ArrayBuffer ? new Uint8Array(input)
      : new Uint8Array(input.buffer, input.byteOffset, input.byteLength);
    if (this._pending) {
      const merged = new Uint8Array(this._pending.length + bytes.length);
      merged.set(this._pending);
      merged.set(bytes, this._pending.length);
      bytes = merged;
      this._pending = null;
    }
    if (options.stream && this._enc === 'utf8') {
      const cut = utf8Boundary(bytes);
      if (cut < bytes.length) {
        this._pending = bytes.slice(cut);
        bytes = bytes.subarray(0, cut);
      }
    }
    let s = ops.decode(abOf(bytes), this._enc);
    if (this.fatal && this._enc === 'utf8' && s.includes('\ufffd') && !new Uint8Array(ops.encode(s, 'utf8')).every((b, i) => b === bytes[i])) {
      throw codedError(TypeError, 'ERR_ENCODING_INVALID_ENCODED_DATA', 'The encoded data was not valid for encoding utf-8');
    }
    if (!this.ignoreBOM && s.charCodeAt(0) === 0xfeff) s = s.slice(1);
    return s;
  }
}

// utf8Boundary is the length of the longest prefix of bytes that ends on a character boundary.
function utf8Boundary(bytes) {
  const n = bytes.length;
  for (let back = 1; back <= Math.min(3, n); back++) {
    const b = bytes[n - back];
    if ((b & 0xc0) === 0x80) continue; // continuation byte
    const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    return need > back ? n - back : n;
  }
  return n;
}

class StringDecoder {
  constructor(encoding) {
    this.encoding = normEnc(encoding) || 'utf8';
    this._dec = this.encoding === 'utf8' ? new TextDecoder('utf-8') : null;
  }
  write(buf) {
    if (typeof buf === 'string') return buf;
    if (this._dec) return this._dec.decode(buf, { stream: true });
    return Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength).toString(this.encoding);
  }
  end(buf) {
    let s = buf ? this.write(buf) : '';
    if (this._dec) s += this._dec.decode();
    return s;
  }
}
