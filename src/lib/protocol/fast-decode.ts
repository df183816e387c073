// Hand-written decoders for the protocol messages that arrive in bulk: the ListResponse stream
// of a journal listing (up to a thousand journals a message, tens of thousands a listing), and
// the FragmentsResponse pages of a fragment listing (a thousand fragments a page, a hundred
// pages for a long recovery log), and the consumer's shard ListResponse (one message, every
// shard of a listing: ten thousand and more).
//
// The generated decoders are general (a reader object, a recursion counter and a switch per
// field, a TextDecoder call per long string); this one walks the bytes with plain loops. It
// handles the encoding a broker actually sends (known fields with their declared wire types,
// varints that fit, ASCII strings on the fast path) and hands any message with anything else
// in it (unknown or repeated-with-another-wire-type fields, groups, 64-bit values of eight or
// more varint bytes, truncation) back to the generated decoder whole, so the result is the
// generated decoder's result for every input. test/unit/lib/protocol/fast-decode.test.ts checks
// that over random and mutated messages.
import {
  FragmentsResponse,
  Header,
  ListResponse,
  type Fragment,
  type FragmentsResponse__Fragment,
  type JournalSpec,
  type JournalSpec_Fragment,
  type JournalSpec_Suspend,
  type Label,
  type ListResponse_Journal,
  type ProcessSpec_ID,
  type Route,
  type SHA1Sum,
} from './gen/broker/protocol.js';
import type { Duration } from './gen/google/protobuf/duration.js';
import {
  ListResponse as ShardListResponse,
  type ListResponse_Shard,
  type ReplicaStatus,
  type ShardSpec,
  type ShardSpec_Source,
} from './gen/consumer/protocol.js';
import { BinaryReader } from '@bufbuild/protobuf/wire';

/** Thrown inside the fast path when a message needs the generated decoder. */
const BAIL: unique symbol = Symbol('fast-decode: use the generated decoder');

// The message being decoded and the read position. Module state keeps the hot loops free of a
// reader object; decoding is synchronous, so no two decodes interleave.
let buf: Buffer = Buffer.alloc(0);
let pos = 0;

// Same configuration as the generated decoder's text decoding (@bufbuild/protobuf): invalid
// UTF-8 becomes U+FFFD and a leading U+FEFF is kept as text.
const utf8 = new TextDecoder('utf-8', { ignoreBOM: true });

/** A varint's low 32 bits, unsigned (as the generated `uint32()` reads them). */
function u32(end: number): number {
  if (pos >= end) throw BAIL;
  let b = buf[pos++]!;
  if (b < 0x80) return b;
  let v = b & 0x7f;
  for (let shift = 7; shift < 35; shift += 7) {
    if (pos >= end) throw BAIL;
    b = buf[pos++]!;
    v |= (b & 0x7f) << shift;
    if (b < 0x80) return v >>> 0;
  }
  // Bytes six to ten carry only bits above 32, which a 32-bit read drops.
  for (let i = 0; i < 5; i++) {
    if (pos >= end) throw BAIL;
    if (buf[pos++]! < 0x80) return v >>> 0;
  }
  throw BAIL;
}

// Bigints made for recent values, by value (fragment lengths, durations and zeros repeat in
// every journal; a create revision is often its mod revision). Like strings, bigints are values.
const BIG_SLOTS = 256;
const bigKeys = new Float64Array(BIG_SLOTS).fill(-1);
const bigVals: bigint[] = new Array<bigint>(BIG_SLOTS).fill(0n);

function bigint(v: number): bigint {
  const slot = v % BIG_SLOTS;
  if (bigKeys[slot] === v) return bigVals[slot]!;
  const b = BigInt(v);
  bigKeys[slot] = v;
  bigVals[slot] = b;
  return b;
}

/** A 64-bit varint field as a bigint, when it is below 2^49 (seven bytes); else bail. */
function i64(end: number): bigint {
  let v = 0;
  let mul = 1;
  for (let i = 0; i < 7; i++) {
    if (pos >= end) throw BAIL;
    const b = buf[pos++]!;
    v += (b & 0x7f) * mul;
    if (b < 0x80) return bigint(v);
    mul *= 128;
  }
  throw BAIL;
}

