// FSMHints as they are stored in etcd: JSON as Go's encoding/json writes the generated struct
// (snake_case keys, int64 values as plain JSON numbers, empty lists as null), or, for values
// that do not start with `{`, the binary protobuf encoding. Numbers are parsed exactly (sequence
// numbers and offsets may exceed 2^53).
import { FSMHints, type FnodeSegments, type Property, type Segment } from '../protocol/gen/recoverylog/recorded_op.js';
import { ValidationError } from '../protocol/errors.js';
import { jsonString } from '../protocol/protojson.js';
import { validateJournalName } from '../protocol/validate/names.js';
import { liveSegments, validateSegment } from './segments.js';

// ---- a small JSON reader keeping numbers as their text -----------------------------------------

/** A JSON number kept as its text (exact for 64-bit integers). */
export class JsonNum {
  constructor(readonly text: string) {}
}
const Num = JsonNum;
type Num = JsonNum;
/** A JSON value whose numbers are JsonNum. */
export type ExactJsonValue = null | boolean | string | JsonNum | ExactJsonValue[] | { [k: string]: ExactJsonValue };
type JsonValue = ExactJsonValue;

function parseJson(text: string, what = 'hints are'): JsonValue {
  let i = 0;
  const fail = (why: string): never => {
    throw new ValidationError(`${what} not valid JSON: ${why} at character ${i}`);
  };
  const ws = () => {
    while (i < text.length && (text[i] === ' ' || text[i] === '\t' || text[i] === '\n' || text[i] === '\r')) i++;
  };
  const value = (depth: number): JsonValue => {
    if (depth > 64) fail('nesting too deep');
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      const o: { [k: string]: JsonValue } = {};
      ws();
      if (text[i] === '}') {
        i++;
        return o;
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail('expected a key');
        const k = str();
        ws();
        if (text[i] !== ':') fail('expected ":"');
        i++;
        o[k] = value(depth + 1);
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === '}') {
          i++;
          return o;
        }
        fail('expected "," or "}"');
      }
    }
    if (c === '[') {
      i++;
      const a: JsonValue[] = [];
      ws();
      if (text[i] === ']') {
        i++;
        return a;
      }
      for (;;) {
        a.push(value(depth + 1));
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === ']') {
          i++;
          return a;
        }
        fail('expected "," or "]"');
      }
    }
    if (c === '"') return str();
    if (text.startsWith('true', i)) {
      i += 4;
      return true;
    }
    if (text.startsWith('false', i)) {
      i += 5;
      return false;
    }
    if (text.startsWith('null', i)) {
      i += 4;
      return null;
    }
    const m = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/.exec(text.slice(i, i + 400));
    if (!m) fail('unexpected character');
    i += m![0].length;
    return new Num(m![0]);
  };
  const str = (): string => {
    const start = i;
    i++;
    while (i < text.length && text[i] !== '"') {
      if (text[i] === '\\') i++;
      i++;
    }
    if (i >= text.length) fail('unterminated string');
    i++;
    try {
      return JSON.parse(text.slice(start, i)) as string;
    } catch {
      return fail('bad string');
    }
  };
  const v = value(0);
  ws();
  if (i !== text.length) fail('trailing characters');
  return v;
}

type Obj = { [k: string]: JsonValue };

/** Go's decoder matches a key exactly, else case-insensitively. */
function field(o: Obj, key: string): JsonValue | undefined {
  if (Object.prototype.hasOwnProperty.call(o, key)) return o[key];
  const lower = key.toLowerCase();
  let found: JsonValue | undefined;
  for (const k of Object.keys(o)) if (k.toLowerCase() === lower) found = o[k];
  return found;
}

function asObject(v: JsonValue | undefined, what: string): Obj | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || Array.isArray(v) || v instanceof Num) throw new ValidationError(`hints: ${what} is not an object`);
  return v;
}

function asArray(v: JsonValue | undefined, what: string): JsonValue[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new ValidationError(`hints: ${what} is not a list`);
  return v;
}

