// Labels and label sets: construction, lookup and validation.
//
// A LabelSet is kept sorted by (name, value) with no duplicates. Ordering compares strings by
// their UTF-8 bytes, which is how the Go side orders them.
import { ValidationError } from './errors.js';
import type { Label, LabelSet } from './gen/broker/protocol.js';

// Well-known label names and values.
export const LABEL_CONTENT_TYPE = 'content-type';
export const LABEL_MESSAGE_TYPE = 'app.gazette.dev/message-type';
export const LABEL_MESSAGE_SUBTYPE = 'app.gazette.dev/message-subtype';
export const LABEL_MANAGED_BY = 'app.gazette.dev/managed-by';
export const LABEL_INSTANCE = 'app.gazette.dev/instance';
export const LABEL_REGION = 'app.gazette.dev/region';
export const LABEL_TAG = 'app.gazette.dev/tag';

export const CONTENT_TYPE_JSON_LINES = 'application/x-ndjson';
export const CONTENT_TYPE_CSV = 'text/csv';
export const CONTENT_TYPE_PROTO_FIXED = 'application/x-protobuf-fixed';
export const CONTENT_TYPE_RECOVERY_LOG = 'application/x-gazette-recoverylog';

/** Meta-label carrying a journal's name in selector matching. */
export const META_LABEL_NAME = 'name';
/** Meta-label for journal-name prefixes in journal selectors (rewritten to `name` prefix). */
export const META_LABEL_PREFIX = 'prefix';
/** Meta-label carrying a shard's ID in selector matching. */
export const META_LABEL_ID = 'id';

/** Labels that may carry at most one value within a spec. */
export const SINGLE_VALUE_LABELS: ReadonlySet<string> = new Set([
  LABEL_CONTENT_TYPE,
  LABEL_MESSAGE_TYPE,
  LABEL_MESSAGE_SUBTYPE,
  LABEL_MANAGED_BY,
  LABEL_INSTANCE,
  LABEL_REGION,
]);

export const LABEL_NAME_MIN_BYTES = 2;
export const LABEL_NAME_MAX_BYTES = 64;
export const LABEL_VALUE_MAX_BYTES = 1024;

/** Symbols (besides Unicode letters and numbers) allowed in tokens: label names, zones, shard IDs. */
export const TOKEN_SYMBOLS = '-_+/.';
/** Symbols allowed in label values and path components: token symbols plus `=` and `%`. */
export const PATH_SYMBOLS = '-_+/.=%';

const LETTER_OR_NUMBER = /^[\p{L}\p{N}]$/u;
const HAS_SURROGATE = /[\uD800-\uDFFF]/;

/**
 * Compares two strings by UTF-8 byte order (equivalently, code point order). JavaScript's `<`
 * compares UTF-16 units, which differs only when astral characters are involved.
 */
export function compareStrings(a: string, b: string): number {
  if (a === b) return 0;
  if (!HAS_SURROGATE.test(a) && !HAS_SURROGATE.test(b)) return a < b ? -1 : 1;
  const ia = a[Symbol.iterator]();
  const ib = b[Symbol.iterator]();
  for (;;) {
    const x = ia.next();
    const y = ib.next();
    if (x.done) return y.done ? 0 : -1;
    if (y.done) return 1;
    const cx = x.value.codePointAt(0)!;
    const cy = y.value.codePointAt(0)!;
    if (cx !== cy) return cx < cy ? -1 : 1;
  }
}

/** Orders labels by name, then value. */
export function compareLabels(a: Label, b: Label): number {
  return compareStrings(a.name, b.name) || compareStrings(a.value, b.value);
}

export function label(name: string, value = '', prefix = false): Label {
  return { name, value, prefix };
}

/** Builds a LabelSet sorted by (name, value) with exact duplicates removed. */
export function labelSet(...labels: Label[]): LabelSet {
  const sorted = labels.map((l) => ({ ...l })).sort(compareLabels);
  const out: Label[] = [];
  for (const l of sorted) {
    const last = out[out.length - 1];
    if (last && last.name === l.name && last.value === l.value && last.prefix === l.prefix) continue;
    out.push(l);
  }
  return { labels: out };
}

/** Values of label `name` in the set, in set order (empty when absent). */
/** Whether the set has label `name` (with any value). */
export function hasLabel(set: LabelSet | undefined, name: string): boolean {
  const labels = set?.labels;
  if (labels === undefined) return false;
  for (let i = 0; i < labels.length; i++) if (labels[i]!.name === name) return true;
  return false;
}

export function labelValues(set: LabelSet | undefined, name: string): string[] {
  if (!set) return [];
  return set.labels.filter((l) => l.name === name).map((l) => l.value);
}

/** First value of label `name`, or undefined when the label is absent. */
export function labelValue(set: LabelSet | undefined, name: string): string | undefined {
  return set?.labels.find((l) => l.name === name)?.value;
}

