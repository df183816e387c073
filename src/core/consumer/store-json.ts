// JsonFileStore: a store whose whole state is one JSON file in the shard's recorded directory,
// rewritten at every commit, byte for byte as Gazette's Go JSONFileStore writes it, so a shard
// moves between Go consumers and ours in both directions.
//
// The file is `<dir>/state.json`, three JSON documents each followed by "\n" (Go's json.Encoder):
//   1. the read-through offsets of the checkpoint's sources, `{"<journal>":<offset>,...}`;
//   2. the application's state;
//   3. the checkpoint, as Go's encoding/json writes consumer.Checkpoint:
//      {"sources":{"<journal>":{"read_through":N,"producers":[{"id":"<base64>","state":
//      {"last_ack":N,"begin":N}}]}},"ack_intents":{"<journal>":"<base64>"}}
//      (map keys sorted; read_through, id, last_ack, begin omitted when zero; producers null when
//      there are none; ack_intents omitted when empty).
// A commit writes `next.json` (opened with O_TRUNC: a next.json recovered from a process that
// died before its rename is a rolled-back transaction), one write per document, then renames it
// over `state.json`: the log records create, three writes, link and unlinks, and playback always
// yields a complete state.json. The ops go to the log in one append, once the commit's `waitFor`
// settled.
import { readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { ValidationError } from '../../lib/protocol/errors.js';
import type { Checkpoint, Checkpoint_Source } from '../../lib/protocol/gen/consumer/protocol.js';
import { JsonNum, parseExactJson, type ExactJsonValue } from '../../lib/recoverylog/hints.js';
import { RecordedFs } from '../../lib/recoverylog/recorded-fs.js';
import type { Recorder } from '../../lib/recoverylog/recorder.js';
import { emptyCheckpoint, type Store } from './store.js';

/** How the application's state is written and read (one JSON document without raw newlines). */
export interface JsonStateCodec<S> {
  encode(state: S): string;
  decode(json: string): S;
}

// ---- Go's encoding/json, for the values we write ---------------------------------------------

/** A JSON string as Go's encoder writes it (HTML-sensitive characters and U+2028/9 escaped). */
export function goJsonString(s: string): string {
  return JSON.stringify(s).replace(/[<>&\u2028\u2029]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}

const byKey = <T>(o: Record<string, T>): [string, T][] => Object.entries(o).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));

/**
 * A plain value as Go's encoder writes a map/slice/scalar of it: object keys sorted (Go sorts
 * map keys), bigint as a number, Uint8Array as base64, strings escaped as Go does. Suits states
 * like Go's `map[string]int64`.
 */
export function encodeGoJson(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  switch (typeof v) {
    case 'string':
      return goJsonString(v);
    case 'bigint':
      return v.toString();
    case 'number':
      if (!Number.isFinite(v)) throw new ValidationError(`cannot encode ${v} as JSON`);
      return JSON.stringify(v);
    case 'boolean':
      return v ? 'true' : 'false';
    case 'object':
      if (v instanceof Uint8Array) return goJsonString(Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64'));
      if (Array.isArray(v)) return `[${v.map(encodeGoJson).join(',')}]`;
      if (v instanceof Map) return encodeGoJson(Object.fromEntries(v));
      return `{${byKey(v as Record<string, unknown>)
        .filter(([, x]) => x !== undefined)
        .map(([k, x]) => `${goJsonString(k)}:${encodeGoJson(x)}`)
        .join(',')}}`;
    default:
      throw new ValidationError(`cannot encode a ${typeof v} as JSON`);
  }
}

/** Default state codec: Go's encoding of plain values; JSON.parse back. */
export const GO_JSON_CODEC: JsonStateCodec<unknown> = {
  encode: encodeGoJson,
  decode: (json) => JSON.parse(json) as unknown,
};

const b64 = (b: Uint8Array) => goJsonString(Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('base64'));

/** Document 1 of state.json: the checkpoint's read-through offsets (Go's FlattenReadThrough). */
export function encodeFlattenedOffsets(cp: Checkpoint): string {
  return `{${byKey(cp.sources)
    .map(([j, s]) => `${goJsonString(j)}:${s.read_through}`)
    .join(',')}}`;
}

function encodeSource(s: Checkpoint_Source): string {
  const f: string[] = [];
  if (s.read_through !== 0n) f.push(`"read_through":${s.read_through}`);
  const producers = s.producers.map((p) => {
    const pf: string[] = [];
    if (p.id.length > 0) pf.push(`"id":${b64(p.id)}`);
    const st: string[] = [];
    if (p.state && p.state.last_ack !== 0n) st.push(`"last_ack":${p.state.last_ack}`);
    if (p.state && p.state.begin !== 0n) st.push(`"begin":${p.state.begin}`);
    pf.push(`"state":{${st.join(',')}}`);
    return `{${pf.join(',')}}`;
  });
  f.push(`"producers":${producers.length === 0 ? 'null' : `[${producers.join(',')}]`}`);
  return `{${f.join(',')}}`;
}

/** Document 3 of state.json: the checkpoint as Go's encoding/json writes consumer.Checkpoint. */
export function encodeCheckpointJson(cp: Checkpoint): string {
  const f = [`"sources":{${byKey(cp.sources)
    .map(([j, s]) => `${goJsonString(j)}:${encodeSource(s)}`)
    .join(',')}}`];
  const acks = byKey(cp.ack_intents);
  if (acks.length > 0) f.push(`"ack_intents":{${acks.map(([j, b]) => `${goJsonString(j)}:${b64(b)}`).join(',')}}`);
  return `{${f.join(',')}}`;
}

// ---- reading, as Go's decoder does --------------------------------------------------------------

type Obj = { [k: string]: ExactJsonValue };

/** Go matches a struct field's key exactly, else case-insensitively. */
function field(o: Obj, key: string): ExactJsonValue | undefined {
  if (Object.prototype.hasOwnProperty.call(o, key)) return o[key];
  const lower = key.toLowerCase();
  let found: ExactJsonValue | undefined;
  for (const k of Object.keys(o)) if (k.toLowerCase() === lower) found = o[k];
  return found;
}

function obj(v: ExactJsonValue | undefined, what: string): Obj | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || Array.isArray(v) || v instanceof JsonNum) throw new ValidationError(`state.json: ${what} is not an object`);
  return v;
}

