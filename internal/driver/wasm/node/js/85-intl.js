// A small Intl for QuickJS, which has none: en-US formatting only (every locale is treated as
// en-US) and UTC as the only time zone, which is what the sandbox's clock is anyway. It covers
// NumberFormat, DateTimeFormat, Collator, PluralRules, RelativeTimeFormat and ListFormat well
// enough for the usual toLocaleString() calls.

const currencySymbols = { USD: '$', EUR: '€', GBP: '£', JPY: '¥', INR: '₹', CNY: 'CN¥', CAD: 'CA$', AUD: 'A$' };

function groupDigits(intPart) {
  return intPart.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

class NumberFormat {
  #o;
  constructor(locales, options = {}) {
    const style = options.style || 'decimal';
    const currency = options.currency ? String(options.currency).toUpperCase() : undefined;
    if (style === 'currency' && !currency) throw new TypeError('Currency code is required with currency style.');
    const curDigits = currency === 'JPY' ? 0 : 2;
    const defMin = style === 'currency' ? curDigits : 0;
    const defMax = style === 'currency' ? curDigits : style === 'percent' ? 0 : 3;
    let minF = options.minimumFractionDigits ?? defMin;
    let maxF = options.maximumFractionDigits ?? Math.max(defMax, minF);
    if (maxF < minF) throw new RangeError('maximumFractionDigits value is out of range.');
    this.#o = {
      style, currency, minF, maxF,
      minI: options.minimumIntegerDigits ?? 1,
      maxSig: options.maximumSignificantDigits,
      grouping: options.useGrouping !== false && options.useGrouping !== 'false',
      notation: options.notation || 'standard',
      signDisplay: options.signDisplay || 'auto',
      currencyDisplay: options.currencyDisplay || 'symbol',
    };
  }
  format(value) {
    const o = this.#o;
    let n = typeof value === 'bigint' ? Number(value) : Number(value);
    if (Number.isNaN(n)) return 'NaN';
    const neg = n < 0 || Object.is(n, -0);
    n = Math.abs(n);
    if (o.style === 'percent') n *= 100;
    let suffix = '';
    if (o.notation === 'compact' && n >= 1000) {
      for (const [v, s] of [[1e12, 'T'], [1e9, 'B'], [1e6, 'M'], [1e3, 'K']]) {
        if (n >= v) { n /= v; suffix = s; break; }
      }
    }
    let s;
    if (!Number.isFinite(n)) s = '∞';
    else if (o.maxSig !== undefined) s = String(Number(n.toPrecision(o.maxSig)));
    else if (o.notation === 'compact') s = String(Number(n.toFixed(n < 100 && suffix ? 1 : 0)));
    else {
      s = n.toFixed(o.maxF);
      if (o.maxF > o.minF && s.includes('.')) {
        let [i, f] = s.split('.');
        f = f.replace(/0+$/, '');
        if (f.length < o.minF) f = f.padEnd(o.minF, '0');
        s = f ? `${i}.${f}` : i;
      }
    }
    let [int, frac] = s.split('.');
    if (/^\d+$/.test(int)) {
      int = int.padStart(o.minI, '0');
      if (o.grouping) int = groupDigits(int);
    }
    s = frac === undefined ? int : `${int}.${frac}`;
    s += suffix;
    if (o.style === 'percent') s += '%';
    if (o.style === 'currency') {
      const sym = o.currencyDisplay === 'code' ? `${o.currency} ` : (currencySymbols[o.currency] || `${o.currency} `);
      s = sym + s;
    }
    const isZero = /^[^1-9]*$/.test(s);
    if (neg && !isZero && o.signDisplay !== 'never') s = `-${s}`;
    else if (o.signDisplay === 'always' || (o.signDisplay === 'exceptZero' && !isZero)) s = `+${s}`;
    return s;
  }
  formatToParts(value) { return [{ type: 'literal', value: this.format(value) }]; }
  resolvedOptions() {
    const o = this.#o;
    return { locale: 'en-US', numberingSystem: 'latn', style: o.style, currency: o.currency, minimumIntegerDigits: o.minI, minimumFractionDigits: o.minF, maximumFractionDigits: o.maxF, useGrouping: o.grouping, notation: o.notation, signDisplay: o.signDisplay };
  }
  static supportedLocalesOf(l) { return [].concat(l ?? []).filter(Boolean).map(String); }
}

const monthNames = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];
const dayNames = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];