/** Returns a copy of `set` with `name` holding exactly `value` (other values removed). */
export function setLabelValue(set: LabelSet | undefined, name: string, value: string): LabelSet {
  const rest = (set?.labels ?? []).filter((l) => l.name !== name);
  return labelSet(...rest, label(name, value));
}

/** Returns a copy of `set` with `name` also holding `value`. */
export function addLabelValue(set: LabelSet | undefined, name: string, value: string): LabelSet {
  return labelSet(...(set?.labels ?? []), label(name, value));
}

/** Returns a copy of `set` without any label `name`. */
export function removeLabel(set: LabelSet | undefined, name: string): LabelSet {
  return { labels: (set?.labels ?? []).filter((l) => l.name !== name).map((l) => ({ ...l })) };
}

function byteLength(s: string): number {
  return Buffer.byteLength(s, 'utf8');
}

function quote(s: string): string {
  return JSON.stringify(s);
}

/**
 * Checks that `s` is `min`..`max` UTF-8 bytes of Unicode letters, numbers and `symbols`.
 * Returns a problem description, or undefined when fine.
 */
export function checkAlphabet(s: string, symbols: string, min: number, max: number): string | undefined {
  // The usual case: ASCII letters, digits and symbols only, so bytes are UTF-16 units.
  if (isAsciiInAlphabet(s, symbols)) {
    const n = s.length;
    return n < min || n > max ? `length ${n} is out of range (${min} to ${max} bytes)` : undefined;
  }
  return checkAlphabetSlow(s, symbols, min, max);
}

// ASCII membership tables: one for each symbol set of ours, and one for the last other set.
const TOKEN_TABLE = asciiTable(TOKEN_SYMBOLS);
const PATH_TABLE = asciiTable(PATH_SYMBOLS);
let otherSymbols = '';
let otherTable = asciiTable('');

function asciiTable(symbols: string): Uint8Array {
  const t = new Uint8Array(128);
  for (let c = 0x30; c <= 0x39; c++) t[c] = 1;
  for (let c = 0x41; c <= 0x5a; c++) t[c] = 1;
  for (let c = 0x61; c <= 0x7a; c++) t[c] = 1;
  for (let i = 0; i < symbols.length; i++) {
    const c = symbols.charCodeAt(i);
    if (c < 128) t[c] = 1;
  }
  return t;
}

/** Whether `s` is all ASCII and every character is a letter, digit or one of `symbols`. */
function isAsciiInAlphabet(s: string, symbols: string): boolean {
  let t: Uint8Array;
  if (symbols === PATH_SYMBOLS) t = PATH_TABLE;
  else if (symbols === TOKEN_SYMBOLS) t = TOKEN_TABLE;
  else {
    if (symbols !== otherSymbols) {
      otherTable = asciiTable(symbols);
      otherSymbols = symbols;
    }
    t = otherTable;
  }
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 128 || t[c] === 0) return false;
  }
  return true;
}

/** checkAlphabet for any text (non-ASCII, or with a character outside the alphabet). */
function checkAlphabetSlow(s: string, symbols: string, min: number, max: number): string | undefined {
  const n = byteLength(s);
  if (n < min || n > max) {
    return `length ${n} is out of range (${min} to ${max} bytes)`;
  }
  let i = 0;
  for (const ch of s) {
    if (!LETTER_OR_NUMBER.test(ch) && !symbols.includes(ch)) {
      return `invalid character ${quote(ch)} at position ${i + 1} (allowed: letters, numbers and ${symbols.split('').join(' ')})`;
    }
    i++;
  }
  return undefined;
}

export function validateLabelName(name: string): void {
  const p = checkAlphabet(name, TOKEN_SYMBOLS, LABEL_NAME_MIN_BYTES, LABEL_NAME_MAX_BYTES);
  if (p) throw new ValidationError(p, `label name ${quote(name)}`);
}

export function validateLabelValue(value: string): void {
  const p = checkAlphabet(value, PATH_SYMBOLS, 0, LABEL_VALUE_MAX_BYTES);
  if (p) throw new ValidationError(p, `label value ${quote(value)}`);
}

function describe(l: Label): string {
  return l.value === '' ? quote(l.name) : `${quote(l.name)}=${quote(l.value)}`;
}

/**
 * Validates a LabelSet: each label valid; sorted by (name, value) and unique; no name with both
 * an empty and a non-empty value; `prefix` only when `allowPrefix` (selectors).
 */