function int(v: ExactJsonValue | undefined, what: string, min: bigint, max: bigint): bigint {
  if (v === undefined || v === null) return 0n;
  if (!(v instanceof JsonNum) || !/^-?\d+$/.test(v.text)) throw new ValidationError(`state.json: ${what} is not an integer`);
  const n = BigInt(v.text);
  if (n < min || n > max) throw new ValidationError(`state.json: ${what} ${v.text} is out of range`);
  return n;
}

function bytes(v: ExactJsonValue | undefined, what: string): Buffer {
  if (v === undefined || v === null) return Buffer.alloc(0);
  if (typeof v !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(v) || v.length % 4 !== 0) throw new ValidationError(`state.json: ${what} is not base64`);
  return Buffer.from(v, 'base64');
}

const INT64: [bigint, bigint] = [-(1n << 63n), (1n << 63n) - 1n];
const UINT64: [bigint, bigint] = [0n, (1n << 64n) - 1n];

/** Reads document 3 (a checkpoint as Go writes it). */
export function decodeCheckpointJson(text: string): Checkpoint {
  const root = obj(parseExactJson(text, 'the checkpoint of state.json is'), 'the checkpoint') ?? {};
  const cp = emptyCheckpoint();
  for (const [j, sv] of Object.entries(obj(field(root, 'sources'), 'sources') ?? {})) {
    const s = obj(sv, `sources[${j}]`) ?? {};
    const pv = field(s, 'producers');
    if (pv !== undefined && pv !== null && !Array.isArray(pv)) throw new ValidationError(`state.json: sources[${j}].producers is not a list`);
    cp.sources[j] = {
      read_through: int(field(s, 'read_through'), `sources[${j}].read_through`, ...INT64),
      producers: (pv ?? []).map((p, i) => {
        const po = obj(p, `sources[${j}].producers[${i}]`) ?? {};
        const st = obj(field(po, 'state'), `sources[${j}].producers[${i}].state`) ?? {};
        return {
          id: bytes(field(po, 'id'), `sources[${j}].producers[${i}].id`),
          state: {
            last_ack: int(field(st, 'last_ack'), `sources[${j}].producers[${i}].state.last_ack`, ...UINT64),
            begin: int(field(st, 'begin'), `sources[${j}].producers[${i}].state.begin`, ...INT64),
          },
        };
      }),
    };
  }
  for (const [j, v] of Object.entries(obj(field(root, 'ack_intents'), 'ack_intents') ?? {})) cp.ack_intents[j] = bytes(v, `ack_intents[${j}]`);
  return cp;
}

/**
 * Splits text into its top-level JSON documents (as Go's json.Decoder reads a stream): each is
 * an object, array, string or scalar, separated by whitespace.
 */
export function splitJsonDocuments(text: string): string[] {
  const out: string[] = [];
  let i = 0;
  const ws = () => {
    while (i < text.length && ' \t\r\n'.includes(text[i]!)) i++;
  };
  for (ws(); i < text.length; ws()) {
    const start = i;
    const c = text[i]!;
    if (c === '{' || c === '[') {
      let depth = 0;
      for (; i < text.length; i++) {
        const d = text[i]!;
        if (d === '"') {
          for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === '\\') i++;
        } else if (d === '{' || d === '[') depth++;
        else if (d === '}' || d === ']') {
          depth--;
          if (depth === 0) {
            i++;
            break;
          }
        }
      }
      if (depth !== 0) throw new ValidationError(`state.json: a JSON document starting at character ${start} is cut short`);
    } else if (c === '"') {
      for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === '\\') i++;
      if (i >= text.length) throw new ValidationError(`state.json: a string starting at character ${start} is cut short`);
      i++;
    } else {
      while (i < text.length && !' \t\r\n{["'.includes(text[i]!)) i++;
    }
    out.push(text.slice(start, i));
  }
  return out;
}

