// A hand-written encoder for the journal ApplyRequest, the message `journals apply` sends in
// bulk (a hundred or more full specs a request, a hundred requests for a large hierarchy).
//
// The generated encoder forks a writer per sub-message, joins the chunks back and copies the
// result into a Buffer at the end; this one measures the whole message first (every
// sub-message's length, in the order they are met) and then writes it in one pass into one
// Buffer of exactly that size. It writes the bytes the generated encoder writes: fields in
// field-number order, zero values (0, "", false, empty lists, 0n) left out, set sub-messages
// written even when empty, negative int32 values as ten-byte varints, int64 values as their
// 64-bit two's complement. Anything it does not expect (a value of the wrong type, an int32 or
// uint32 out of range or not an integer, an int64 outside 64 bits) sends the whole request to
// the generated encoder instead, which then encodes it or throws its own error, so the result is
// the generated encoder's for every input. test/unit/lib/protocol/fast-encode.test.ts compares
// the two over many random requests.
import {
  ApplyRequest,
  type ApplyRequest_Change,
  type JournalSpec,
  type JournalSpec_Fragment,
  type JournalSpec_Suspend,
  type Label,
  type LabelSet,
} from './gen/broker/protocol.js';
import type { Duration } from './gen/google/protobuf/duration.js';

/** Thrown inside the fast path when the request needs the generated encoder. */
const BAIL: unique symbol = Symbol('fast-encode: use the generated encoder');

// Encoding is synchronous, so module state is safe: the lengths of the sub-messages and strings
// in the order the measuring pass met them (the writing pass meets them in the same order), and
// the output.
let lens = new Int32Array(1024);
let li = 0;
let out: Buffer = Buffer.alloc(0);
let pos = 0;

const TWO_32 = 4294967296;
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const MIN_INT64 = -(2n ** 63n);
const MAX_INT64 = 2n ** 63n - 1n;

// ---- sizes -------------------------------------------------------------------------------------

/** Bytes of a varint of an unsigned 32-bit value. */
function varint32Len(v: number): number {
  return v < 0x80 ? 1 : v < 0x4000 ? 2 : v < 0x200000 ? 3 : v < 0x10000000 ? 4 : 5;
}

/** Bytes of an int32 field value (negative ones are sign-extended to ten bytes). */
function int32Len(v: unknown): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v > 0x7fffffff || v < -0x80000000) throw BAIL;
  return v < 0 ? 10 : varint32Len(v);
}

function uint32Len(v: unknown): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 0xffffffff) throw BAIL;
  return varint32Len(v);
}

/** Bytes of an int64 field value. */
function int64Len(v: unknown): number {
  if (typeof v !== 'bigint') throw BAIL;
  if (v >= 0n && v <= MAX_SAFE) {
    let n = Number(v);
    let l = 1;
    while (n >= 128) {
      n = Math.floor(n / 128);
      l++;
    }
    return l;
  }
  if (v < MIN_INT64 || v > MAX_INT64) throw BAIL;
  if (v < 0n) return 10;
  let l = 1;
  for (let n = v; n >= 128n; n >>= 7n) l++;
  return l;
}

/** UTF-8 length of a string (its length when it is ASCII). */
function strLen(s: unknown): number {
  if (typeof s !== 'string') throw BAIL;
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 0x7f) return Buffer.byteLength(s, 'utf8');
  return s.length;
}

/** A length-delimited field of `len` bytes, tag included (every tag here is one byte). */
const delimitedLen = (len: number) => 1 + varint32Len(len) + len;

/** A string field's size; its UTF-8 length is kept for the writing pass, like a sub-message's. */
function strField(s: unknown): number {
  const len = strLen(s);
  lens[reserve()] = len;
  return delimitedLen(len);
}

function isObject(v: unknown): v is object {
  return typeof v === 'object' && v !== null;
}

/** Reserves the slot of a sub-message's length; the caller fills it in once it is known. */
function reserve(): number {
  if (li === lens.length) {
    const more = new Int32Array(lens.length * 2);
    more.set(lens);
    lens = more;
  }
  return li++;
}

function sizeLabel(m: Label): number {
  const slot = reserve();
  let n = 0;
  if (m.name !== '') n += strField(m.name);
  if (m.value !== '') n += strField(m.value);
  if (m.prefix !== false) {
    if (m.prefix !== true) throw BAIL;
    n += 2;
  }
  lens[slot] = n;
  return n;
}