class DateTimeFormat {
  #o;
  constructor(locales, options = {}) {
    const o = { ...options };
    if (o.timeZone !== undefined && !/^(utc|gmt|etc\/utc|etc\/gmt)$/i.test(String(o.timeZone))) {
      // Only UTC exists here; other zones are accepted but shown as UTC.
    }
    const has = (k) => o[k] !== undefined;
    if (!o.dateStyle && !o.timeStyle && !['weekday', 'year', 'month', 'day', 'hour', 'minute', 'second'].some(has)) {
      o.year = 'numeric'; o.month = 'numeric'; o.day = 'numeric';
    }
    this.#o = o;
  }
  format(date = Date.now()) {
    const d = date instanceof Date ? date : new Date(date);
    if (Number.isNaN(d.getTime())) throw new RangeError('Invalid time value');
    const o = this.#o;
    const parts = [];
    let dateOpts = o, timeOpts = o;
    if (o.dateStyle) {
      dateOpts = { full: { weekday: 'long', month: 'long', day: 'numeric', year: 'numeric' }, long: { month: 'long', day: 'numeric', year: 'numeric' }, medium: { month: 'short', day: 'numeric', year: 'numeric' }, short: { month: 'numeric', day: 'numeric', year: '2-digit' } }[o.dateStyle];
    }
    if (o.timeStyle) {
      timeOpts = { full: { hour: 'numeric', minute: '2-digit', second: '2-digit', tz: true }, long: { hour: 'numeric', minute: '2-digit', second: '2-digit', tz: true }, medium: { hour: 'numeric', minute: '2-digit', second: '2-digit' }, short: { hour: 'numeric', minute: '2-digit' } }[o.timeStyle];
    }
    const ds = o.dateStyle || !o.timeStyle ? formatDatePart(d, dateOpts) : '';
    const ts = o.timeStyle || (!o.dateStyle) ? formatTimePart(d, timeOpts, o.hour12) : '';
    if (ds) parts.push(ds);
    if (ts) parts.push(ts);
    return parts.join(o.dateStyle === 'full' || o.dateStyle === 'long' ? ' at ' : ', ');
  }
  formatToParts(date) { return [{ type: 'literal', value: this.format(date) }]; }
  formatRange(a, b) { return `${this.format(a)} – ${this.format(b)}`; }
  resolvedOptions() { return { locale: 'en-US', calendar: 'gregory', numberingSystem: 'latn', timeZone: 'UTC', ...this.#o }; }
  static supportedLocalesOf(l) { return [].concat(l ?? []).filter(Boolean).map(String); }
}

function formatDatePart(d, o) {
  if (!o || !(o.year || o.month || o.day || o.weekday)) return '';
  const y = d.getFullYear(), m = d.getMonth(), day = d.getDate();
  const yy = o.year === '2-digit' ? String(y % 100).padStart(2, '0') : String(y);
  const dd = o.day === '2-digit' ? String(day).padStart(2, '0') : String(day);
  const wd = o.weekday ? (o.weekday === 'long' ? dayNames[d.getDay()] : dayNames[d.getDay()].slice(0, o.weekday === 'narrow' ? 1 : 3)) : '';
  if (o.month === 'long' || o.month === 'short' || o.month === 'narrow') {
    const mn = o.month === 'long' ? monthNames[m] : o.month === 'short' ? monthNames[m].slice(0, 3) : monthNames[m][0];
    let s = mn;
    if (o.day) s += ` ${dd}`;
    if (o.year) s += o.day ? `, ${yy}` : ` ${yy}`;
    return wd ? `${wd}, ${s}` : s;
  }
  const mm = o.month === '2-digit' ? String(m + 1).padStart(2, '0') : String(m + 1);
  const fields = [];
  if (o.month) fields.push(mm);
  if (o.day) fields.push(dd);
  if (o.year) fields.push(yy);
  const s = fields.join('/');
  return wd ? (s ? `${wd}, ${s}` : wd) : s;
}

function formatTimePart(d, o, hour12) {
  if (!o || !(o.hour || o.minute || o.second)) return '';
  const h = d.getHours();
  const twelve = hour12 !== false && o.hourCycle !== 'h23';
  let hs = twelve ? String(h % 12 === 0 ? 12 : h % 12) : String(h);
  if (o.hour === '2-digit' || !twelve) hs = hs.padStart(2, '0');
  const fields = [];
  if (o.hour) fields.push(hs);
  if (o.minute) fields.push(String(d.getMinutes()).padStart(o.hour ? 2 : 1, '0'));
  if (o.second) fields.push(String(d.getSeconds()).padStart(2, '0'));
  let s = fields.join(':');
  if (o.hour && twelve) s += h < 12 ? ' AM' : ' PM';
  if (o.tz || o.timeZoneName) s += ' UTC';
  return s;
}

// localeCompareBase approximates ICU's root collation: letters compare case- and accent-
// insensitively first, then accents, then case with lowercase first.
const stripMarks = (s) => s.normalize('NFD').replace(/[\u0300-\u036f]/g, '');
function collate(a, b, sensitivity = 'variant') {
  const ka = stripMarks(a).toLowerCase(), kb = stripMarks(b).toLowerCase();
  if (ka !== kb) return ka < kb ? -1 : 1;
  if (sensitivity === 'base') return 0;
  const aa = a.normalize('NFD').toLowerCase(), ab = b.normalize('NFD').toLowerCase();
  if (aa !== ab) return aa < ab ? -1 : 1;
  if (sensitivity === 'accent' || a === b) return 0;
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    if (a[i] !== b[i]) return a[i] === a[i].toLowerCase() ? -1 : 1;
  }
  return a.length - b.length;
}

class Collator {
  #o;
  constructor(locales, options = {}) { this.#o = options; }
  compare = (a, b) => {
    a = String(a); b = String(b);
    if (this.#o.numeric) {
      const re = /(\d+)|(\D+)/g;
      const pa = a.match(re) || [], pb = b.match(re) || [];
      for (let i = 0; i < Math.min(pa.length, pb.length); i++) {
        const x = pa[i], y = pb[i];
        if (/^\d/.test(x) && /^\d/.test(y)) { if (Number(x) !== Number(y)) return Number(x) < Number(y) ? -1 : 1; }
        else if (x !== y) return collate(x, y, this.#o.sensitivity);
      }
      return pa.length - pb.length;
    }
    return collate(a, b, this.#o.sensitivity);
  };
  resolvedOptions() { return { locale: 'en-US', usage: 'sort', sensitivity: 'variant', ...this.#o }; }
}

class PluralRules {
  #type;
  constructor(locales, options = {}) { this.#type = options.type || 'cardinal'; }
  select(n) {
    n = Number(n);
    if (this.#type === 'ordinal') {
      const t = n % 10, h = n % 100;
      if (t === 1 && h !== 11) return 'one';
      if (t === 2 && h !== 12) return 'two';
      if (t === 3 && h !== 13) return 'few';
      return 'other';
    }
    return n === 1 ? 'one' : 'other';
  }
  resolvedOptions() { return { locale: 'en-US', type: this.#type }; }
}

class RelativeTimeFormat {
  #numeric;
  constructor(locales, options = {}) { this.#numeric = options.numeric || 'always'; }
  format(value, unit) {
    const u = String(unit).replace(/s$/, '');
    const v = Number(value);
    if (this.#numeric === 'auto') {
      if (v === 0 && u === 'day') return 'today';
      if (v === 1 && u === 'day') return 'tomorrow';
      if (v === -1 && u === 'day') return 'yesterday';
      if (v === 0) return `this ${u}`;
    }
    const abs = Math.abs(v);
    const label = `${groupDigits(String(abs))} ${u}${abs === 1 ? '' : 's'}`;
    return v < 0 || Object.is(v, -0) ? `${label} ago` : `in ${label}`;
  }
}

class ListFormat {
  #o;
  constructor(locales, options = {}) { this.#o = options; }
  format(list) {
    const a = [...list].map(String);
    const word = this.#o.type === 'disjunction' ? 'or' : 'and';
    if (a.length <= 1) return a.join('');
    if (a.length === 2) return `${a[0]} ${word} ${a[1]}`;
    return `${a.slice(0, -1).join(', ')}, ${word} ${a[a.length - 1]}`;
  }
}

const Intl = {
  NumberFormat, DateTimeFormat, Collator, PluralRules, RelativeTimeFormat, ListFormat,
  getCanonicalLocales: (l) => [].concat(l ?? []).map(String),
  supportedValuesOf: (k) => (k === 'timeZone' ? ['UTC'] : []),
};
defineGlobal('Intl', Intl);

const defineMethod = (proto, name, fn) => Object.defineProperty(proto, name, { value: fn, writable: true, configurable: true, enumerable: false });
defineMethod(String.prototype, 'localeCompare', function localeCompare(that, locales, options) {
  if (options) return new Collator(locales, options).compare(String(this), String(that));
  return collate(String(this), String(that));
});
defineMethod(Number.prototype, 'toLocaleString', function toLocaleString(locales, options) {
  return new NumberFormat(locales, options).format(Number.prototype.valueOf.call(this));
});
if (typeof BigInt === 'function') {
  defineMethod(BigInt.prototype, 'toLocaleString', function toLocaleString(locales, options) {
    return new NumberFormat(locales, options).format(BigInt.prototype.valueOf.call(this));
  });
}
defineMethod(Date.prototype, 'toLocaleDateString', function toLocaleDateString(locales, options = {}) {
  const o = ['weekday', 'year', 'month', 'day', 'dateStyle'].some((k) => options[k] !== undefined) ? options : { ...options, year: 'numeric', month: 'numeric', day: 'numeric' };
  return Number.isNaN(this.getTime()) ? 'Invalid Date' : new DateTimeFormat(locales, o).format(this);
});
defineMethod(Date.prototype, 'toLocaleTimeString', function toLocaleTimeString(locales, options = {}) {
  const o = ['hour', 'minute', 'second', 'timeStyle'].some((k) => options[k] !== undefined) ? options : { ...options, hour: 'numeric', minute: '2-digit', second: '2-digit' };
  return Number.isNaN(this.getTime()) ? 'Invalid Date' : new DateTimeFormat(locales, o).format(this);
});
defineMethod(Date.prototype, 'toLocaleString', function toLocaleString(locales, options = {}) {
  if (Number.isNaN(this.getTime())) return 'Invalid Date';
  const any = ['weekday', 'year', 'month', 'day', 'hour', 'minute', 'second', 'dateStyle', 'timeStyle'].some((k) => options[k] !== undefined);
  const o = any ? options : { ...options, year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: '2-digit', second: '2-digit' };
  return new DateTimeFormat(locales, o).format(this);
});
