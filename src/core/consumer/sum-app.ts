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
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseUUID, type UUID } from '../../lib/message/uuid.js';
import type { Checkpoint, Checkpoint_Source_ProducerEntry } from '../../lib/protocol/gen/consumer/protocol.js';
import type { Application, MessageDecoder, Shard, ShardRecorder, Store } from './app.js';
import type { LogRecorder } from './recording.js';

/** One input record. */
export interface SumRecord {
  key: string;
  value: bigint;
  uuid: UUID;
}

const ZERO_UUID = new Uint8Array(16);

/** Go's encoding/json of a string (HTML-escaping as json.Encoder does by default). */
export function goJsonString(s: string): string {
  return JSON.stringify(s).replace(/[<>&\u2028\u2029]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}

/** Go sorts map keys by their bytes. */
function goKeyOrder(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

function goMap<V>(m: Iterable<[string, V]>, enc: (v: V) => string): string {
  const entries = [...m].sort(([a], [b]) => goKeyOrder(a, b));
  return '{' + entries.map(([k, v]) => goJsonString(k) + ':' + enc(v)).join(',') + '}';
}

/** Go's encoding/json of a consumer Checkpoint (field tags of its generated struct). */
export function goCheckpointJson(cp: Checkpoint): string {
  const producer = (p: Checkpoint_Source_ProducerEntry) => {
    const parts: string[] = [];
    if (p.id.length > 0) parts.push(`"id":${JSON.stringify(Buffer.from(p.id).toString('base64'))}`);
    const st: string[] = [];
    if (p.state && p.state.last_ack !== 0n) st.push(`"last_ack":${p.state.last_ack}`);
    if (p.state && p.state.begin !== 0n) st.push(`"begin":${p.state.begin}`);
    parts.push(`"state":{${st.join(',')}}`);
    return '{' + parts.join(',') + '}';
  };
  const sources = Object.entries(cp.sources);
  const src = sources.length === 0 ? 'null' : goMap(sources, (s) => {
    const parts: string[] = [];
    if (s.read_through !== 0n) parts.push(`"read_through":${s.read_through}`);
    parts.push(`"producers":${s.producers.length === 0 ? 'null' : '[' + s.producers.map(producer).join(',') + ']'}`);
    return '{' + parts.join(',') + '}';
  });
  const acks = Object.entries(cp.ack_intents);
  const ackPart = acks.length === 0 ? '' : `,"ack_intents":` + goMap(acks, (b) => JSON.stringify(Buffer.from(b).toString('base64')));
  return `{"sources":${src}${ackPart}}`;
}

/** JSON.parse keeping integers of more than 15 digits exact (as strings), outside string literals. */
function parseExact(text: string): unknown {
  let out = '';
  let inStr = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (inStr) {
      out += c;
      if (c === '\\') out += text[++i] ?? '';
      else if (c === '"') inStr = false;
      continue;
    }
    if (c === '"') {
      inStr = true;
      out += c;
      continue;
    }
    if (c === '-' || (c >= '0' && c <= '9')) {
      let j = i + 1;
      while (j < text.length && /[0-9.eE+-]/.test(text[j]!)) j++;
      const num = text.slice(i, j);
      out += /^-?\d{16,}$/.test(num) ? `"${num}"` : num;
      i = j - 1;
      continue;
    }
    out += c;
  }
  return JSON.parse(out);
}

const big = (v: unknown): bigint => (v === undefined || v === null ? 0n : BigInt(v as string | number));

/** Decodes the checkpoint line Go's JSON file store writes. */
export function parseGoCheckpoint(text: string): Checkpoint {
  const o = (parseExact(text) ?? {}) as { sources?: Record<string, { read_through?: unknown; producers?: Array<{ id?: string; state?: { last_ack?: unknown; begin?: unknown } }> | null }> | null; ack_intents?: Record<string, string> | null };
  const cp: Checkpoint = { sources: {}, ack_intents: {} };
  for (const [j, s] of Object.entries(o.sources ?? {})) {
    cp.sources[j] = {
      read_through: big(s.read_through),
      producers: (s.producers ?? []).map((p) => ({
        id: Buffer.from(p.id ?? '', 'base64'),
        state: { last_ack: big(p.state?.last_ack), begin: big(p.state?.begin) },
      })),
    };
  }
  for (const [j, b] of Object.entries(o.ack_intents ?? {})) cp.ack_intents[j] = Buffer.from(b, 'base64');
  return cp;
}

/**
 * The totals and checkpoint of a shard, committed as `state.json` (written to `next.json`, then
 * renamed) through the shard's recorder. Stands in for the JSON file store of
 * src/core/consumer/store-json.ts until it lands.
 */
export class SumStore implements Store {
  readonly sums = new Map<string, bigint>();
  private checkpoint: Checkpoint = { sources: {}, ack_intents: {} };

  private constructor(private readonly recorder: LogRecorder) {}

  static async open(recorder: LogRecorder): Promise<SumStore> {
    const s = new SumStore(recorder);
    let text: string;
    try {
      text = await readFile(path.join(recorder.dir, 'state.json'), 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return s;
      throw new Error(`opening state file: ${(err as Error).message}`, { cause: err });
    }
    const lines = text.split('\n').filter((l) => l.trim() !== '');
    if (lines.length < 2) throw new Error(`state.json: expected 2 or 3 JSON lines, found ${lines.length}`);
    const offsets = parseExact(lines[0]!) as Record<string, unknown> | null;
    for (const [k, v] of Object.entries((parseExact(lines[1]!) ?? {}) as Record<string, unknown>)) s.sums.set(k, big(v));
    if (lines[2]) s.checkpoint = parseGoCheckpoint(lines[2]);
    // A file of older stores has only offsets: fold them into the checkpoint, as Go does.
    for (const [j, o] of Object.entries(offsets ?? {})) {
      s.checkpoint.sources[j] = { read_through: big(o), producers: s.checkpoint.sources[j]?.producers ?? [] };
    }
    return s;
  }

  async restoreCheckpoint(): Promise<Checkpoint> {
    return this.checkpoint;
  }

  /** The three lines of state.json as Go's json.Encoder writes them. */
  encode(cp: Checkpoint): string {
    const offsets = goMap(Object.entries(cp.sources).map(([j, s]) => [j, s.read_through] as [string, bigint]), (v) => v.toString());
    const sums = goMap(this.sums, (v) => v.toString());
    return `${offsets}\n${sums}\n${goCheckpointJson(cp)}\n`;
  }

  async startCommit(_shard: Shard, cp: Checkpoint, waitFor: Promise<unknown>[]): Promise<void> {
    await Promise.all(waitFor);
    this.checkpoint = cp;
    const dir = this.recorder.dir;
    await this.recorder.writeAndRename(path.join(dir, 'next.json'), path.join(dir, 'state.json'), Buffer.from(this.encode(cp), 'utf8'));
  }

  async destroy(): Promise<void> {
    await this.recorder.destroy();
  }
}

/** Decodes one NDJSON line as Go's record: `key`, `value` (int64) and `UUID` (matched case-insensitively). */
export function decodeSumRecord(line: Buffer): SumRecord {
  const o = parseExact(line.toString('utf8')) as Record<string, unknown> | null;
  if (o === null || typeof o !== 'object' || Array.isArray(o)) throw new Error(`record is not a JSON object: ${line.toString('utf8').slice(0, 80).trim()}`);
  let key = '';
  let value = 0n;
  let uuid: UUID = ZERO_UUID;
  for (const [k, v] of Object.entries(o)) {
    const lk = k.toLowerCase();
    if (lk === 'key') {
      if (typeof v !== 'string' && v !== null) throw new Error(`record: key is not a string`);
      key = (v as string | null) ?? '';
    } else if (lk === 'value') {
      if (v === null) continue;
      if (typeof v === 'number' ? !Number.isInteger(v) : typeof v !== 'string' || !/^-?\d+$/.test(v)) throw new Error(`record: value ${String(v)} is not an integer`);
      value = BigInt(v as string | number);
    } else if (lk === 'uuid' && typeof v === 'string') {
      uuid = parseUUID(v);
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
  async newStore(shard: Shard, recorder: ShardRecorder | undefined): Promise<SumStore> {
    if (!recorder) {
      throw new Error(`shard ${goJsonString(shard.id)} has no recovery_log_prefix: gazette-sum keeps its sums in a recorded JSON file and needs a recovery log`);
    }
    return SumStore.open(recorder as LogRecorder);
  },
  newMessage: () => decoder,
  consume(_shard, store, env) {
    const r = env.message;
    store.sums.set(r.key, (store.sums.get(r.key) ?? 0n) + r.value);
  },
  finalizeTxn() {},
};
