// gazette-sum: the example application, the counterpart of our Go test consumer
// (scripts/peers/sum-consumer/main.go). Each shard reads NDJSON records {"key":…,"value":…}
// from its sources and adds `value` to a running total of `key`. The totals live in a JSON file
// store whose `state.json` has the shape Go's consumer.JSONFileStore writes (three JSON lines:
// read-through offsets, the totals, the checkpoint), recorded in the shard's recovery log, so
// `gazctl shards recover` of a shard gives the same file whichever implementation served it.
//
// As Go's summer does, every dequeued message is added, acknowledgements included: Go's record
// has no special case for ACK_TXN messages, whose records carry an empty key and a zero value,
// so `state.json` agrees with Go's exactly (an empty key with total 0 appears once ACKs were read).
import type { UUID } from '../../lib/message/uuid.js';
import { goJsonKeyMatches, parseGoUUID, parseGoUUIDBytes } from '../../lib/message/json.js';
import { JsonNum, parseExactJson } from '../../lib/recoverylog/hints.js';
import type { Recorder } from '../../lib/recoverylog/recorder.js';
import type { Application, MessageDecoder, Shard } from './app.js';
import { JsonFileStore, encodeGoJson, goJsonString, type JsonStateCodec } from './store-json.js';

/** One input record. */
export interface SumRecord {
  key: string;
  value: bigint;
  uuid: UUID;
}

const ZERO_UUID = new Uint8Array(16);

/** The totals of a shard: Go's map[string]int64. */
export type Sums = Map<string, bigint>;

/** The totals as Go's encoding/json writes a map[string]int64, read back with int64s exact. */
export const SUMS_CODEC: JsonStateCodec<Sums> = {
  encode: (sums) => encodeGoJson(sums),
  decode(json) {
    const v = parseExactJson(json, 'the totals of state.json are');
    const out: Sums = new Map();
    if (v === null) return out;
    if (typeof v !== 'object' || Array.isArray(v) || v instanceof JsonNum) throw new Error('the totals of state.json are not a JSON object');
    for (const [k, n] of Object.entries(v)) {
      if (!(n instanceof JsonNum) || !/^-?\d+$/.test(n.text)) throw new Error(`the total of ${JSON.stringify(k)} in state.json is not an integer`);
      out.set(k, BigInt(n.text));
    }
    return out;
  },
};

/** The store of a shard: its totals in a recorded JSON file (state.json), as Go's JSONFileStore. */
export type SumStore = JsonFileStore<Sums>;

/**
 * Decodes one NDJSON line as Go's sum-consumer decodes its record: fields `key` (string), `value`
 * (int64) and `UUID` (google/uuid text) matched as encoding/json matches field names; other keys
 * ignored; null leaves a field zero.
 */
export function decodeSumRecord(line: Buffer): SumRecord {
  return scanSumRecord(line, 0, line.length) ?? decodeSumRecordGeneral(line);
}

/** decodeSumRecord of the line `buf[begin, end)`, without a view of it unless it takes the general path. */
export function decodeSumRecordRange(buf: Buffer, begin: number, end: number): SumRecord {
  return scanSumRecord(buf, begin, end) ?? decodeSumRecordGeneral(buf.subarray(begin, end));
}

/** decodeSumRecord by parsing the whole line as a document (exported for tests of the fast path). */
export function decodeSumRecordGeneral(line: Buffer): SumRecord {
  const text = line.toString('utf8');
  // Fast path: when no number can be a float, an exponent or beyond 15 digits (a digit next to
  // `.`, `e` or `E`, or 16 digits in a row, anywhere, keys included), JSON.parse reads every
  // number exactly. Anything else takes the exact parser, which keeps numbers' text.
  if (!SLOW_NUMBERS.test(text)) {
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch {
      v = undefined; // the exact parser words the error
    }
    if (v !== undefined) return fromObject(v, text, (n) => (typeof n === 'number' ? String(n) : undefined));
  }
  return fromObject(parseExactJson(text, 'record is'), text, (n) => (n instanceof JsonNum ? n.text : undefined));
}

