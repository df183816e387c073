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
import { goJsonKeyMatches, parseGoUUID } from '../../lib/message/json.js';
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