/** A bool field: a one-byte varint. */
function bool(end: number): boolean {
  if (pos >= end) throw BAIL;
  const b = buf[pos++]!;
  if (b >= 0x80) throw BAIL;
  return b !== 0;
}

/** The length of a length-delimited field, checked to end within `end`; returns its end. */
function delimited(end: number): number {
  const len = u32(end);
  const stop = pos + len;
  if (stop > end) throw BAIL;
  return stop;
}

function str(end: number): string {
  const stop = delimited(end);
  return strAt(pos, stop);
}

// Label names and values, stores, zones, broker names and endpoints repeat from journal to
// journal (a listing of many thousands often has a handful of distinct ones), so those fields
// share one string per distinct value: a direct-mapped cache keyed by a hash of the bytes. A
// string is a value, so sharing one is invisible to callers; it only saves the copies (and the
// garbage collector's time over them). Journal names, which are all different, are not cached.
const INTERN_SLOTS = 1024;
const INTERN_MAX = 128;
const interned: (string | undefined)[] = new Array<string | undefined>(INTERN_SLOTS).fill(undefined);

/** A string field, shared with an earlier equal one when there is one in the cache. */
function istr(end: number): string {
  const stop = delimited(end);
  const start = pos;
  const len = stop - start;
  if (len > INTERN_MAX) return strAt(start, stop);
  let h = len;
  for (let i = start; i < stop; i++) {
    const b = buf[i]!;
    if (b > 0x7f) {
      pos = stop;
      return utf8.decode(buf.subarray(start, stop));
    }
    h = (Math.imul(h, 31) + b) | 0;
  }
  pos = stop;
  const slot = (h ^ (h >>> 10)) & (INTERN_SLOTS - 1);
  const hit = interned[slot];
  if (hit !== undefined && hit.length === len) {
    let i = 0;
    while (i < len && hit.charCodeAt(i) === buf[start + i]) i++;
    if (i === len) return hit;
  }
  const s = buf.toString('latin1', start, stop);
  interned[slot] = s;
  return s;
}

/** The string of bytes [start, stop) (UTF-8, ASCII on the fast path); leaves pos at stop. */
function strAt(start: number, stop: number): string {
  pos = stop;
  for (let i = start; i < stop; i++) {
    if (buf[i]! > 0x7f) return utf8.decode(buf.subarray(start, stop));
  }
  return buf.toString('latin1', start, stop);
}

/** A field tag: a one- or two-byte varint (every field here has a number below 2048). */
function tag(end: number): number {
  const b = buf[pos++]!;
  if (b < 0x80) return b;
  if (pos >= end) throw BAIL;
  const c = buf[pos++]!;
  if (c >= 0x80) throw BAIL;
  return (b & 0x7f) | (c << 7);
}

function label(end: number): Label {
  const m: Label = { name: '', value: '', prefix: false };
  while (pos < end) {
    const t = tag(end);
    if (t === 10) m.name = istr(end);
    else if (t === 18) m.value = istr(end);
    else if (t === 24) m.prefix = bool(end);
    else throw BAIL;
  }
  return m;
}

// Repeated fields start as one-element arrays (an empty array's first push allocates room for
// many more elements than a journal usually has).

function labelSet(end: number): { labels: Label[] } {
  let labels: Label[] | undefined;
  while (pos < end) {
    if (tag(end) !== 10) throw BAIL;
    const stop = delimited(end);
    const l = label(stop);
    if (labels === undefined) labels = [l];
    else labels.push(l);
  }
  return { labels: labels ?? [] };
}

function duration(end: number): Duration {
  const m: Duration = { seconds: 0n, nanos: 0 };
  while (pos < end) {
    const t = tag(end);
    if (t === 8) m.seconds = i64(end);
    else if (t === 16) m.nanos = u32(end) | 0;
    else throw BAIL;
  }
  return m;
}

