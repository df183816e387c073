// proto3-JSON output as upstream gazctl prints it for `-o json` (gogo jsonpb with original field
// names and defaults emitted): fields in field-number order, 64-bit integers as
// strings, 32-bit integers as numbers, enums by name (unknown numbers bare), durations as
// "<seconds>s", absent nullable messages and empty bytes as null, empty lists [] and empty maps {}.
// "Always sent" message fields are never null: their zero value is printed instead.
// Output is compact, on one line, without a trailing newline.
import { durationToProtoJson } from './duration.js';
import {
  CompressionCodec,
  JournalSpec_Suspend_Level,
  Status,
  type Fragment,
  type Header,
  type Header_Etcd,
  type JournalSpec,
  type JournalSpec_Fragment,
  type JournalSpec_Suspend,
  type Label,
  type LabelSelector,
  type LabelSet,
  type ListResponse,
  type ListResponse_Journal,
  type ProcessSpec_ID,
  type Route,
  type SHA1Sum,
} from './gen/broker/protocol.js';
import {
  ReplicaStatus_Code,
  Status as ConsumerStatus,
  type ListResponse as ShardListResponse,
  type ListResponse_Shard,
  type ReplicaStatus,
  type ShardSpec,
  type ShardSpec_Source,
} from './gen/consumer/protocol.js';
import type { Duration } from './gen/google/protobuf/duration.js';

const GO_ESCAPES = /[<>&\u2028\u2029]/g;

