// Number, size, duration and time formatting for the dashboard.

const compact = new Intl.NumberFormat(undefined, { notation: 'compact', maximumFractionDigits: 1 });
const whole = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 });

export function fmtRate(v) {
  return compact.format(num(v)) + '/s';
}

export function fmtCount(v) {
  return whole.format(num(v));
}

export function fmtMs(ms) {
  ms = num(ms);
  if (ms < 9.95) return trim(ms.toFixed(1)) + ' ms';
  if (ms < 999.5) return Math.round(ms) + ' ms';
  if (ms < 9995) return trim((ms / 1000).toFixed(2)) + ' s';
  if (ms < 59950) return trim((ms / 1000).toFixed(1)) + ' s';
  return fmtAge(ms / 1000);
}

// trim drops trailing zeros of a decimal: "1.50" → "1.5", "2.00" → "2".
function trim(fixed) {
  return fixed.includes('.') ? fixed.replace(/\.?0+$/, '') : fixed;
}

export function fmtBytes(b) {
  b = num(b);
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let i = 0;
  while (Math.abs(b) >= 1024 && i < units.length - 1) {
    b /= 1024;
    i++;
  }
  return (i === 0 || b >= 100 ? Math.round(b) : trim(b.toFixed(1))) + ' ' + units[i];
}

export function fmtAge(sec) {
  sec = Math.max(0, Math.floor(num(sec)));
  if (sec < 60) return sec + ' s';
  if (sec < 3600) return Math.floor(sec / 60) + ' min ' + (sec % 60) + ' s';
  if (sec < 86400) return Math.floor(sec / 3600) + ' h ' + Math.floor((sec % 3600) / 60) + ' min';
  return Math.floor(sec / 86400) + ' d ' + Math.floor((sec % 86400) / 3600) + ' h';
}

export function fmtClock(t) {
  const d = t instanceof Date ? t : new Date(t);
  if (isNaN(d)) return '–';
  return d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' });
}

export function fmtDateTime(t) {
  const d = new Date(t);
  if (isNaN(d)) return '–';
  return d.toLocaleString(undefined, {
    year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23',
  });
}

export function fmtShortDateTime(t) {
  const d = new Date(t);
  if (isNaN(d)) return '–';
  if (d.toDateString() === new Date().toDateString()) return fmtClock(d);
  return d.toLocaleString(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
}

export function fmtPercent(r) {
  return Math.round(clamp01(r) * 100) + '%';
}

export function num(v) {
  const n = Number(v);
  return Number.isFinite(n) ? n : 0;
}

export function clamp01(v) {
  return Math.min(1, Math.max(0, num(v)));
}

export function plural(n, one, many) {
  return n === 1 ? one : many;
}

// fmtStamp is a date and time that says which day: "2026-03-01 12:00:03",
// in the browser's time zone. A watermark months behind must not read as
// one of today's times.
export function fmtStamp(t) {
  const d = t instanceof Date ? t : new Date(t);
  if (isNaN(d)) return '–';
  const p = (n) => String(n).padStart(2, '0');
  return d.getFullYear() + '-' + p(d.getMonth() + 1) + '-' + p(d.getDate()) + ' ' + fmtClock(d);
}

// fmtLag is a duration in milliseconds as a lag: "350 ms", "4.2 s",
// "3 min 20 s", "62 d 4 h".
export function fmtLag(ms) {
  ms = num(ms);
  return ms < 59950 ? fmtMs(Math.max(0, ms)) : fmtAge(ms / 1000);
}