/** Which field of a record a document key names: Go's case-insensitive match (ASCII bytes). */
const F_OTHER = 0;
const F_KEY = 1;
const F_VALUE = 2;
const F_UUID = 3;

function fieldOf(b: Buffer, s: number, e: number): number {
  const n = e - s;
  // Go also folds the Kelvin sign and the long s to k and s; those are non-ASCII bytes, which
  // send the line to the general path before this is reached.
  if (n === 3) {
    if ((b[s]! | 0x20) === 0x6b && (b[s + 1]! | 0x20) === 0x65 && (b[s + 2]! | 0x20) === 0x79) return F_KEY;
  } else if (n === 5) {
    if ((b[s]! | 0x20) === 0x76 && (b[s + 1]! | 0x20) === 0x61 && (b[s + 2]! | 0x20) === 0x6c && (b[s + 3]! | 0x20) === 0x75 && (b[s + 4]! | 0x20) === 0x65) return F_VALUE;
  } else if (n === 4) {
    if ((b[s]! | 0x20) === 0x75 && (b[s + 1]! | 0x20) === 0x75 && (b[s + 2]! | 0x20) === 0x69 && (b[s + 3]! | 0x20) === 0x64) return F_UUID;
  }
  return F_OTHER;
}

/** Index of the first byte at or after `i` that is not JSON whitespace. */
function skipWs(b: Buffer, i: number, end: number): number {
  while (i < end) {
    const c = b[i]!;
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
    i++;
  }
  return i;
}

/**
 * End (index of the closing quote) of a JSON string opening at `b[i]`, or -1 when it has an
 * escape, a control character or no end: those take the general path. `ascii` is cleared when
 * a byte above 0x7f is seen.
 */
let ascii = true;
function stringEnd(b: Buffer, i: number, end: number): number {
  for (i++; i < end; i++) {
    const c = b[i]!;
    if (c === 0x22) return i;
    if (c === 0x5c || c < 0x20) return -1;
    if (c > 0x7f) ascii = false;
  }
  return -1;
}

/**
 * The record of a line in the form every producer of the sum app writes, read straight from its
 * bytes: one flat object whose keys are plain ASCII strings and whose values are plain strings,
 * integers of up to 15 digits (exact as doubles) or null, each of `key`/`value`/`UUID` at most
 * once. Anything else (escapes, floats, nested values, repeated fields, invalid JSON) returns
 * undefined and takes the general path, so results and error messages are the general path's:
 * this only skips building the line's text and object, which cost most of a record's CPU.
 */
