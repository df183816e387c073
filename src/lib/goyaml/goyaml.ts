// A YAML emitter that writes what Go's gopkg.in/yaml.v2 (v2.4) Marshal writes for the value
// shapes our spec formats use, plus a strict decoding helper built on the `yaml` package that
// resolves plain scalars the way yaml.v2 does and reports errors with line numbers.
//
// Emitter model (block style only):
//   * mappings: one `key: value` per line, nested mappings indented by 2;
//   * sequences under a mapping key are written at the key's own indentation (`- item`);
//   * empty mappings/sequences are written in flow form (`{}` / `[]`);
//   * strings are plain unless yaml.v2 would quote them: double quotes when the text would read
//     back as another type (null, bool, int, float, timestamp, base-60 float), single quotes when
//     the text is a string but cannot be written plain (leading indicator, `: `, ` #`, leading or
//     trailing space, ...), double quotes when single quotes can't carry it (control characters);
//     strings containing a newline use a literal block (`|-`);
//   * like yaml.v2 v2.4 (which gazctl uses without FutureLineWrap), scalars are folded at a space
//     once the line is longer than 80 columns; continuation lines are indented by 2 relative to
//     the owning key or dash.
import {
  Alias,
  LineCounter,
  isAlias,
  isMap,
  isScalar,
  isSeq,
  parseDocument,
  type Document,
  type Node as YNode,
  type Pair,
  type Scalar,
  type YAMLMap,
  type YAMLSeq,
} from 'yaml';
import { parseGoDuration } from '../protocol/duration.js';
import { fastParse } from './fast-parse.js';
export { enumNames } from '../protocol/enums.js';
import { ValidationError } from '../protocol/errors.js';

// ------------------------------------------------------------------------------------------
// Values to emit.

/** An ordered mapping: keys are written in insertion order. */
export interface YamlMapping {
  [key: string]: YamlValue;
}
/** Values the emitter understands. Numbers, bigints and booleans are written as plain tokens. */
export type YamlValue = string | number | bigint | boolean | YamlValue[] | YamlMapping;

const BEST_WIDTH = 80;
const BEST_INDENT = 2;

// ------------------------------------------------------------------------------------------
// yaml.v2 plain-scalar resolution.

/** What a plain (unquoted) scalar reads back as under yaml.v2's resolver. */
export type ResolvedKind = 'null' | 'bool' | 'int' | 'float' | 'timestamp' | 'str';

const BOOL_TRUE = new Set(['y', 'Y', 'yes', 'Yes', 'YES', 'true', 'True', 'TRUE', 'on', 'On', 'ON']);
const BOOL_FALSE = new Set(['n', 'N', 'no', 'No', 'NO', 'false', 'False', 'FALSE', 'off', 'Off', 'OFF']);
const NULLS = new Set(['', '~', 'null', 'Null', 'NULL']);
const SPECIAL_FLOATS = new Set([
  '.nan', '.NaN', '.NAN', '.inf', '.Inf', '.INF', '+.inf', '+.Inf', '+.INF', '-.inf', '-.Inf', '-.INF',
]);
const YAML_STYLE_FLOAT = /^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/;
const BASE60_FLOAT = /^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$/;
const INT64_MIN = -(1n << 63n);
const INT64_MAX = (1n << 63n) - 1n;
const UINT64_MAX = (1n << 64n) - 1n;

/** Go's strconv.ParseInt/ParseUint with base 0, without range checks; undefined if it doesn't parse. */
function parseGoIntBase0(s: string, allowSign: boolean): bigint | undefined {
  const m = /^([+-]?)(.*)$/.exec(s)!;
  const sign = m[1]!;
  let body = m[2]!;
  if (sign && !allowSign) return undefined;
  let value: bigint;
  if (/^0[xX][0-9a-fA-F]+$/.test(body)) value = BigInt(body);
  else if (/^0[bB][01]+$/.test(body)) value = BigInt(body);
  else if (/^0[oO][0-7]+$/.test(body)) value = BigInt('0o' + body.slice(2));
  else if (/^0[0-7]+$/.test(body)) value = BigInt('0o' + body.slice(1));
  else if (/^(0|[1-9][0-9]*)$/.test(body)) value = BigInt(body);
  else return undefined;

  return sign === '-' ? -value : value;
}

/** yaml.v2 resolves a plain scalar as an integer: its value, else undefined. */
function resolveGoInt(s: string): bigint | undefined {
  const plain = s.replace(/_/g, '');
  const i = parseGoIntBase0(plain, true);
  if (i !== undefined && i >= INT64_MIN && i <= INT64_MAX) return i;
  const u = parseGoIntBase0(plain, false);
  if (u !== undefined && u >= 0n && u <= UINT64_MAX) return u;
  return undefined;
}