function asString(v: JsonValue | undefined, what: string): string {
  if (v === undefined || v === null) return '';
  if (typeof v !== 'string') throw new ValidationError(`hints: ${what} is not a string`);
  return v;
}

function asInt(v: JsonValue | undefined, what: string, min: bigint, max: bigint): bigint {
  if (v === undefined || v === null) return 0n;
  if (!(v instanceof Num) || !/^-?\d+$/.test(v.text)) throw new ValidationError(`hints: ${what} is not an integer`);
  const n = BigInt(v.text);
  if (n < min || n > max) throw new ValidationError(`hints: ${what} ${v.text} is out of range`);
  return n;
}

const INT64_MIN = -(1n << 63n);
const INT64_MAX = (1n << 63n) - 1n;
const UINT32_MAX = 0xffffffffn;

function segmentFromJson(v: JsonValue, what: string): Segment {
  const o = asObject(v, what) ?? {};
  return {
    author: Number(asInt(field(o, 'author'), `${what}.author`, 0n, UINT32_MAX)),
    first_seq_no: asInt(field(o, 'first_seq_no'), `${what}.first_seq_no`, INT64_MIN, INT64_MAX),
    first_offset: asInt(field(o, 'first_offset'), `${what}.first_offset`, INT64_MIN, INT64_MAX),
    first_checksum: Number(asInt(field(o, 'first_checksum'), `${what}.first_checksum`, 0n, UINT32_MAX)),
    last_seq_no: asInt(field(o, 'last_seq_no'), `${what}.last_seq_no`, INT64_MIN, INT64_MAX),
    last_offset: asInt(field(o, 'last_offset'), `${what}.last_offset`, INT64_MIN, INT64_MAX),
    log: asString(field(o, 'log'), `${what}.log`),
  };
}

function hintsFromJson(text: string): FSMHints {
  const root = asObject(parseJson(text), 'the value');
  if (!root) throw new ValidationError('hints: the value is null');
  const live_nodes: FnodeSegments[] = asArray(field(root, 'live_nodes'), 'live_nodes').map((n, i) => {
    const o = asObject(n, `live_nodes[${i}]`) ?? {};
    return {
      fnode: asInt(field(o, 'fnode'), `live_nodes[${i}].fnode`, INT64_MIN, INT64_MAX),
      segments: asArray(field(o, 'segments'), `live_nodes[${i}].segments`).map((s, j) => segmentFromJson(s, `live_nodes[${i}].segments[${j}]`)),
    };
  });
  const properties: Property[] = asArray(field(root, 'properties'), 'properties').map((p, i) => {
    const o = asObject(p, `properties[${i}]`) ?? {};
    return { path: asString(field(o, 'path'), `properties[${i}].path`), content: asString(field(o, 'content'), `properties[${i}].content`) };
  });
  return { log: asString(field(root, 'log'), 'log'), live_nodes, properties };
}

/** Parses one JSON document keeping numbers exact; `what` names it in errors ("state.json is"). */
export function parseExactJson(text: string, what: string): ExactJsonValue {
  return parseJson(text, what);
}

// ---- decoding, validation, encoding -------------------------------------------------------------

export interface DecodeHintsOptions {
  /** Validate the hints (default true); see {@link validateHints}. */
  validate?: boolean;
  /** The recovery log the hints must name (the shard's own), checked when given. */
  log?: string;
}

/**
 * Decodes an etcd hints value: JSON when it starts with `{` (leading whitespace allowed), else
 * binary protobuf. Throws ValidationError on an undecodable or (by default) invalid value.
 */