function fragment(end: number): JournalSpec_Fragment {
  const m: JournalSpec_Fragment = {
    length: 0n,
    compression_codec: 0,
    stores: [],
    refresh_interval: undefined,
    retention: undefined,
    flush_interval: undefined,
    path_postfix_template: '',
  };
  while (pos < end) {
    const t = tag(end);
    if (t === 8) m.length = i64(end);
    else if (t === 16) m.compression_codec = u32(end) | 0;
    else if (t === 26) {
      const st = istr(end);
      if (m.stores.length === 0) m.stores = [st];
      else m.stores.push(st);
    }
    else if (t === 34) m.refresh_interval = duration(delimited(end));
    else if (t === 42) m.retention = duration(delimited(end));
    else if (t === 50) m.flush_interval = duration(delimited(end));
    else if (t === 58) m.path_postfix_template = istr(end);
    else throw BAIL;
  }
  return m;
}

function suspend(end: number): JournalSpec_Suspend {
  const m: JournalSpec_Suspend = { level: 0, offset: 0n };
  while (pos < end) {
    const t = tag(end);
    if (t === 8) m.level = u32(end) | 0;
    else if (t === 16) m.offset = i64(end);
    else throw BAIL;
  }
  return m;
}

function journalSpec(end: number): JournalSpec {
  const m: JournalSpec = {
    name: '',
    replication: 0,
    labels: undefined,
    fragment: undefined,
    flags: 0,
    max_append_rate: 0n,
    suspend: undefined,
  };
  while (pos < end) {
    const t = tag(end);
    if (t === 10) m.name = str(end);
    else if (t === 16) m.replication = u32(end) | 0;
    else if (t === 26) m.labels = labelSet(delimited(end));
    else if (t === 34) m.fragment = fragment(delimited(end));
    else if (t === 48) m.flags = u32(end);
    else if (t === 56) m.max_append_rate = i64(end);
    else if (t === 66) m.suspend = suspend(delimited(end));
    else throw BAIL;
  }
  return m;
}

function processId(end: number): ProcessSpec_ID {
  const m: ProcessSpec_ID = { zone: '', suffix: '' };
  while (pos < end) {
    const t = tag(end);
    if (t === 10) m.zone = istr(end);
    else if (t === 18) m.suffix = istr(end);
    else throw BAIL;
  }
  return m;
}

function route(end: number): Route {
  const m: Route = { members: [], primary: 0, endpoints: [] };
  while (pos < end) {
    const t = tag(end);
    if (t === 10) {
      const p = processId(delimited(end));
      if (m.members.length === 0) m.members = [p];
      else m.members.push(p);
    } else if (t === 16) m.primary = u32(end) | 0;
    else if (t === 26) {
      const e = istr(end);
      if (m.endpoints.length === 0) m.endpoints = [e];
      else m.endpoints.push(e);
    }
    else throw BAIL;
  }
  return m;
}

function journal(end: number): ListResponse_Journal {
  const m: ListResponse_Journal = { spec: undefined, mod_revision: 0n, route: undefined, create_revision: 0n };
  while (pos < end) {
    const t = tag(end);
    if (t === 10) m.spec = journalSpec(delimited(end));
    else if (t === 16) m.mod_revision = i64(end);
    else if (t === 26) m.route = route(delimited(end));
    else if (t === 32) m.create_revision = i64(end);
    else throw BAIL;
  }
  return m;
}

/**
 * The header (once a message, and carrying 64-bit etcd cluster and member ids) goes through the
 * generated decoder, on a reader positioned at it; the fast path goes on only when that decoder
 * stopped exactly at the header's end.
 */
function header(end: number): Header {
  const stop = delimited(end);
  const reader = new BinaryReader(buf);
  reader.pos = pos;
  const h = Header.decode(reader, stop - pos);
  if (reader.pos !== stop) throw BAIL;
  pos = stop;
  return h;
}

function listResponse(): ListResponse {
  const end = buf.length;
  const m: ListResponse = { status: 0, header: undefined, journals: [] };
  while (pos < end) {
    const t = tag(end);
    if (t === 26) m.journals.push(journal(delimited(end)));
    else if (t === 8) m.status = u32(end) | 0;
    else if (t === 18) m.header = header(end);
    else throw BAIL;
  }
  return m;
}

