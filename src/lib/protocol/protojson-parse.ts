// Loaders for the proto3-JSON that Go gazctl prints with `journals list -o json` and
// `shards list -o json` (original snake_case names, int64 as strings, enums as names, durations
// as "300s"). Used for fixtures and for importing saved listings; camelCase names are accepted too.
import { ValidationError } from './errors.js';
import {
  CompressionCodec,
  JournalSpec_Flag,
  JournalSpec_Suspend_Level,
  type JournalSpec,
  type Label,
  type ListResponse_Journal,
} from './gen/broker/protocol.js';
import type { ListResponse_Shard, ShardSpec } from './gen/consumer/protocol.js';
import type { Duration } from './gen/google/protobuf/duration.js';
import { enumNames } from './enums.js';

type Obj = Record<string, unknown>;

function field(o: Obj | undefined, snake: string): unknown {
  if (!o) return undefined;
  if (snake in o) return o[snake];
  const camel = snake.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
  return o[camel];
}

const obj = (v: unknown): Obj | undefined => (v && typeof v === 'object' ? (v as Obj) : undefined);
const str = (v: unknown): string => (v === undefined || v === null ? '' : String(v));
const num = (v: unknown): number => (v === undefined || v === null ? 0 : Number(v));
const big = (v: unknown): bigint => (v === undefined || v === null || v === '' ? 0n : BigInt(v as string));
const bool = (v: unknown): boolean => v === true;

function enumOf(v: unknown, names: Record<string, number>, what: string): number {
  if (v === undefined || v === null) return 0;
  if (typeof v === 'number') return v;
  const n = names[String(v)];
  if (n === undefined) throw new ValidationError(`unknown ${what} ${JSON.stringify(v)} in proto JSON`);
  return n;
}

/** Parses a proto3-JSON Duration ("300s", "1.500s", "-2s"). */
export function parseProtoJsonDuration(v: unknown): Duration | undefined {
  if (v === undefined || v === null) return undefined;
  const m = /^(-?)(\d+)(?:\.(\d{1,9}))?s$/.exec(String(v));
  if (!m) throw new ValidationError(`invalid proto JSON duration ${JSON.stringify(v)}`);
  const neg = m[1] === '-';
  const seconds = BigInt(m[2]!);
  const nanos = Number((m[3] ?? '').padEnd(9, '0') || '0');
  if (seconds === 0n && nanos === 0) return undefined;
  return { seconds: neg ? -seconds : seconds, nanos: neg ? -nanos : nanos };
}

function labelsOf(v: unknown): Label[] {
  const ls = field(obj(v), 'labels');
  return Array.isArray(ls)
    ? ls.map((l) => ({ name: str(field(obj(l), 'name')), value: str(field(obj(l), 'value')), prefix: bool(field(obj(l), 'prefix')) }))
    : [];
}

/** A JournalSpec from its proto3-JSON object. */
export function journalSpecFromProtoJson(v: unknown): JournalSpec {
  const o = obj(v);
  const f = obj(field(o, 'fragment'));
  const s = obj(field(o, 'suspend'));
  const stores = field(f, 'stores');
  return {
    name: str(field(o, 'name')),
    replication: num(field(o, 'replication')),
    labels: { labels: labelsOf(field(o, 'labels')) },
    fragment: {
      length: big(field(f, 'length')),
      compression_codec: enumOf(field(f, 'compression_codec'), enumNames(CompressionCodec), 'CompressionCodec'),
      stores: Array.isArray(stores) ? stores.map(str) : [],
      refresh_interval: parseProtoJsonDuration(field(f, 'refresh_interval')),
      retention: parseProtoJsonDuration(field(f, 'retention')),
      flush_interval: parseProtoJsonDuration(field(f, 'flush_interval')),
      path_postfix_template: str(field(f, 'path_postfix_template')),
    },
    flags: enumOf(field(o, 'flags'), enumNames(JournalSpec_Flag), 'JournalSpec_Flag'),
    max_append_rate: big(field(o, 'max_append_rate')),
    suspend: s
      ? {
          level: enumOf(field(s, 'level'), enumNames(JournalSpec_Suspend_Level), 'Suspend level'),
          offset: big(field(s, 'offset')),
        }
      : undefined,
  };
}

/** The journals of a `journals list -o json` document (routes are not loaded). */
export function journalsFromListJson(text: string): ListResponse_Journal[] {
  const doc = obj(JSON.parse(text));
  const js = field(doc, 'journals');
  if (!Array.isArray(js)) return [];
  return js.map((j) => ({
    spec: journalSpecFromProtoJson(field(obj(j), 'spec')),
    mod_revision: big(field(obj(j), 'mod_revision')),
    route: undefined,
    create_revision: big(field(obj(j), 'create_revision')),
  }));
}

/** A ShardSpec from its proto3-JSON object. */
export function shardSpecFromProtoJson(v: unknown): ShardSpec {
  const o = obj(v);
  const sources = field(o, 'sources');
  return {
    id: str(field(o, 'id')),
    sources: Array.isArray(sources)
      ? sources.map((s) => ({ journal: str(field(obj(s), 'journal')), min_offset: big(field(obj(s), 'min_offset')) }))
      : [],
    recovery_log_prefix: str(field(o, 'recovery_log_prefix')),
    hint_prefix: str(field(o, 'hint_prefix')),
    hint_backups: num(field(o, 'hint_backups')),
    max_txn_duration: parseProtoJsonDuration(field(o, 'max_txn_duration')),
    min_txn_duration: parseProtoJsonDuration(field(o, 'min_txn_duration')),
    disable: bool(field(o, 'disable')),
    hot_standbys: num(field(o, 'hot_standbys')),
    labels: { labels: labelsOf(field(o, 'labels')) },
    disable_wait_for_ack: bool(field(o, 'disable_wait_for_ack')),
    ring_buffer_size: num(field(o, 'ring_buffer_size')),
    read_channel_size: num(field(o, 'read_channel_size')),
  };
}

/** The shards of a `shards list -o json` document (routes and statuses are not loaded). */
export function shardsFromListJson(text: string): ListResponse_Shard[] {
  const doc = obj(JSON.parse(text));
  const ss = field(doc, 'shards');
  if (!Array.isArray(ss)) return [];
  return ss.map((s) => ({
    spec: shardSpecFromProtoJson(field(obj(s), 'spec')),
    mod_revision: big(field(obj(s), 'mod_revision')),
    route: undefined,
    status: [],
    create_revision: big(field(obj(s), 'create_revision')),
  }));
}