function daysIn(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

/** yaml.v2's timestamp formats (RFC3339-ish with short fields, space-separated, date-only). */
function isGoTimestamp(s: string): boolean {
  if (!/^[0-9]{4}-/.test(s)) return false;
  const m =
    /^([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})(?:(?:([Tt])|( ))([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})?)?$/.exec(
      s,
    );
  if (!m) return false;
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return false;
  if (m[6] === undefined) return true; // date only
  if (m[4] !== undefined && m[10] === undefined) return false; // T form requires a zone
  if (m[5] !== undefined && m[10] !== undefined) return false; // space form has no zone
  const [h, mi, sec] = [Number(m[6]), Number(m[7]), Number(m[8])];
  if (h > 23 || mi > 59 || sec > 59) return false;
  if (m[10] && m[10] !== 'Z') {
    const [zh, zm] = m[10].slice(1).split(':').map(Number) as [number, number];
    if (zh > 23 || zm > 59) return false;
  }
  return true;
}

/** Classifies a plain scalar the way yaml.v2's resolver does. */
export function resolvePlain(s: string): ResolvedKind {
  if (NULLS.has(s)) return 'null';
  const c = s[0]!;
  let hint: string;
  if (c === '+' || c === '-') hint = 'S';
  else if (c >= '0' && c <= '9') hint = 'D';
  else if ('yYnNtTfFoO~'.includes(c)) hint = 'M';
  else if (c === '.') hint = '.';
  else return 'str';
  if (BOOL_TRUE.has(s) || BOOL_FALSE.has(s)) return 'bool';
  if (SPECIAL_FLOATS.has(s)) return 'float';
  if (hint === 'M') return 'str';
  if (hint === '.') return /^\.[0-9]+([eE][-+]?[0-9]+)?$/.test(s) ? 'float' : 'str';
  if (isGoTimestamp(s)) return 'timestamp';
  if (resolveGoInt(s) !== undefined) return 'int';
  const plain = s.replace(/_/g, '');
  if (YAML_STYLE_FLOAT.test(plain) && Number.isFinite(Number(plain))) return 'float';
  return 'str';
}

function isBase60Float(s: string): boolean {
  if (s === '' || !/^[-+0-9]/.test(s) || !s.includes(':')) return false;
  return BASE60_FLOAT.test(s);
}

// ------------------------------------------------------------------------------------------
// Scalar analysis and style selection (libyaml emitter rules, as used by yaml.v2).

const isBreakCp = (c: string | undefined) =>
  c === '\n' || c === '\r' || c === '\u0085' || c === '\u2028' || c === '\u2029';
const isSpaceCp = (c: string | undefined) => c === ' ';
const isBlankCp = (c: string | undefined) => c === ' ' || c === '\t';

function isPrintable(c: string): boolean {
  const cp = c.codePointAt(0)!;
  return (
    cp === 0x0a ||
    (cp >= 0x20 && cp <= 0x7e) ||
    (cp >= 0xa0 && cp <= 0xd7ff) ||
    (cp >= 0xe000 && cp <= 0xfffd && cp !== 0xfeff)
  );
}

interface Analysis {
  blockPlainAllowed: boolean;
  singleQuotedAllowed: boolean;
  blockAllowed: boolean;
}

function analyzeScalar(value: string): Analysis {
  if (value === '') return { blockPlainAllowed: true, singleQuotedAllowed: true, blockAllowed: false };
  const chars = Array.from(value);
  let blockIndicators = false;
  let specialCharacters = false;
  let lineBreaks = false;
  let leadingSpace = false;
  let leadingBreak = false;
  let trailingSpace = false;
  let trailingBreak = false;
  let breakSpace = false;
  let spaceBreak = false;
  let previousSpace = false;
  let previousBreak = false;
  if (value.startsWith('---') || value.startsWith('...')) blockIndicators = true;
  let precededByWhitespace = true;
  for (let i = 0; i < chars.length; i++) {
    const ch = chars[i]!;
    const next = chars[i + 1];
    const followedByWhitespace = next === undefined || isBlankCp(next) || isBreakCp(next);
    if (i === 0) {
      if (LEADING_INDICATORS.includes(ch)) blockIndicators = true;
      else if ((ch === '?' || ch === ':' || ch === '-') && followedByWhitespace) blockIndicators = true;
    } else if (ch === ':' && followedByWhitespace) {
      blockIndicators = true;
    } else if (ch === '#' && precededByWhitespace) {
      blockIndicators = true;
    }
    if (!isPrintable(ch)) specialCharacters = true;
    if (isSpaceCp(ch)) {
      if (i === 0) leadingSpace = true;
      if (i === chars.length - 1) trailingSpace = true;
      if (previousBreak) breakSpace = true;
      previousSpace = true;
      previousBreak = false;
    } else if (isBreakCp(ch)) {
      lineBreaks = true;
      if (i === 0) leadingBreak = true;
      if (i === chars.length - 1) trailingBreak = true;
      if (previousSpace) spaceBreak = true;
      previousSpace = false;
      previousBreak = true;
    } else {
      previousSpace = false;
      previousBreak = false;
    }
    precededByWhitespace = isBlankCp(ch) || isBreakCp(ch);
  }
  const a: Analysis = { blockPlainAllowed: true, singleQuotedAllowed: true, blockAllowed: true };
  if (leadingSpace || leadingBreak || trailingSpace || trailingBreak) a.blockPlainAllowed = false;
  if (trailingSpace) a.blockAllowed = false;
  if (breakSpace) a.blockPlainAllowed = a.singleQuotedAllowed = false;
  if (spaceBreak || specialCharacters) a.blockPlainAllowed = a.singleQuotedAllowed = a.blockAllowed = false;
  if (lineBreaks) a.blockPlainAllowed = false;
  if (blockIndicators) a.blockPlainAllowed = false;
  return a;
}

type Style = 'plain' | 'single' | 'double' | 'literal';

/** One or more printable ASCII characters other than the space. */
const PRINTABLE_ASCII_WORD = /^[\x21-\x7e]+$/;
/** Printable ASCII characters other than the space, the double quote and the backslash. */
const QUOTABLE_ASCII_WORD = /^[\x21\x23-\x5b\x5d-\x7e]*$/;
const LEADING_INDICATORS = '#,[]{}&*!|>\'"%@`';

/** The style yaml.v2 uses for a Go string value in block context. */
export function goStringStyle(s: string): Style {
  const st = styleOf(s);
  return st === 'word' ? 'plain' : st;
}

/**
 * Styles of short strings that begin like a number, a boolean or a null (those take the resolver's
 * integer, float and timestamp checks). A listing repeats a few such values thousands of times
 * (label values such as "03"): each is analysed once. Bounded: past 4,096 entries none is added.
 */
const styleCache = new Map<string, Style | 'word'>();

/** goStringStyle, telling a plain printable ASCII word (written as it is) from other plain text. */
function styleOf(s: string): Style | 'word' {
  if (s.length === 0 || s.length > 64 || !'0123456789+-.yYnNtTfFoO~'.includes(s[0]!)) return analyseStyle(s);
  let st = styleCache.get(s);
  if (st === undefined) {
    st = analyseStyle(s);
    if (styleCache.size < 4096) styleCache.set(s, st);
  }
  return st;
}

function analyseStyle(s: string): Style | 'word' {
  if (PRINTABLE_ASCII_WORD.test(s)) {
    // No spaces, breaks or special characters (the usual name, label or store): of the analysis
    // only the indicator checks can apply (a lone `?`, `:` or `-`, or a trailing `:`, is followed
    // by the end, which counts as whitespace; a `#` is never preceded by whitespace).
    const c = s.charCodeAt(0);
    const indicators =
      LEADING_INDICATORS.includes(s[0]!) ||
      s.startsWith('---') ||
      s.startsWith('...') ||
      (s.length === 1 && (c === 0x3f || c === 0x3a || c === 0x2d)) ||
      (s.length > 1 && s.charCodeAt(s.length - 1) === 0x3a);
    if (resolvePlain(s) !== 'str' || isBase60Float(s)) return 'double';
    return indicators ? 'single' : 'word';
  }
  let style: Style;
  if (s.includes('\n')) style = 'literal';
  else if (resolvePlain(s) === 'str' && !isBase60Float(s)) style = 'plain';
  else style = 'double';
  const a = analyzeScalar(s);
  if (style === 'plain' && !a.blockPlainAllowed) style = 'single';
  if (style === 'single' && !a.singleQuotedAllowed) style = 'double';
  if (style === 'literal' && !a.blockAllowed) style = 'double';
  return style;
}

// ------------------------------------------------------------------------------------------
// Writer with libyaml's column/indentation bookkeeping (needed for folding).

// Runs of spaces by length, made once each (indentation is written on every line).
const SPACES: string[] = [];
function spaces(n: number): string {
  return SPACES[n] ?? (SPACES[n] = ' '.repeat(n));
}

class Writer {
  // The document as UTF-8, written into one buffer that grows by doubling (a listing's document
  // is megabytes of short pieces; gathering them as strings made as many strings to collect).
  private buf = Buffer.allocUnsafe(16 * 1024);
  private len = 0;
  column = 0;
  whitespace = true;
  indention = true;

  get out(): string {
    return this.buf.toString('utf8', 0, this.len);
  }

  /** The document's bytes (a view of the writer's buffer). */
  get bytes(): Buffer {
    return this.buf.subarray(0, this.len);
  }

  /** Appends `text` (which holds no line break) as UTF-8. */
  private append(text: string): void {
    const n = text.length;
    // A UTF-16 unit takes at most three UTF-8 bytes.
    if (this.len + 3 * n > this.buf.length) {
      const more = Buffer.allocUnsafe(Math.max(2 * this.buf.length, this.len + 3 * n));
      this.buf.copy(more, 0, 0, this.len);
      this.buf = more;
    }
    const buf = this.buf;
    let at = this.len;
    for (let i = 0; i < n; i++) {
      const c = text.charCodeAt(i);
      if (c > 0x7f) {
        // Not ASCII: the rest goes through the UTF-8 encoder.
        this.len = at + buf.write(text.slice(i), at, 'utf8');
        return;
      }
      buf[at++] = c;
    }
    this.len = at;
  }

  put(ch: string): void {
    this.append(ch);
    this.column++;
  }
  /** Appends text that holds no line break and is `columns` wide. */
  putText(text: string, columns: number): void {
    this.append(text);
    this.column += columns;
  }
  putBreak(): void {
    this.append('\n');
    this.column = 0;
  }
  writeBreakChar(ch: string): void {
    if (ch === '\n') this.putBreak();
    else {
      this.append(ch);
      this.column = 0;
    }
  }
  writeIndent(indent: number): void {
    if (!this.indention || this.column > indent || (this.column === indent && !this.whitespace)) {
      this.putBreak();
    }
    if (this.column < indent) this.putText(spaces(indent - this.column), indent - this.column);
    this.whitespace = true;
    this.indention = true;
  }
  /** An indicator such as `-`, `:`, `'`: optionally preceded by a space. */
  indicator(text: string, needWhitespace: boolean, isWhitespace = false, isIndention = false): void {
    if (needWhitespace && !this.whitespace) this.put(' ');
    for (const ch of text) this.put(ch);
    this.whitespace = isWhitespace;
    this.indention = this.indention && isIndention;
  }

  /** A plain scalar known to be one printable ASCII word (nothing to fold or quote). */
  word(value: string): void {
    if (!this.whitespace) this.put(' ');
    this.putText(value, value.length);
    this.whitespace = false;
    this.indention = false;
  }

  plain(value: string, indent: number): void {
    if (!this.whitespace) this.put(' ');
    if (PRINTABLE_ASCII_WORD.test(value)) {
      // Nothing to fold or break: the characters go out as they are.
      this.putText(value, value.length);
      this.whitespace = false;
      this.indention = false;
      return;
    }
    const chars = Array.from(value);
    let spaces = false;
    let breaks = false;
    for (let i = 0; i < chars.length; i++) {
      const ch = chars[i]!;
      if (isSpaceCp(ch)) {
        if (!spaces && this.column > BEST_WIDTH && !isSpaceCp(chars[i + 1])) this.writeIndent(indent);
        else this.put(ch);
        spaces = true;
      } else if (isBreakCp(ch)) {
        if (!breaks && ch === '\n') this.putBreak();
        this.writeBreakChar(ch);
        this.indention = true;
        breaks = true;
      } else {
        if (breaks) this.writeIndent(indent);
        this.put(ch);
        this.indention = false;
        spaces = breaks = false;
      }
    }
    this.whitespace = false;
    this.indention = false;
  }

  singleQuoted(value: string, indent: number): void {
    this.indicator("'", true);
    const chars = Array.from(value);
    let spaces = false;
    let breaks = false;
    for (let i = 0; i < chars.length; i++) {
      const ch = chars[i]!;
      if (isSpaceCp(ch)) {
        if (!spaces && this.column > BEST_WIDTH && i > 0 && i < chars.length - 1 && !isSpaceCp(chars[i + 1])) {
          this.writeIndent(indent);
        } else this.put(ch);
        spaces = true;
      } else if (isBreakCp(ch)) {
        if (!breaks && ch === '\n') this.putBreak();
        this.writeBreakChar(ch);
        this.indention = true;
        breaks = true;
      } else {
        if (breaks) this.writeIndent(indent);
        if (ch === "'") this.put("'");
        this.put(ch);
        this.indention = false;
        spaces = breaks = false;
      }
    }
    this.indicator("'", false);
    this.whitespace = false;
    this.indention = false;
  }

  doubleQuoted(value: string, indent: number): void {
    this.indicator('"', true);
    if (QUOTABLE_ASCII_WORD.test(value)) {
      // Printable ASCII without spaces, quotes or backslashes (a number-like label value such as
      // "03"): nothing to escape or fold, every character goes out as it is.
      this.putText(value, value.length);
      this.indicator('"', false);
      this.whitespace = false;
      this.indention = false;
      return;
    }
    const chars = Array.from(value);
    let spaces = false;
    for (let i = 0; i < chars.length; i++) {
      const ch = chars[i]!;
      const cp = ch.codePointAt(0)!;
      if (!isPrintable(ch) || cp === 0xfeff || isBreakCp(ch) || ch === '"' || ch === '\\') {
        this.put('\\');
        const short: Record<number, string> = {
          0x00: '0', 0x07: 'a', 0x08: 'b', 0x09: 't', 0x0a: 'n', 0x0b: 'v', 0x0c: 'f', 0x0d: 'r',
          0x1b: 'e', 0x22: '"', 0x5c: '\\', 0x85: 'N', 0xa0: '_', 0x2028: 'L', 0x2029: 'P',
        };
        const esc = short[cp];
        if (esc !== undefined) this.put(esc);
        else {
          const [letter, width] = cp <= 0xff ? ['x', 2] : cp <= 0xffff ? ['u', 4] : ['U', 8];
          this.put(letter as string);
          for (const d of cp.toString(16).toUpperCase().padStart(width as number, '0')) this.put(d);
        }
        spaces = false;
      } else if (isSpaceCp(ch)) {
        if (!spaces && this.column > BEST_WIDTH && i > 0 && i < chars.length - 1) {
          this.writeIndent(indent);
          if (isSpaceCp(chars[i + 1])) this.put('\\');
        } else this.put(ch);
        spaces = true;
      } else {
        this.put(ch);
        spaces = false;
      }
    }
    this.indicator('"', false);
    this.whitespace = false;
    this.indention = false;
  }

  literal(value: string, indent: number): void {
    this.indicator('|', true);
    const chars = Array.from(value);
    if (isSpaceCp(chars[0]) || isBreakCp(chars[0])) this.indicator(String(BEST_INDENT), false);
    let chomp = '';
    if (chars.length === 0 || !isBreakCp(chars[chars.length - 1])) chomp = '-';
    else if (chars.length === 1 || isBreakCp(chars[chars.length - 2])) chomp = '+';
    if (chomp) this.indicator(chomp, false);
    this.putBreak();
    this.indention = true;
    this.whitespace = true;
    let breaks = true;
    for (const ch of chars) {
      if (isBreakCp(ch)) {
        this.writeBreakChar(ch);
        this.indention = true;
        breaks = true;
      } else {
        if (breaks) this.writeIndent(indent);
        this.put(ch);
        this.indention = false;
        breaks = false;
      }
    }
  }

  /** Writes a scalar value; `indent` is the indentation of continuation lines. */
  scalar(v: string | number | bigint | boolean, indent: number): void {
    if (typeof v !== 'string') return this.plain(String(v), indent);
    switch (styleOf(v)) {
      case 'word':
        return this.word(v);
      case 'plain':
        return this.plain(v, indent);
      case 'single':
        return this.singleQuoted(v, indent);
      case 'double':
        return this.doubleQuoted(v, indent);
      case 'literal':
        return this.literal(v, indent);
    }
  }
}

function isMapping(v: YamlValue): v is YamlMapping {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** No own keys (the mappings here are plain objects). */
function isEmptyMapping(map: YamlMapping): boolean {
  for (const _ in map) return false;
  return true;
}

function emitMapping(w: Writer, map: YamlMapping, indent: number, firstOnLine: boolean): void {
  let first = true;
  // for-in visits a plain object's keys in the same order as Object.entries.
  for (const key in map) {
    if (!(first && firstOnLine)) w.writeIndent(indent);
    first = false;
    w.scalar(key, indent + BEST_INDENT);
    w.indicator(':', false);
    emitValue(w, map[key]!, indent, true);
  }
}

/** Emits `value` after a `key:` (inMapping) or after a `-`; `indent` is that key's/dash's column. */
function emitValue(w: Writer, value: YamlValue, indent: number, inMapping: boolean): void {
  if (Array.isArray(value)) {
    if (value.length === 0) return w.indicator('[]', true);
    if (!inMapping) throw new Error('goyaml: nested sequences are not supported');
    for (const item of value) {
      w.writeIndent(indent);
      w.indicator('-', true, false, true);
      emitValue(w, item, indent, false);
    }
    return;
  }
  if (isMapping(value)) {
    if (isEmptyMapping(value)) return w.indicator('{}', true);
    if (inMapping) return emitMapping(w, value, indent + BEST_INDENT, false);
    w.put(' ');
    w.whitespace = true;
    return emitMapping(w, value, indent + BEST_INDENT, true);
  }
  w.scalar(value, indent + BEST_INDENT);
}

/** Renders a mapping document exactly as yaml.v2 Marshal would (ends with a newline). */
export function emitGoYaml(root: YamlMapping): string {
  if (isEmptyMapping(root)) return '{}\n';
  const w = new Writer();
  emitMapping(w, root, 0, true);
  w.writeIndent(0); // document end: terminates the last line unless a block scalar already did
  return w.out;
}

/**
 * Writes a block-mapping document piece by piece, exactly as {@link emitGoYaml} writes the same
 * value, without building the value first (for large documents such as listings, where the
 * intermediate objects cost more than the writing). The caller drives it in document order:
 *
 *   * `key(k, indent, firstOnLine)` starts a mapping entry at column `indent`; `firstOnLine` for
 *     the first key of the document and of a mapping that is a sequence item (after `- `);
 *     keys must be plain words (no quoting), as every field name of our formats is;
 *   * after a key, one of: `scalar(v, indent)` (same `indent` as the key), `flow('[]' | '{}')`
 *     for an empty sequence or mapping, nested keys at `indent + 2` for a non-empty mapping, or
 *     `dash(indent)` per item of a non-empty sequence (at the key's own column);
 *   * after `dash(indent)`: `scalar(v, indent)`, `flow(...)` for an empty mapping, or
 *     `itemMapping()` followed by keys at `indent + 2` with the first one `firstOnLine`.
 *
 * `finish()` ends the document; a document without any key is `{}`.
 */
export class GoYamlStream {
  private readonly w = new Writer();
  private any = false;

  key(k: string, indent: number, firstOnLine: boolean): void {
    const w = this.w;
    this.any = true;
    if (!firstOnLine) w.writeIndent(indent);
    w.word(k);
    w.indicator(':', false);
  }
  /** A scalar value after a key or dash at column `indent`. */
  scalar(v: string | number | bigint | boolean, indent: number): void {
    if (typeof v === 'string') this.w.scalar(v, indent + BEST_INDENT);
    else this.w.word(String(v));
  }
  flow(text: '[]' | '{}'): void {
    this.w.indicator(text, true);
  }
  dash(indent: number): void {
    this.w.writeIndent(indent);
    this.w.indicator('-', true, false, true);
  }
  itemMapping(): void {
    this.w.put(' ');
    this.w.whitespace = true;
  }

  /** A label set's labels as a block sequence of `name`, `value` (and `prefix: true`) mappings. */
  labelItems(labels: readonly { name: string; value: string; prefix?: boolean }[], indent: number): void {
    for (const l of labels) {
      this.dash(indent);
      this.itemMapping();
      this.key('name', indent + 2, true);
      this.scalar(l.name, indent + 2);
      this.key('value', indent + 2, false);
      this.scalar(l.value, indent + 2);
      if (l.prefix) {
        this.key('prefix', indent + 2, false);
        this.scalar(true, indent + 2);
      }
    }
  }
  finish(): string {
    if (!this.any) return '{}\n';
    this.w.writeIndent(0);
    return this.w.out;
  }
  /** `finish()` as UTF-8 bytes, without making the document a string first. */
  finishBytes(): Buffer {
    if (!this.any) return Buffer.from('{}\n');
    this.w.writeIndent(0);
    return this.w.bytes;
  }
}

// ------------------------------------------------------------------------------------------
// Strict decoding.

/** Raised for malformed or ill-typed YAML input; the message starts with `line N: `. */
export class YamlDecodeError extends ValidationError {
  constructor(
    readonly line: number,
    readonly detail: string,
  ) {
    super(line > 0 ? `line ${line}: ${detail}` : detail);
  }
}

/** A mapping entry: its key text, key node (for positions) and value node (null if empty). */
export interface Entry {
  key: string;
  keyNode: YNode;
  value: YNode | null;
}

function quote(s: string): string {
  return JSON.stringify(s);
}

/**
 * A parsed document plus typed accessors that enforce yaml.v2 UnmarshalStrict semantics:
 * mapping keys must be known and unique, scalars must resolve to the requested type.
 */
export class StrictDoc {
  private constructor(
    /** The `yaml` package's document (undefined for a tree from the quick reader, which has no aliases). */
    private readonly doc: Document.Parsed | undefined,
    private readonly lines: LineCounter,
    /** Root node, or null for an empty (or `~`) document. */
    readonly root: YNode | null,
  ) {}

  static parse(text: string): StrictDoc {
    const lines = new LineCounter();
    const doc = parseDocument(text, {
      lineCounter: lines,
      schema: 'failsafe',
      uniqueKeys: false,
      prettyErrors: false,
      strict: true,
    });
    const err = doc.errors[0];
    if (err) {
      const line = err.linePos?.[0]?.line ?? lines.linePos(err.pos[0]).line;
      // The yaml package's own wording for this one addresses programmers (use parseAllDocuments).
      const first =
        err.code === 'MULTIPLE_DOCS'
          ? 'more than one document (a "---" separator): give a single document'
          : err.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '');
      throw new YamlDecodeError(line, `invalid YAML: ${first}`);
    }
    const sd = new StrictDoc(doc, lines, null);
    let root = sd.deref(doc.contents as YNode | null);
    if (root && isScalar(root) && sd.scalarKind(root) === 'null') root = null;
    return new StrictDoc(doc, lines, root);
  }

  /**
   * The quick reader's document (see fast-parse.ts), or undefined when the text is outside the
   * plain block subset it reads. Its tree is what `parse` builds for the same text, but its
   * positions and failures are not checked against the full parser: decode with {@link decodeStrict},
   * which reports problems from `parse`.
   */
  static parseFast(text: string): StrictDoc | undefined {
    const fast = fastParse(text);
    if (fast === undefined) return undefined;
    let root = fast.root;
    const sd = new StrictDoc(undefined, fast.lineCounter, null);
    if (root && isScalar(root) && sd.scalarKind(root) === 'null') root = null;
    return new StrictDoc(undefined, fast.lineCounter, root);
  }

  /** 1-based line of a node (0 if unknown). */
  line(node: YNode | null | undefined): number {
    const off = node?.range?.[0];
    return off === undefined ? 0 : this.lines.linePos(off).line;
  }

  fail(node: YNode | null | undefined, detail: string): never {
    throw new YamlDecodeError(this.line(node), detail);
  }

  deref(node: YNode | null | undefined): YNode | null {
    let n = node ?? null;
    for (let i = 0; n && isAlias(n) && i < 100; i++) {
      n = this.doc ? (((n as Alias).resolve(this.doc) as YNode | undefined) ?? null) : null;
    }
    return n;
  }

  private scalarKind(node: Scalar): ResolvedKind {
    if (node.type && node.type !== 'PLAIN') return 'str';
    const tag = node.tag;
    if (tag === '!!str' || tag === 'tag:yaml.org,2002:str') return 'str';
    return resolvePlain(this.scalarText(node));
  }

  private scalarText(node: Scalar): string {
    const v = node.value;
    return v === null || v === undefined ? '' : String(v);
  }

  /** True for a missing value, an empty value or a null scalar (`~`, `null`). */
  isNull(node: YNode | null): boolean {
    const n = this.deref(node);
    return n === null || (isScalar(n) && this.scalarKind(n) === 'null');
  }

  /** The entries of a mapping, rejecting duplicate and unknown keys. */
  mapping(node: YNode | null, what: string, allowed: readonly string[], path = ''): Entry[] {
    const n = this.deref(node);
    if (n === null || this.isNull(n)) return [];
    if (!isMap(n)) this.fail(n, `${path ? path + ': ' : ''}expected a mapping for ${what}, got ${this.describe(n)}`);
    const out: Entry[] = [];
    for (const pair of (n as YAMLMap).items as Pair<YNode | null, YNode | null>[]) {
      const k = this.deref(pair.key);
      if (!k || !isScalar(k)) this.fail(k ?? n, `expected a scalar key in ${what}`);
      const key = this.scalarText(k);
      // Keys seen so far are those in `out` (a mapping here has a handful of keys at most).
      for (let i = 0; i < out.length; i++) if (out[i]!.key === key) this.fail(k, `duplicate key ${quote(key)} in ${what}`);
      if (!allowed.includes(key)) this.fail(k, `unknown field ${quote(key)} in ${what}`);
      out.push({ key, keyNode: k, value: pair.value ?? null });
    }
    return out;
  }

  /** Items of a sequence; null means undefined (absent). */
  sequence(node: YNode | null, path: string): YNode[] | undefined {
    const n = this.deref(node);
    if (n === null || this.isNull(n)) return undefined;
    if (!isSeq(n)) this.fail(n, `${path}: expected a sequence, got ${this.describe(n)}`);
    return ((n as YAMLSeq).items as (YNode | null)[]).map((i) => this.deref(i) ?? (null as unknown as YNode));
  }

  private describe(n: YNode): string {
    if (isMap(n)) return 'a mapping';
    if (isSeq(n)) return 'a sequence';
    if (isScalar(n)) return quote(this.scalarText(n));
    return 'an unsupported node';
  }

  private scalarOf(node: YNode | null, path: string, expected: string): Scalar | null {
    const n = this.deref(node);
    if (n === null) return null;
    if (!isScalar(n)) this.fail(n, `${path}: expected ${expected}, got ${this.describe(n)}`);
    return n as Scalar;
  }

  /** A string field: any non-null scalar's text (as yaml.v2 does), null means "". */
  string(node: YNode | null, path: string): string {
    const s = this.scalarOf(node, path, 'a string');
    if (s === null || this.scalarKind(s) === 'null') return '';
    return this.scalarText(s);
  }

  /** A boolean field (YAML 1.1 spellings as yaml.v2), null means undefined. */
  bool(node: YNode | null, path: string): boolean | undefined {
    const s = this.scalarOf(node, path, 'a boolean');
    if (s === null) return undefined;
    const kind = this.scalarKind(s);
    if (kind === 'null') return undefined;
    const text = this.scalarText(s);
    if (kind !== 'bool') this.fail(s, `${path}: expected a boolean, got ${quote(text)}`);
    return BOOL_TRUE.has(text);
  }

  /** An integer field within [min, max]; null means 0. */
  int(node: YNode | null, path: string, min: bigint, max: bigint): bigint {
    const s = this.scalarOf(node, path, 'an integer');
    if (s === null) return 0n;
    const kind = this.scalarKind(s);
    if (kind === 'null') return 0n;
    const text = this.scalarText(s);
    const v = kind === 'int' ? resolveGoInt(text) : undefined;
    if (v === undefined) this.fail(s, `${path}: expected an integer, got ${quote(text)}`);
    if (v < min || v > max) this.fail(s, `${path}: integer ${text} out of range [${min}, ${max}]`);
    return v;
  }

  /** A duration: a Go duration string, or an integer number of nanoseconds; null means 0. */
  duration(node: YNode | null, path: string): bigint {
    const s = this.scalarOf(node, path, 'a duration');
    if (s === null) return 0n;
    const kind = this.scalarKind(s);
    if (kind === 'null') return 0n;
    const text = this.scalarText(s);
    if (kind === 'int') {
      const v = resolveGoInt(text)!;
      if (v < INT64_MIN || v > INT64_MAX) this.fail(s, `${path}: duration ${text} out of range`);
      return v;
    }
    if (kind !== 'str') this.fail(s, `${path}: expected a duration, got ${quote(text)}`);
    try {
      return parseGoDuration(text);
    } catch {
      return this.fail(s, `${path}: invalid duration ${quote(text)}`);
    }
  }

  /**
   * An enum given by name (and, with allowInt, by integer value); null means 0.
   * `names` maps each accepted name to its value.
   */
  enumValue(
    node: YNode | null,
    path: string,
    typeName: string,
    names: Readonly<Record<string, number>>,
    allowInt: boolean,
  ): number {
    const s = this.scalarOf(node, path, `a ${typeName} name`);
    if (s === null) return 0;
    const kind = this.scalarKind(s);
    if (kind === 'null') return 0;
    const text = this.scalarText(s);
    if (allowInt && kind === 'int') {
      const v = resolveGoInt(text)!;
      if (v < -(1n << 31n) || v >= 1n << 32n) this.fail(s, `${path}: integer ${text} out of range`);
      return Number(v);
    }
    const v = names[text];
    if (v === undefined) {
      this.fail(s, `${path}: ${quote(text)} is not a valid ${typeName} (options are ${Object.keys(names).join(', ')})`);
    }
    return v;
  }
}

/**
 * Decodes `text` with `decode`, from the quick reader's tree when the text is in its subset, else
 * (or when decoding that tree fails in any way) from the full parser's tree, so that every error
 * and its line number come from the full parser. `decode` must have no side effects: it may run
 * twice.
 */
export function decodeStrict<T>(text: string, decode: (doc: StrictDoc) => T): T {
  const fast = StrictDoc.parseFast(text);
  if (fast !== undefined) {
    try {
      return decode(fast);
    } catch {
      // Decoded again below, where the failure gets its proper message and line.
    }
  }
  return decode(StrictDoc.parse(text));
}