/** A JSON string the way Go's encoding/json writes it (HTML-sensitive characters escaped). */
export function jsonString(s: string): string {
  return JSON.stringify(s).replace(GO_ESCAPES, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}

function int64(v: bigint | undefined): string {
  return `"${(v ?? 0n).toString()}"`;
}

function num(v: number | undefined): string {
  return String(v ?? 0);
}

function bool(v: boolean | undefined): string {
  return v ? 'true' : 'false';
}

function enumName(names: Record<number, string>, v: number | undefined): string {
  const n = v ?? 0;
  const name = n >= 0 ? names[n] : undefined;
  return name !== undefined && name !== 'UNRECOGNIZED' ? jsonString(name) : String(n);
}

function bytes(v: Uint8Array | undefined): string {
  if (!v || v.length === 0) return 'null';
  return jsonString(Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64'));
}

function duration(d: Duration | undefined): string {
  return jsonString(durationToProtoJson(d));
}

function list<T>(xs: readonly T[] | undefined, f: (x: T) => string): string {
  return `[${(xs ?? []).map(f).join(',')}]`;
}

function obj(fields: [string, string][]): string {
  return `{${fields.map(([k, v]) => `${jsonString(k)}:${v}`).join(',')}}`;
}

export function labelToJson(l: Label): string {
  return obj([
    ['name', jsonString(l.name)],
    ['value', jsonString(l.value)],
    ['prefix', bool(l.prefix)],
  ]);
}

export function labelSetToJson(set: LabelSet | undefined): string {
  return obj([['labels', list(set?.labels, labelToJson)]]);
}

export function labelSelectorToJson(sel: LabelSelector | undefined): string {
  return obj([
    ['include', labelSetToJson(sel?.include)],
    ['exclude', labelSetToJson(sel?.exclude)],
  ]);
}

export function processIdToJson(id: ProcessSpec_ID | undefined): string {
  return obj([
    ['zone', jsonString(id?.zone ?? '')],
    ['suffix', jsonString(id?.suffix ?? '')],
  ]);
}

export function routeToJson(route: Route | undefined): string {
  return obj([
    ['members', list(route?.members, processIdToJson)],
    ['primary', num(route?.primary)],
    ['endpoints', list(route?.endpoints, jsonString)],
  ]);
}

export function etcdHeaderToJson(etcd: Header_Etcd | undefined): string {
  return obj([
    ['cluster_id', int64(etcd?.cluster_id)],
    ['member_id', int64(etcd?.member_id)],
    ['revision', int64(etcd?.revision)],
    ['raft_term', int64(etcd?.raft_term)],
  ]);
}

export function headerToJson(h: Header | undefined): string {
  return obj([
    ['process_id', processIdToJson(h?.process_id)],
    ['route', routeToJson(h?.route)],
    ['etcd', etcdHeaderToJson(h?.etcd)],
  ]);
}

export function journalFragmentSpecToJson(f: JournalSpec_Fragment | undefined): string {
  return obj([
    ['length', int64(f?.length)],
    ['compression_codec', enumName(CompressionCodec, f?.compression_codec)],
    ['stores', list(f?.stores, jsonString)],
    ['refresh_interval', duration(f?.refresh_interval)],
    ['retention', duration(f?.retention)],
    ['flush_interval', duration(f?.flush_interval)],
    ['path_postfix_template', jsonString(f?.path_postfix_template ?? '')],
  ]);
}

export function journalSuspendToJson(s: JournalSpec_Suspend | undefined): string {
  if (!s) return 'null';
  return obj([
    ['level', enumName(JournalSpec_Suspend_Level, s.level)],
    ['offset', int64(s.offset)],
  ]);
}

export function journalSpecToJson(spec: JournalSpec | undefined): string {
  return obj([
    ['name', jsonString(spec?.name ?? '')],
    ['replication', num(spec?.replication)],
    ['labels', labelSetToJson(spec?.labels)],
    ['fragment', journalFragmentSpecToJson(spec?.fragment)],
    ['flags', num(spec?.flags)],
    ['max_append_rate', int64(spec?.max_append_rate)],
    ['suspend', journalSuspendToJson(spec?.suspend)],
  ]);
}

export function sha1SumToJson(sum: SHA1Sum | undefined): string {
  return obj([
    ['part1', int64(sum?.part1)],
    ['part2', int64(sum?.part2)],
    ['part3', num(sum?.part3)],
  ]);
}

export function fragmentToJson(f: Fragment | undefined): string {
  if (!f) return 'null';
  return obj([
    ['journal', jsonString(f.journal)],
    ['begin', int64(f.begin)],
    ['end', int64(f.end)],
    ['sum', sha1SumToJson(f.sum)],
    ['compression_codec', enumName(CompressionCodec, f.compression_codec)],
    ['backing_store', jsonString(f.backing_store)],
    ['mod_time', int64(f.mod_time)],
    ['path_postfix', jsonString(f.path_postfix)],
  ]);
}

function listedJournalToJson(j: ListResponse_Journal): string {
  return obj([
    ['spec', journalSpecToJson(j.spec)],
    ['mod_revision', int64(j.mod_revision)],
    ['route', routeToJson(j.route)],
    ['create_revision', int64(j.create_revision)],
  ]);
}

/** The whole broker List response as upstream `gazctl journals list -o json` prints it. */
export function journalListResponseToJson(resp: ListResponse): string {
  return obj([
    ['status', enumName(Status, resp.status)],
    ['header', headerToJson(resp.header)],
    ['journals', list(resp.journals, listedJournalToJson)],
  ]);
}

function shardSourceToJson(s: ShardSpec_Source): string {
  return obj([
    ['journal', jsonString(s.journal)],
    ['min_offset', int64(s.min_offset)],
  ]);
}

export function shardSpecToJson(spec: ShardSpec | undefined): string {
  return obj([
    ['id', jsonString(spec?.id ?? '')],
    ['sources', list(spec?.sources, shardSourceToJson)],
    ['recovery_log_prefix', jsonString(spec?.recovery_log_prefix ?? '')],
    ['hint_prefix', jsonString(spec?.hint_prefix ?? '')],
    ['hint_backups', num(spec?.hint_backups)],
    ['max_txn_duration', duration(spec?.max_txn_duration)],
    ['min_txn_duration', duration(spec?.min_txn_duration)],
    ['disable', bool(spec?.disable)],
    ['hot_standbys', num(spec?.hot_standbys)],
    ['labels', labelSetToJson(spec?.labels)],
    ['disable_wait_for_ack', bool(spec?.disable_wait_for_ack)],
    ['ring_buffer_size', num(spec?.ring_buffer_size)],
    ['read_channel_size', num(spec?.read_channel_size)],
  ]);
}

export function replicaStatusToJson(s: ReplicaStatus): string {
  return obj([
    ['code', enumName(ReplicaStatus_Code, s.code)],
    ['errors', list(s.errors, jsonString)],
  ]);
}

function listedShardToJson(s: ListResponse_Shard): string {
  return obj([
    ['spec', shardSpecToJson(s.spec)],
    ['mod_revision', int64(s.mod_revision)],
    ['route', routeToJson(s.route)],
    ['status', list(s.status, replicaStatusToJson)],
    ['create_revision', int64(s.create_revision)],
  ]);
}

/** The whole consumer List response as upstream `gazctl shards list -o json` prints it. */
export function shardListResponseToJson(resp: ShardListResponse): string {
  return obj([
    ['status', enumName(ConsumerStatus, resp.status)],
    ['header', headerToJson(resp.header)],
    ['shards', list(resp.shards, listedShardToJson)],
    ['extension', bytes(resp.extension)],
  ]);
}