// ---- FragmentsResponse ----------------------------------------------------------------------

/** A fixed64 field (unsigned, as the generated `fixed64()` reads it). */
function fixed64(end: number): bigint {
  if (pos + 8 > end) throw BAIL;
  const v = buf.readBigUInt64LE(pos);
  pos += 8;
  return v;
}

/** A fixed32 field (unsigned, as the generated `fixed32()` reads it). */
function fixed32(end: number): number {
  if (pos + 4 > end) throw BAIL;
  const v = buf.readUInt32LE(pos);
  pos += 4;
  return v;
}

function sha1Sum(end: number): SHA1Sum {
  const m: SHA1Sum = { part1: 0n, part2: 0n, part3: 0 };
  while (pos < end) {
    const t = tag(end);
    if (t === 9) m.part1 = fixed64(end);
    else if (t === 17) m.part2 = fixed64(end);
    else if (t === 29) m.part3 = fixed32(end);
    else throw BAIL;
  }
  return m;
}

/** A 64-bit varint field whose value may be any int64 below 2^49 (offsets, times): not cached. */
function off64(end: number): bigint {
  let v = 0;
  let mul = 1;
  for (let i = 0; i < 7; i++) {
    if (pos >= end) throw BAIL;
    const b = buf[pos++]!;
    v += (b & 0x7f) * mul;
    if (b < 0x80) return BigInt(v);
    mul *= 128;
  }
  throw BAIL;
}

function fragmentSpec(end: number): Fragment {
  const m: Fragment = {
    journal: '',
    begin: 0n,
    end: 0n,
    sum: undefined,
    compression_codec: 0,
    backing_store: '',
    mod_time: 0n,
    path_postfix: '',
  };
  while (pos < end) {
    const t = tag(end);
    // The journal, store and postfix of a page's fragments are mostly the same few strings.
    if (t === 10) m.journal = istr(end);
    else if (t === 16) m.begin = off64(end);
    else if (t === 24) m.end = off64(end);
    else if (t === 34) m.sum = sha1Sum(delimited(end));
    else if (t === 40) m.compression_codec = u32(end) | 0;
    else if (t === 50) m.backing_store = istr(end);
    else if (t === 56) m.mod_time = off64(end);
    else if (t === 66) m.path_postfix = istr(end);
    else throw BAIL;
  }
  return m;
}

function listedFragment(end: number): FragmentsResponse__Fragment {
  const m: FragmentsResponse__Fragment = { spec: undefined, signed_url: '' };
  while (pos < end) {
    const t = tag(end);
    if (t === 10) m.spec = fragmentSpec(delimited(end));
    else if (t === 18) m.signed_url = str(end);
    else throw BAIL;
  }
  return m;
}

function fragmentsResponse(): FragmentsResponse {
  const end = buf.length;
  const m: FragmentsResponse = { status: 0, header: undefined, fragments: [], next_page_token: 0n };
  while (pos < end) {
    const t = tag(end);
    if (t === 26) m.fragments.push(listedFragment(delimited(end)));
    else if (t === 8) m.status = u32(end) | 0;
    else if (t === 18) m.header = header(end);
    else if (t === 32) m.next_page_token = off64(end);
    else throw BAIL;
  }
  return m;
}

/** Decodes a FragmentsResponse exactly as `FragmentsResponse.decode` does, faster on what brokers send. */
export function decodeFragmentsResponse(bytes: Uint8Array): FragmentsResponse {
  buf = asBuffer(bytes);
  pos = 0;
  try {
    return fragmentsResponse();
  } catch {
    return FragmentsResponse.decode(bytes);
  } finally {
    buf = EMPTY;
  }
}

// ---- the consumer's shard ListResponse ----------------------------------------------------------

function shardSource(end: number): ShardSpec_Source {
  const m: ShardSpec_Source = { journal: '', min_offset: 0n };
  while (pos < end) {
    const t = tag(end);
    // Shards of one app read the same few journals.
    if (t === 10) m.journal = istr(end);
    else if (t === 24) m.min_offset = i64(end);
    else throw BAIL;
  }
  return m;
}

