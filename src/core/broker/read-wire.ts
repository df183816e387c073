// Read responses on the wire. Content chunks make up nearly every byte a Read sends, so they are
// encoded here by hand: one buffer holding the message's few header bytes and then the content,
// which the caller reads straight into it (from a spool file) or copies in once (from a stored
// fragment). The server's serializer for Read passes such a buffer through untouched and encodes
// every other response (metadata, status) with the generated code, as before.
//
// The bytes are exactly what the generated encoder writes for `ReadResponse{offset, content}`:
// field 3 (offset, int64 varint) unless it is 0, then field 7 (content, length-delimited); a
// test checks the two agree.
//
// Message buffers are recycled: the reader hands each one back (recycleContent) from its write
// callback, which grpc-js calls once the message has gone out to HTTP/2, long after it copied the
// bytes into its own frame. Allocating a fresh 32 KiB buffer per chunk instead makes V8 count
// every byte read as new external memory, and a bulk read then spends a good part of its time in
// full garbage collections. test/unit/core/broker/read-recycle.test.ts checks grpc-js still
// calls back only once it is done with the bytes. GAZCTL_READ_RECYCLE=0 allocates a fresh
// buffer per message instead (to measure what the recycling buys).

import { ReadResponse } from '../../lib/protocol/gen/broker/protocol.js';
import { putVarint, varintSize } from '../../lib/protocol/varint.js';

/** A Read response message: one to encode, or a content chunk already encoded. */
export type ReadWireMessage = ReadResponse | Buffer;

const TAG_OFFSET = 0x18; // field 3, varint
const TAG_CONTENT = 0x3a; // field 7, length-delimited

/** Room of a recycled buffer: an upstream-sized chunk (32 736 bytes) with its header fits. */
const SLOT_BYTES = 32 * 1024;
/** Recycled buffers kept; beyond that they are left to the garbage collector. */
const POOL_MAX = 64;
const pool: ArrayBuffer[] = [];
/**
 * Messages on pooled buffers not given back yet. Keyed by the message, not its memory, so that a
 * message given back twice cannot hand over memory that another message holds by then.
 */
const lent = new WeakSet<Buffer>();

/** Whether message buffers are recycled (GAZCTL_READ_RECYCLE=0 turns it off). */
const RECYCLE = process.env.GAZCTL_READ_RECYCLE !== '0';

function messageBuffer(size: number): Buffer {
  if (size > SLOT_BYTES || !RECYCLE) return Buffer.allocUnsafe(size);
  const msg = Buffer.from(pool.pop() ?? new ArrayBuffer(SLOT_BYTES), 0, size);
  lent.add(msg);
  return msg;
}

/**
 * Gives the buffer of a message from {@link encodeContentInto} or {@link encodeContent} back for
 * reuse. Only once nothing will read the message any more (it has been sent or dropped).
 */
export function recycleContent(msg: Buffer): void {
  if (!lent.delete(msg)) return;
  if (pool.length < POOL_MAX) pool.push(msg.buffer as ArrayBuffer);
}


/** Bytes before the content of a chunk at `offset` carrying `length` content bytes. */
function prefixLength(offset: number, length: number): number {
  return (offset === 0 ? 0 : 1 + varintSize(offset)) + 1 + varintSize(length);
}

function writePrefix(dst: Buffer, offset: number, length: number): number {
  let at = 0;
  if (offset !== 0) {
    dst[at++] = TAG_OFFSET;
    at = putVarint(dst, at, offset);
  }
  dst[at++] = TAG_CONTENT;
  return putVarint(dst, at, length);
}

/** Offsets the number arithmetic here encodes exactly; others go through the generated encoder. */
function plainOffset(offset: bigint): boolean {
  return offset >= 0n && offset <= MAX_SAFE;
}
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

function generated(offset: bigint, content: Uint8Array): Buffer {
  return serializeReadResponse(ReadResponse.fromPartial({ offset, content: Buffer.from(content.buffer, content.byteOffset, content.byteLength) }));
}

/**
 * The encoded `ReadResponse{offset, content}` whose content `fill(dst, at, length)` writes into
 * `dst` from `at` on, returning how many bytes it wrote (up to `length`). Returns undefined when
 * it wrote none. `length` must be positive.
 */
export function encodeContentInto(offset: bigint, length: number, fill: (dst: Buffer, at: number, length: number) => number): Buffer | undefined {
  if (!plainOffset(offset)) {
    const tmp = Buffer.allocUnsafe(length);
    const n = fill(tmp, 0, length);
    return n > 0 ? generated(offset, tmp.subarray(0, n)) : undefined;
  }
  const o = Number(offset);
  const at = prefixLength(o, length);
  const msg = messageBuffer(at + length);
  let got: number;
  try {
    got = fill(msg, at, length);
  } catch (e) {
    recycleContent(msg);
    throw e;
  }
  if (got === length) {
    writePrefix(msg, o, length);
    return msg;
  }
  // Short read: the length prefix may be shorter too, so encode the bytes read afresh.
  const short = got > 0 ? encodeContent(offset, msg.subarray(at, at + got)) : undefined;
  recycleContent(msg);
  return short;
}

/** The encoded `ReadResponse{offset, content}` (content not empty), content copied in once. */
export function encodeContent(offset: bigint, content: Uint8Array): Buffer {
  if (!plainOffset(offset)) return generated(offset, content);
  const o = Number(offset);
  const at = prefixLength(o, content.length);
  const msg = messageBuffer(at + content.length);
  writePrefix(msg, o, content.length);
  msg.set(content, at);
  return msg;
}

/** The Read method's response serializer: encoded chunks as they are, other responses encoded. */
export function serializeReadResponse(m: ReadWireMessage): Buffer {
  if (Buffer.isBuffer(m)) return m;
  const u = ReadResponse.encode(m).finish();
  return Buffer.from(u.buffer, u.byteOffset, u.byteLength);
}