export function decodeHints(value: Uint8Array | string, opts: DecodeHintsOptions = {}): FSMHints {
  const bytes = typeof value === 'string' ? Buffer.from(value, 'utf8') : value;
  let first = 0;
  while (first < bytes.length && (bytes[first] === 0x20 || bytes[first] === 0x09 || bytes[first] === 0x0a || bytes[first] === 0x0d)) first++;
  let hints: FSMHints;
  if (bytes[first] === 0x7b /* { */) {
    hints = hintsFromJson(typeof value === 'string' ? value : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'));
  } else {
    try {
      hints = FSMHints.decode(bytes);
    } catch (err) {
      throw new ValidationError(`hints are neither JSON nor a protobuf FSMHints: ${(err as Error).message}`);
    }
  }
  if (opts.validate ?? true) validateHints(hints, opts.log);
  return hints;
}

/**
 * Checks hints as a consumer does before using them: the log is set (and is `log` when given);
 * every live node has segments, the first starting at the node's fnode; fnodes strictly increase;
 * every segment is valid and does not repeat hints.log explicitly; all segments fold into one
 * consistent set whose last segment is in hints.log. Throws ValidationError.
 */
export function validateHints(hints: FSMHints, log?: string): void {
  if (!hints.log) throw new ValidationError('hints: log is not set');
  try {
    validateJournalName(hints.log);
  } catch (err) {
    throw new ValidationError(`hints: log: ${(err as Error).message}`);
  }
  if (log !== undefined && hints.log !== log) throw new ValidationError(`hints name log ${hints.log}, expected ${log}`);
  let prev: bigint | undefined;
  for (const node of hints.live_nodes) {
    if (node.segments.length === 0 || node.segments[0]!.first_seq_no !== node.fnode) {
      throw new ValidationError(`hints: live node ${node.fnode} must start with a segment at its own sequence number`);
    }
    if (prev !== undefined && node.fnode <= prev) throw new ValidationError(`hints: live nodes are not in increasing fnode order (${prev}, then ${node.fnode})`);
    prev = node.fnode;
    for (const seg of node.segments) {
      if (seg.log === hints.log) throw new ValidationError(`hints: a segment of fnode ${node.fnode} repeats the hints' log ${hints.log} (it must be left empty)`);
      try {
        validateSegment({ ...seg, log: seg.log || hints.log });
      } catch (err) {
        throw new ValidationError(`hints: fnode ${node.fnode}: ${(err as Error).message}`);
      }
    }
  }
  liveSegments(hints);
}

function segmentToJson(s: Segment): string {
  const f: string[] = [];
  if (s.author !== 0) f.push(`"author":${s.author}`);
  if (s.first_seq_no !== 0n) f.push(`"first_seq_no":${s.first_seq_no}`);
  if (s.first_offset !== 0n) f.push(`"first_offset":${s.first_offset}`);
  if (s.first_checksum !== 0) f.push(`"first_checksum":${s.first_checksum}`);
  if (s.last_seq_no !== 0n) f.push(`"last_seq_no":${s.last_seq_no}`);
  if (s.last_offset !== 0n) f.push(`"last_offset":${s.last_offset}`);
  if (s.log !== '') f.push(`"log":${jsonString(s.log)}`);
  return `{${f.join(',')}}`;
}

const list = <T>(xs: readonly T[], f: (x: T) => string): string => (xs.length === 0 ? 'null' : `[${xs.map(f).join(',')}]`);

/**
 * The JSON a Go consumer writes for `hints`: keys in struct order, zero values omitted except
 * live_nodes, properties and segments (null when empty). Segments are written as given: clear
 * a segment's log that equals hints.log first (hintsFromState does).
 */
export function encodeHints(hints: FSMHints): string {
  const f: string[] = [];
  if (hints.log !== '') f.push(`"log":${jsonString(hints.log)}`);
  f.push(
    `"live_nodes":${list(hints.live_nodes, (n) => {
      const nf: string[] = [];
      if (n.fnode !== 0n) nf.push(`"fnode":${n.fnode}`);
      nf.push(`"segments":${list(n.segments, segmentToJson)}`);
      return `{${nf.join(',')}}`;
    })}`,
  );
  f.push(
    `"properties":${list(hints.properties, (p) => {
      const pf: string[] = [];
      if (p.path !== '') pf.push(`"path":${jsonString(p.path)}`);
      if (p.content !== '') pf.push(`"content":${jsonString(p.content)}`);
      return `{${pf.join(',')}}`;
    })}`,
  );
  return `{${f.join(',')}}`;
}

/** Empty hints naming `log`: playback from its first byte. */
export function emptyHints(log: string): FSMHints {
  return { log, live_nodes: [], properties: [] };
}