function shardSpec(end: number): ShardSpec {
  const m: ShardSpec = {
    id: '',
    sources: [],
    recovery_log_prefix: '',
    hint_prefix: '',
    hint_backups: 0,
    max_txn_duration: undefined,
    min_txn_duration: undefined,
    disable: false,
    hot_standbys: 0,
    labels: undefined,
    disable_wait_for_ack: false,
    ring_buffer_size: 0,
    read_channel_size: 0,
  };
  while (pos < end) {
    const t = tag(end);
    if (t === 10) m.id = str(end);
    else if (t === 18) {
      const src = shardSource(delimited(end));
      if (m.sources.length === 0) m.sources = [src];
      else m.sources.push(src);
    } else if (t === 26) m.recovery_log_prefix = istr(end);
    else if (t === 34) m.hint_prefix = istr(end);
    else if (t === 40) m.hint_backups = u32(end) | 0;
    else if (t === 50) m.max_txn_duration = duration(delimited(end));
    else if (t === 58) m.min_txn_duration = duration(delimited(end));
    else if (t === 64) m.disable = bool(end);
    else if (t === 72) m.hot_standbys = u32(end);
    else if (t === 82) m.labels = labelSet(delimited(end));
    else if (t === 88) m.disable_wait_for_ack = bool(end);
    else if (t === 96) m.ring_buffer_size = u32(end);
    else if (t === 104) m.read_channel_size = u32(end);
    else throw BAIL;
  }
  return m;
}

function replicaStatus(end: number): ReplicaStatus {
  const m: ReplicaStatus = { code: 0, errors: [] };
  while (pos < end) {
    const t = tag(end);
    if (t === 8) m.code = u32(end) | 0;
    else if (t === 18) m.errors.push(str(end));
    else throw BAIL;
  }
  return m;
}

/** A listed shard, its spec decoded by `specOf` (the whole spec, or a table's fields of it). */
function listedShard<S>(end: number, specOf: (end: number) => S): Omit<ListResponse_Shard, 'spec'> & { spec: S | undefined } {
  const m: Omit<ListResponse_Shard, 'spec'> & { spec: S | undefined } = { spec: undefined, mod_revision: 0n, route: undefined, status: [], create_revision: 0n };
  while (pos < end) {
    const t = tag(end);
    if (t === 10) m.spec = specOf(delimited(end));
    else if (t === 16) m.mod_revision = i64(end);
    else if (t === 26) m.route = route(delimited(end));
    else if (t === 34) {
      const st = replicaStatus(delimited(end));
      if (m.status.length === 0) m.status = [st];
      else m.status.push(st);
    } else if (t === 40) m.create_revision = i64(end);
    else throw BAIL;
  }
  return m;
}

/** A shard ListResponse, each spec decoded by `specOf`. */
function shardListResponse<S>(specOf: (end: number) => S): Omit<ShardListResponse, 'shards'> & { shards: (Omit<ListResponse_Shard, 'spec'> & { spec: S | undefined })[] } {
  const end = buf.length;
  const m: Omit<ShardListResponse, 'shards'> & { shards: (Omit<ListResponse_Shard, 'spec'> & { spec: S | undefined })[] } = {
    status: 0,
    header: undefined,
    shards: [],
    extension: Buffer.alloc(0),
  };
  while (pos < end) {
    const t = tag(end);
    if (t === 26) m.shards.push(listedShard(delimited(end), specOf));
    else if (t === 8) m.status = u32(end) | 0;
    else if (t === 18) m.header = header(end);
    else if (t === 802) {
      const stop = delimited(end);
      m.extension = Buffer.from(buf.subarray(pos, stop));
      pos = stop;
    } else throw BAIL;
  }
  return m;
}

/** Decodes a consumer's shard ListResponse exactly as its generated `decode` does, faster on what consumers send. */
export function decodeShardListResponse(bytes: Uint8Array): ShardListResponse {
  buf = asBuffer(bytes);
  pos = 0;
  try {
    return shardListResponse(shardSpec);
  } catch {
    return ShardListResponse.decode(bytes);
  } finally {
    buf = EMPTY;
  }
}

