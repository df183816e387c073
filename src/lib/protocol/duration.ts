// Go-style durations. Gazette's YAML and flags use Go's time.Duration text form ("1m0s",
// "1.5s", "720h0m0s"); the wire uses google.protobuf.Duration. We carry durations as bigint
// nanoseconds in between.
import type { Duration } from './gen/google/protobuf/duration.js';

const NS = 1n;
const US = 1000n * NS;
const MS = 1000n * US;
const SEC = 1000n * MS;
const MIN = 60n * SEC;
const HOUR = 60n * MIN;

const UNITS: Record<string, bigint> = {
  ns: NS,
  us: US,
  'µs': US, // U+00B5 micro sign
  'μs': US, // U+03BC Greek mu
  ms: MS,
  s: SEC,
  m: MIN,
  h: HOUR,
};

const MAX_DURATION = (1n << 63n) - 1n;

/** Parses a Go duration string ("1h30m", "1.5s", "250ms", "0") into nanoseconds. */
export function parseGoDuration(input: string): bigint {
  let s = input;
  let neg = false;
  if (s.startsWith('-') || s.startsWith('+')) {
    neg = s[0] === '-';
    s = s.slice(1);
  }
  if (s === '0') return 0n;
  if (s === '') throw new Error(`invalid duration ${JSON.stringify(input)}`);
  let total = 0n;
  while (s !== '') {
    // The two micro signs as escapes: the CLI bundle then holds only ASCII, which V8 keeps as a
    // one-byte string (a single non-ASCII character makes all 1.9 MB of it two-byte at start-up).
    const m = /^(\d*)(?:\.(\d*))?([a-z\u00b5\u03bc]+)/.exec(s);
    if (!m || (m[1] === '' && (m[2] === undefined || m[2] === ''))) {
      throw new Error(`invalid duration ${JSON.stringify(input)}`);
    }
    const unit = UNITS[m[3]!];
    if (unit === undefined) {
      throw new Error(`unknown unit ${JSON.stringify(m[3])} in duration ${JSON.stringify(input)}`);
    }
    const whole = BigInt(m[1] || '0') * unit;
    let frac = 0n;
    if (m[2]) {
      // Scale the fraction into the unit, truncating like Go does.
      const digits = m[2];
      frac = (BigInt(digits) * unit) / 10n ** BigInt(digits.length);
    }
    total += whole + frac;
    if (total > MAX_DURATION) throw new Error(`invalid duration ${JSON.stringify(input)}: overflow`);
    s = s.slice(m[0].length);
  }
  return neg ? -total : total;
}

function fmtFrac(v: bigint, prec: number): string {
  // Formats v / 10^prec with trailing zeros removed (Go's fmtFrac).
  const scale = 10n ** BigInt(prec);
  const whole = v / scale;
  let frac = (v % scale).toString().padStart(prec, '0').replace(/0+$/, '');
  return frac ? `${whole}.${frac}` : `${whole}`;
}

/** Formats nanoseconds the way Go's time.Duration.String does. */
export function formatGoDuration(ns: bigint): string {
  if (ns === 0n) return '0s';
  const neg = ns < 0n;
  let u = neg ? -ns : ns;
  let out: string;
  if (u < SEC) {
    if (u < US) out = `${u}ns`;
    else if (u < MS) out = `${fmtFrac(u, 3)}µs`;
    else out = `${fmtFrac(u, 6)}ms`;
  } else {
    const h = u / HOUR;
    u -= h * HOUR;
    const m = u / MIN;
    u -= m * MIN;
    const secs = fmtFrac(u, 9) + 's';
    if (h > 0n) out = `${h}h${m}m${secs}`;
    else if (m > 0n) out = `${m}m${secs}`;
    else out = secs;
  }
  return neg ? '-' + out : out;
}

export function durationToNanos(d: Duration | undefined): bigint {
  if (!d) return 0n;
  return BigInt(d.seconds) * SEC + BigInt(d.nanos);
}

export function nanosToDuration(ns: bigint): Duration {
  // seconds and nanos carry the same sign, as in Go's conversion.
  return { seconds: ns / SEC, nanos: Number(ns % SEC) };
}

/** The proto3-JSON rendering of a Duration: "60s", "1.500s", "0s". */
export function durationToProtoJson(d: Duration | undefined): string {
  const ns = durationToNanos(d);
  const neg = ns < 0n;
  const a = neg ? -ns : ns;
  const secs = a / SEC;
  const nanos = a % SEC;
  let frac = '';
  if (nanos !== 0n) {
    if (nanos % MS === 0n) frac = '.' + (nanos / MS).toString().padStart(3, '0');
    else if (nanos % US === 0n) frac = '.' + (nanos / US).toString().padStart(6, '0');
    else frac = '.' + nanos.toString().padStart(9, '0');
  }
  return `${neg ? '-' : ''}${secs}${frac}s`;
}

export const Durations = { NS, US, MS, SEC, MIN, HOUR };