export interface JsonFileStoreOptions<S> {
  /** The state of a new store (no state.json recovered). */
  initial: () => S;
  /** How the state is written and read (default: Go's encoding of plain values, JSON.parse). */
  codec?: JsonStateCodec<S>;
}

/** The JSON file store: `state` is the application's, written at every commit. */
export class JsonFileStore<S = unknown> implements Store {
  state: S;
  private checkpoint: Checkpoint;
  readonly fs: RecordedFs;
  private readonly codec: JsonStateCodec<S>;

  private constructor(
    readonly recorder: Recorder,
    state: S,
    checkpoint: Checkpoint,
    codec: JsonStateCodec<S>,
  ) {
    this.fs = new RecordedFs(recorder);
    this.state = state;
    this.checkpoint = checkpoint;
    this.codec = codec;
  }

  get currentPath(): string {
    return path.join(this.recorder.dir, 'state.json');
  }

  get nextPath(): string {
    return path.join(this.recorder.dir, 'next.json');
  }

  /**
   * Opens the store of the recorder's directory: reads `state.json` when it was recovered
   * (throws ValidationError naming what is wrong with it), else starts from `initial()`.
   */
  static async open<S>(recorder: Recorder, opts: JsonFileStoreOptions<S>): Promise<JsonFileStore<S>> {
    const codec = opts.codec ?? (GO_JSON_CODEC as JsonStateCodec<S>);
    let text: string;
    try {
      text = await readFile(path.join(recorder.dir, 'state.json'), 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return new JsonFileStore(recorder, opts.initial(), emptyCheckpoint(), codec);
      throw err;
    }
    const { state, checkpoint } = parseJsonFileStore(text, codec);
    return new JsonFileStore(recorder, state, checkpoint, codec);
  }

  async restoreCheckpoint(): Promise<Checkpoint> {
    return this.checkpoint;
  }

  async startCommit(_shard: unknown, checkpoint: Checkpoint, waitFor: Promise<unknown>[]): Promise<void> {
    this.checkpoint = checkpoint;
    const state = this.codec.encode(this.state);
    if (state.includes('\n')) throw new ValidationError('the state encodes to JSON with a newline; state.json holds one document per line');
    // The commit's ops (create, three writes, link and unlinks) go to the log in one append, held
    // by a barrier until they are all recorded and `waitFor` settled. Without the gate the
    // recorder sends the create alone at once and the rest in a second append after it: two
    // round trips to the brokers per commit, which bounds how many transactions a shard commits
    // per second (docs/consumer.md, "Keeping up").
    let recorded!: () => void;
    let failed!: (err: unknown) => void;
    const gate = new Promise<void>((resolve, reject) => {
      recorded = resolve;
      failed = reject;
    });
    void this.recorder.barrier([...waitFor, gate]).catch(() => undefined);
    try {
      const f = await this.fs.openFile(this.nextPath, 'w', 0o600);
      try {
        await f.write(encodeFlattenedOffsets(checkpoint) + '\n');
        await f.write(state + '\n');
        await f.write(encodeCheckpointJson(checkpoint) + '\n');
      } finally {
        await f.close();
      }
      await this.fs.rename(this.nextPath, this.currentPath);
    } catch (err) {
      // A commit that failed half-way fails the recorder: nothing more of this store is recorded.
      failed(err);
      throw err;
    }
    recorded();
    await this.recorder.barrier();
  }

  /** Removes the store's directory. */
  async destroy(): Promise<void> {
    await rm(this.recorder.dir, { recursive: true, force: true });
  }
}

/**
 * Reads a state.json as Go's JSONFileStore does: offsets, state and (if present) checkpoint;
 * the offsets document's read-throughs are folded into the checkpoint's sources (files written
 * before checkpoints existed held offsets only).
 */
export function parseJsonFileStore<S>(text: string, codec: JsonStateCodec<S>): { state: S; checkpoint: Checkpoint; offsets: Map<string, bigint> } {
  const docs = splitJsonDocuments(text);
  if (docs.length < 2) throw new ValidationError(`state.json: expected offsets, state and checkpoint documents, found ${docs.length}`);
  if (docs.length > 3) throw new ValidationError(`state.json: expected 3 JSON documents, found ${docs.length}`);
  const offsetsDoc = obj(parseExactJson(docs[0]!, 'the offsets of state.json are'), 'the offsets') ?? {};
  const offsets = new Map<string, bigint>();
  for (const [j, v] of Object.entries(offsetsDoc)) offsets.set(j, int(v, `offsets[${j}]`, ...INT64));
  let state: S;
  try {
    state = codec.decode(docs[1]!);
  } catch (err) {
    throw new ValidationError(`state.json: cannot decode the state: ${(err as Error).message}`);
  }
  const checkpoint = docs[2] !== undefined ? decodeCheckpointJson(docs[2]) : emptyCheckpoint();
  for (const [j, o] of offsets) checkpoint.sources[j] = { read_through: o, producers: checkpoint.sources[j]?.producers ?? [] };
  return { state, checkpoint, offsets };
}