function sizeLabelSet(m: LabelSet): number {
  if (!isObject(m) || !Array.isArray(m.labels)) throw BAIL;
  const slot = reserve();
  let n = 0;
  for (const l of m.labels) {
    if (!isObject(l)) throw BAIL;
    n += delimitedLen(sizeLabel(l));
  }
  lens[slot] = n;
  return n;
}

function sizeDuration(m: Duration): number {
  if (!isObject(m)) throw BAIL;
  const slot = reserve();
  let n = 0;
  if (m.seconds !== 0n) n += 1 + int64Len(m.seconds);
  if (m.nanos !== 0) n += 1 + int32Len(m.nanos);
  lens[slot] = n;
  return n;
}

function sizeFragment(m: JournalSpec_Fragment): number {
  if (!isObject(m) || !Array.isArray(m.stores)) throw BAIL;
  const slot = reserve();
  let n = 0;
  if (m.length !== 0n) n += 1 + int64Len(m.length);
  if (m.compression_codec !== 0) n += 1 + int32Len(m.compression_codec);
  for (const s of m.stores) n += strField(s);
  if (m.refresh_interval !== undefined) n += delimitedLen(sizeDuration(m.refresh_interval));
  if (m.retention !== undefined) n += delimitedLen(sizeDuration(m.retention));
  if (m.flush_interval !== undefined) n += delimitedLen(sizeDuration(m.flush_interval));
  if (m.path_postfix_template !== '') n += strField(m.path_postfix_template);
  lens[slot] = n;
  return n;
}

function sizeSuspend(m: JournalSpec_Suspend): number {
  if (!isObject(m)) throw BAIL;
  const slot = reserve();
  let n = 0;
  if (m.level !== 0) n += 1 + int32Len(m.level);
  if (m.offset !== 0n) n += 1 + int64Len(m.offset);
  lens[slot] = n;
  return n;
}

function sizeSpec(m: JournalSpec): number {
  if (!isObject(m)) throw BAIL;
  const slot = reserve();
  let n = 0;
  if (m.name !== '') n += strField(m.name);
  if (m.replication !== 0) n += 1 + int32Len(m.replication);
  if (m.labels !== undefined) n += delimitedLen(sizeLabelSet(m.labels));
  if (m.fragment !== undefined) n += delimitedLen(sizeFragment(m.fragment));
  if (m.flags !== 0) n += 1 + uint32Len(m.flags);
  if (m.max_append_rate !== 0n) n += 1 + int64Len(m.max_append_rate);
  if (m.suspend !== undefined) n += delimitedLen(sizeSuspend(m.suspend));
  lens[slot] = n;
  return n;
}

function sizeChange(m: ApplyRequest_Change): number {
  if (!isObject(m)) throw BAIL;
  const slot = reserve();
  let n = 0;
  if (m.expect_mod_revision !== 0n) n += 1 + int64Len(m.expect_mod_revision);
  if (m.upsert !== undefined) n += delimitedLen(sizeSpec(m.upsert));
  if (m.delete !== '') n += strField(m.delete);
  lens[slot] = n;
  return n;
}

// ---- writing -----------------------------------------------------------------------------------

function putVarint32(v: number): void {
  while (v >= 0x80) {
    out[pos++] = (v & 0x7f) | 0x80;
    v >>>= 7;
  }
  out[pos++] = v;
}

/** A 64-bit varint from its low and high 32 bits (both unsigned). */
function putVarint64(lo: number, hi: number): void {
  while (hi !== 0 || lo >= 0x80) {
    out[pos++] = (lo & 0x7f) | 0x80;
    lo = ((lo >>> 7) | (hi << 25)) >>> 0;
    hi >>>= 7;
  }
  out[pos++] = lo;
}

function putInt32(v: number): void {
  if (v >= 0) putVarint32(v);
  else putVarint64(v >>> 0, 0xffffffff);
}

function putInt64(v: bigint): void {
  if (v >= 0n && v <= MAX_SAFE) {
    const n = Number(v);
    putVarint64(n % TWO_32, Math.floor(n / TWO_32));
    return;
  }
  const u = BigInt.asUintN(64, v);
  putVarint64(Number(u & 0xffffffffn), Number(u >> 32n));
}