export function validateLabelSet(set: LabelSet | undefined, opts?: { allowPrefix?: boolean }): void {
  const labels = set?.labels;
  if (labels === undefined) return;
  for (let i = 0; i < labels.length; i++) {
    const l = labels[i]!;
    const np = checkAlphabet(l.name, TOKEN_SYMBOLS, LABEL_NAME_MIN_BYTES, LABEL_NAME_MAX_BYTES);
    if (np) throw new ValidationError(`name ${quote(l.name)}: ${np}`, `labels[${i}]`);
    const vp = checkAlphabet(l.value, PATH_SYMBOLS, 0, LABEL_VALUE_MAX_BYTES);
    if (vp) throw new ValidationError(`label ${quote(l.name)} value ${quote(l.value)}: ${vp}`, `labels[${i}]`);
    if (l.prefix && !opts?.allowPrefix) {
      throw new ValidationError(`label ${describe(l)} has prefix=true, which is only allowed in selectors`, `labels[${i}]`);
    }
    if (i === 0) continue;
    const prev = labels[i - 1]!;
    const c = compareStrings(prev.name, l.name);
    if (c < 0) continue;
    const at = `labels[${i}]`;
    if (c > 0) {
      throw new ValidationError(
        `labels are not sorted: ${quote(l.name)} comes after ${quote(prev.name)}`,
        at,
      );
    }
    if (c === 0) {
      const cv = compareStrings(prev.value, l.value);
      if (cv === 0) throw new ValidationError(`duplicate label ${describe(l)}`, at);
      if (cv > 0) {
        throw new ValidationError(
          `labels are not sorted: ${describe(l)} comes after value ${quote(prev.value)}`,
          at,
        );
      }
      if (prev.value === '') {
        throw new ValidationError(`label ${quote(l.name)} has both an empty and a non-empty value (${quote(l.value)})`, at);
      }
    }
  }
}

// RFC 2045 token characters as Go's mime package accepts them.
const MIME_TSPECIALS = '()<>@,;:\\"/[]?=';
function isMimeTokenChar(ch: string): boolean {
  const c = ch.codePointAt(0)!;
  return c > 0x20 && c < 0x7f && !MIME_TSPECIALS.includes(ch);
}

/** Returns a problem with a media type ("type" or "type/subtype", no parameters), or undefined. */
export function checkMediaType(v: string): string | undefined {
  const base = v.split(';', 1)[0]!.trim();
  let i = 0;
  const chars = [...base];
  while (i < chars.length && isMimeTokenChar(chars[i]!)) i++;
  if (i === 0) return 'no media type';
  if (i === chars.length) return undefined;
  if (chars[i] !== '/') return 'expected slash after first token';
  const j = ++i;
  while (i < chars.length && isMimeTokenChar(chars[i]!)) i++;
  if (i === j) return 'expected token after slash';
  if (i !== chars.length) return 'unexpected content after media subtype';
  return undefined;
}

/**
 * Validates the single-value rules of spec labels: labels in SINGLE_VALUE_LABELS have at most one
 * value; content-type parses as a MIME type; message-type requires content-type; message-subtype
 * requires message-type. The set must already be sorted.
 */
export function validateSingleValueLabels(set: LabelSet | undefined): void {
  const labels = set?.labels ?? [];
  // Only the single-value labels matter below: without any, there is nothing to check.
  let any = false;
  for (let i = 0; i < labels.length; i++) {
    if (SINGLE_VALUE_LABELS.has(labels[i]!.name)) {
      any = true;
      break;
    }
  }
  if (!any) return;
  for (let i = 1; i < labels.length; i++) {
    const l = labels[i]!;
    if (labels[i - 1]!.name === l.name && SINGLE_VALUE_LABELS.has(l.name)) {
      throw new ValidationError(
        `label ${quote(l.name)} may have only one value (found ${quote(labels[i - 1]!.value)} and ${quote(l.value)})`,
        `labels[${i}]`,
      );
    }
  }
  const ct = labelValues(set, LABEL_CONTENT_TYPE);
  if (ct.length !== 0) {
    const p = checkMediaType(ct[0]!);
    if (p) throw new ValidationError(`${LABEL_CONTENT_TYPE} ${quote(ct[0]!)} is not a MIME type: ${p}`, 'labels');
  }
  if (labelValues(set, LABEL_MESSAGE_TYPE).length !== 0) {
    if (ct.length === 0) {
      throw new ValidationError(`label ${quote(LABEL_MESSAGE_TYPE)} requires a ${quote(LABEL_CONTENT_TYPE)} label`, 'labels');
    }
  } else if (labelValues(set, LABEL_MESSAGE_SUBTYPE).length !== 0) {
    throw new ValidationError(`label ${quote(LABEL_MESSAGE_SUBTYPE)} requires a ${quote(LABEL_MESSAGE_TYPE)} label`, 'labels');
  }
}

/** The message of a ValidationError without its path prefix. */
export function validationDetail(e: ValidationError): string {
  return e.path && e.message.startsWith(`${e.path}: `) ? e.message.slice(e.path.length + 2) : e.message;
}