function scanSumRecord(b: Buffer, begin: number, end: number): SumRecord | undefined {
  // Every read at an index is bounded by `end`: bytes past it belong to the next record.
  let i = skipWs(b, begin, end);
  if (i >= end || b[i] !== 0x7b) return undefined;
  i = skipWs(b, i + 1, end);
  let key: string | undefined;
  let value: bigint | undefined;
  let uuid: UUID | undefined;
  let seen = 0;
  for (;;) {
    if (i >= end || b[i] !== 0x22) return undefined;
    ascii = true;
    const ke = stringEnd(b, i, end);
    if (ke < 0 || !ascii) return undefined;
    const field = fieldOf(b, i + 1, ke);
    if (field !== F_OTHER) {
      if (seen & (1 << field)) return undefined;
      seen |= 1 << field;
    }
    i = skipWs(b, ke + 1, end);
    if (i >= end || b[i] !== 0x3a) return undefined;
    i = skipWs(b, i + 1, end);
    const c = i < end ? b[i] : undefined;
    if (c === 0x22) {
      ascii = true;
      const se = stringEnd(b, i, end);
      if (se < 0) return undefined;
      if (field === F_KEY) key = b.toString(ascii ? 'latin1' : 'utf8', i + 1, se);
      else if (field === F_UUID) {
        if (!ascii) return undefined;
        try {
          uuid = parseGoUUIDBytes(b, i + 1, se);
        } catch {
          return undefined;
        }
      } else if (field === F_VALUE) return undefined;
      i = se + 1;
    } else if (c === 0x2d || (c !== undefined && c >= 0x30 && c <= 0x39)) {
      const s = i;
      if (c === 0x2d) i++;
      if (i < end && b[i] === 0x30) i++;
      else {
        const d0 = i;
        while (i < end && b[i]! >= 0x30 && b[i]! <= 0x39) i++;
        if (i === d0 || i - d0 > 15) return undefined;
      }
      const t = i < end ? b[i] : undefined;
      if (t === 0x2e || t === 0x65 || t === 0x45 || (t !== undefined && t >= 0x30 && t <= 0x39)) return undefined;
      if (field === F_VALUE) {
        let n = 0;
        for (let j = c === 0x2d ? s + 1 : s; j < i; j++) n = n * 10 + (b[j]! - 0x30);
        value = BigInt(c === 0x2d ? -n : n);
      } else if (field !== F_OTHER) return undefined;
    } else if (c === 0x6e && i + 3 < end && b[i + 1] === 0x75 && b[i + 2] === 0x6c && b[i + 3] === 0x6c) {
      i += 4; // null leaves the field as it is
    } else return undefined;
    i = skipWs(b, i, end);
    if (i < end && b[i] === 0x2c) {
      i = skipWs(b, i + 1, end);
      continue;
    }
    if (i >= end || b[i] !== 0x7d) return undefined;
    if (skipWs(b, i + 1, end) !== end) return undefined;
    return { key: key ?? '', value: value ?? 0n, uuid: uuid ?? ZERO_UUID };
  }
}

const SLOW_NUMBERS = /\d[.eE]|[.eE][+-]?\d|\d{16}/;

/** Go's decoding of a record from a parsed document; `num` gives a number's text (undefined: not a number). */
function fromObject(v: unknown, text: string, num: (n: unknown) => string | undefined): SumRecord {
  if (v === null || typeof v !== 'object' || Array.isArray(v) || v instanceof JsonNum) throw new Error(`record is not a JSON object: ${text.slice(0, 80).trim()}`);
  let key = '';
  let value = 0n;
  let uuid: UUID = ZERO_UUID;
  for (const k in v) {
    const f = (v as Record<string, unknown>)[k];
    if (f === null) continue;
    if (goJsonKeyMatches(k, 'key')) {
      if (typeof f !== 'string') throw new Error('record: key is not a string');
      key = f;
    } else if (goJsonKeyMatches(k, 'value')) {
      const t = num(f);
      if (t === undefined || !/^-?\d+$/.test(t)) throw new Error(`record: value ${t ?? JSON.stringify(f)} is not an integer`);
      value = BigInt(t);
    } else if (goJsonKeyMatches(k, 'UUID')) {
      if (typeof f !== 'string') throw new Error('record: UUID is not a string');
      uuid = parseGoUUID(f);
    }
  }
  return { key, value, uuid };
}

const decoder: MessageDecoder<SumRecord> = {
  framing: 'lines',
  decode: decodeSumRecord,
  decodeRange: decodeSumRecordRange,
  uuid: (m) => m.uuid,
};

/** The sum application. */
export const sumApp: Application<SumStore, SumRecord> = {
  async newStore(shard: Shard, recorder: Recorder | undefined): Promise<SumStore> {
    if (!recorder) {
      throw new Error(`shard ${goJsonString(shard.id)} has no recovery_log_prefix: gazette-sum keeps its sums in a recorded JSON file and needs a recovery log`);
    }
    return JsonFileStore.open(recorder, { initial: () => new Map(), codec: SUMS_CODEC });
  },
  newMessage: () => decoder,
  consume(_shard, store, env) {
    const r = env.message;
    store.state.set(r.key, (store.state.get(r.key) ?? 0n) + r.value);
  },
  finalizeTxn() {},
};