function putString(tag: number, s: string): void {
  out[pos++] = tag;
  const len = lens[li++]!;
  putVarint32(len);
  if (len === s.length) {
    // ASCII (a UTF-8 length equal to the UTF-16 length means no character above 0x7f).
    if (len < 64) for (let i = 0; i < len; i++) out[pos + i] = s.charCodeAt(i);
    else out.write(s, pos, len, 'latin1');
  } else out.write(s, pos, len, 'utf8');
  pos += len;
}

/** The tag and length of the next sub-message (its length from the measuring pass). */
function putHeader(tag: number): void {
  out[pos++] = tag;
  putVarint32(lens[li++]!);
}

function putLabel(m: Label): void {
  li++; // its own length was written by putHeader
  if (m.name !== '') putString(10, m.name);
  if (m.value !== '') putString(18, m.value);
  if (m.prefix !== false) {
    out[pos++] = 24;
    out[pos++] = 1;
  }
}

function putDuration(tag: number, m: Duration): void {
  putHeader(tag);
  if (m.seconds !== 0n) {
    out[pos++] = 8;
    putInt64(m.seconds);
  }
  if (m.nanos !== 0) {
    out[pos++] = 16;
    putInt32(m.nanos);
  }
}

function putFragment(m: JournalSpec_Fragment): void {
  putHeader(34);
  if (m.length !== 0n) {
    out[pos++] = 8;
    putInt64(m.length);
  }
  if (m.compression_codec !== 0) {
    out[pos++] = 16;
    putInt32(m.compression_codec);
  }
  for (const s of m.stores) putString(26, s);
  if (m.refresh_interval !== undefined) putDuration(34, m.refresh_interval);
  if (m.retention !== undefined) putDuration(42, m.retention);
  if (m.flush_interval !== undefined) putDuration(50, m.flush_interval);
  if (m.path_postfix_template !== '') putString(58, m.path_postfix_template);
}

function putSpec(m: JournalSpec): void {
  putHeader(18);
  if (m.name !== '') putString(10, m.name);
  if (m.replication !== 0) {
    out[pos++] = 16;
    putInt32(m.replication);
  }
  if (m.labels !== undefined) {
    putHeader(26);
    for (const l of m.labels.labels) {
      out[pos++] = 10;
      putVarint32(lens[li]!);
      putLabel(l);
    }
  }
  if (m.fragment !== undefined) putFragment(m.fragment);
  if (m.flags !== 0) {
    out[pos++] = 48;
    putVarint32(m.flags);
  }
  if (m.max_append_rate !== 0n) {
    out[pos++] = 56;
    putInt64(m.max_append_rate);
  }
  if (m.suspend !== undefined) {
    putHeader(66);
    const s = m.suspend;
    if (s.level !== 0) {
      out[pos++] = 8;
      putInt32(s.level);
    }
    if (s.offset !== 0n) {
      out[pos++] = 16;
      putInt64(s.offset);
    }
  }
}

function putChange(m: ApplyRequest_Change): void {
  putHeader(10);
  if (m.expect_mod_revision !== 0n) {
    out[pos++] = 8;
    putInt64(m.expect_mod_revision);
  }
  if (m.upsert !== undefined) putSpec(m.upsert);
  if (m.delete !== '') putString(26, m.delete);
}

// ---- entry points ------------------------------------------------------------------------------

/**
 * The request's encoding by the fast path, or undefined when the request is one the fast path
 * leaves to the generated encoder (see the top of this file).
 */
export function encodeApplyRequestFast(req: ApplyRequest): Buffer | undefined {
  li = 0;
  try {
    if (!isObject(req) || !Array.isArray(req.changes)) return undefined;
    let total = 0;
    for (const c of req.changes) total += delimitedLen(sizeChange(c));
    const measured = li;
    const bytes = Buffer.allocUnsafe(total);
    out = bytes;
    pos = 0;
    li = 0;
    for (const c of req.changes) putChange(c);
    // Both passes must have met the same fields and written exactly the measured bytes.
    if (pos !== total || li !== measured) return undefined;
    return bytes;
  } catch {
    // BAIL, or anything unexpected on the way (a getter that throws, say): the generated
    // encoder then encodes the request or reports the problem its own way.
    return undefined;
  } finally {
    out = EMPTY;
  }
}

/** Encodes a journal ApplyRequest to the bytes `ApplyRequest.encode` produces. */
export function encodeApplyRequest(req: ApplyRequest): Buffer {
  return encodeApplyRequestFast(req) ?? Buffer.from(ApplyRequest.encode(req).finish());
}

const EMPTY = Buffer.alloc(0);