// ---- the consumer's shard ListResponse, as a table shows it -------------------------------------

/** The spec fields a table of shards shows: ID, RF (disable, hot standbys) and label columns. */
export type ShardSummarySpec = Pick<ShardSpec, 'id' | 'disable' | 'hot_standbys' | 'labels'>;

/** A listed shard with only its spec's table fields (route, statuses and revisions as listed). */
export interface ShardSummary extends Omit<ListResponse_Shard, 'spec'> {
  spec: ShardSummarySpec | undefined;
}

/** A shard ListResponse with each spec cut down to its table fields. */
export interface ShardSummaryList extends Omit<ShardListResponse, 'shards'> {
  shards: ShardSummary[];
}

// Whether shardSummarySpec decodes the label set (a label column asks for it).
let wantLabels = false;

/**
 * The table fields of a ShardSpec; the other fields are stepped over by their lengths (sources,
 * prefixes, durations: most of a spec's bytes and objects), not decoded. A malformed field among
 * those skipped goes unnoticed, where the full decoder would hand the message to the generated one.
 */
function shardSummarySpec(end: number): ShardSummarySpec {
  const m: ShardSummarySpec = { id: '', disable: false, hot_standbys: 0, labels: undefined };
  while (pos < end) {
    const t = tag(end);
    if (t === 10) m.id = str(end);
    else if (t === 64) m.disable = bool(end);
    else if (t === 72) m.hot_standbys = u32(end);
    else if (t === 82) {
      if (wantLabels) m.labels = labelSet(delimited(end));
      else {
        // Present but not decoded: an empty set, as a spec without labels would have.
        pos = delimited(end);
        m.labels = EMPTY_LABELS;
      }
    } else if (t === 18 || t === 26 || t === 34 || t === 50 || t === 58) pos = delimited(end);
    else if (t === 40 || t === 88 || t === 96 || t === 104) u32(end);
    else throw BAIL;
  }
  return m;
}
const EMPTY_LABELS: { labels: Label[] } = Object.freeze({ labels: Object.freeze([]) as unknown as Label[] });

/** Cuts a fully decoded listing down to its table fields (the fallback of decodeShardSummaries). */
export function summarizeShardList(full: ShardListResponse, labels: boolean): ShardSummaryList {
  return {
    ...full,
    shards: full.shards.map((s) => ({
      ...s,
      spec: s.spec && {
        id: s.spec.id,
        disable: s.spec.disable,
        hot_standbys: s.spec.hot_standbys,
        labels: s.spec.labels && (labels ? s.spec.labels : EMPTY_LABELS),
      },
    })),
  };
}

/**
 * Decodes a consumer's shard ListResponse for a table: as decodeShardListResponse, but each spec
 * keeps only ShardSummarySpec's fields, and its labels only when `labels` is set (else a spec with
 * labels has an empty set). A listing of ten thousand shards decodes in about a third of the time
 * and makes far fewer objects; the rest of each spec is never read.
 */
export function decodeShardSummaries(bytes: Uint8Array, labels: boolean): ShardSummaryList {
  buf = asBuffer(bytes);
  pos = 0;
  wantLabels = labels;
  try {
    return shardListResponse(shardSummarySpec);
  } catch {
    return summarizeShardList(ShardListResponse.decode(bytes), labels);
  } finally {
    buf = EMPTY;
  }
}

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Decodes a ListResponse exactly as `ListResponse.decode` does, faster on what brokers send. */
export function decodeListResponse(bytes: Uint8Array): ListResponse {
  buf = asBuffer(bytes);
  pos = 0;
  try {
    return listResponse();
  } catch {
    // Anything the fast path does not take (or a fault in it) gets the generated decoder,
    // which also produces its own errors for malformed input.
    return ListResponse.decode(bytes);
  } finally {
    buf = EMPTY;
  }
}

const EMPTY = Buffer.alloc(0);
