// The hot messages of the append path, encoded and decoded by hand.
//
// An append's content crosses the broker in 64 KiB-ish messages: AppendRequests from the client
// at the primary, ReplicateRequests from the primary at each replica. The generated decoders copy
// every `content` field out of the received message (Buffer.from over the reader's view), and the
// generated encoder grows a zero-filled scratch buffer by doubling and then copies the result out
// of it, once per replica. Here:
//
// - a content-only message (what every message after the first of an Append or Replicate stream
//   is) decodes with `content` as a subarray of the received buffer: no copy. The buffer is
//   grpc-js's own for that one message, not reused, so the view stays valid for as long as
//   someone holds it. Any other message (the first one, a proposal, unknown fields, a field
//   repeated, anything odd) goes to the generated decoder whole, so the result is the generated
//   decoder's for every input, only faster on the common one.
// - `encodeReplicateContent` gives a content message to replicas as the generated encoder does
//   (content, then content_delta when non-zero), in one buffer of exactly its size. The primary's
//   Replicate streams write the same bytes in pieces, without copying the content
//   (replicate-client.ts).
import {
  AppendRequest,
  ReplicateRequest,
  JournalService,
} from '../../lib/protocol/gen/broker/protocol.js';
import { putVarint, varintSize } from '../../lib/protocol/varint.js';


/**
 * A varint starting at `pos` that ends before `end` and fits in 53 bits (seven bytes hold 49),
 * as [value, next position]; undefined when it does not.
 */
function readVarint(buf: Buffer, pos: number, end: number): [number, number] | undefined {
  let v = 0;
  let mul = 1;
  for (let i = 0; i < 7 && pos < end; i++) {
    const b = buf[pos++]!;
    v += (b & 0x7f) * mul;
    if (b < 0x80) return [v, pos];
    mul *= 128;
  }
  return undefined;
}

const CONTENT_TAG = (4 << 3) | 2; // field 4 (content), length-delimited: in both messages
const DELTA_TAG = (5 << 3) | 0; // ReplicateRequest field 5 (content_delta), varint

/**
 * The content field of a message holding nothing but that field (once) and, when `withDelta`,
 * optionally content_delta (once, after it or before it); undefined for any other message.
 */
function contentOnly(buf: Buffer, withDelta: boolean): { content: Buffer; delta: number } | undefined {
  let content: Buffer | undefined;
  let delta: number | undefined;
  let pos = 0;
  const end = buf.length;
  while (pos < end) {
    const t = buf[pos++]!;
    if (t === CONTENT_TAG && content === undefined) {
      const len = readVarint(buf, pos, end);
      if (!len || len[1] + len[0] > end) return undefined;
      content = buf.subarray(len[1], len[1] + len[0]);
      pos = len[1] + len[0];
    } else if (withDelta && t === DELTA_TAG && delta === undefined) {
      const v = readVarint(buf, pos, end);
      if (!v) return undefined;
      [delta, pos] = v;
    } else return undefined;
  }
  if (content === undefined) return undefined;
  return { content, delta: delta ?? 0 };
}

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Decodes an AppendRequest as `AppendRequest.decode` does; a content message without a copy. */
export function decodeAppendRequest(bytes: Uint8Array): AppendRequest {
  const c = contentOnly(asBuffer(bytes), false);
  if (!c) return AppendRequest.decode(bytes);
  return {
    header: undefined,
    journal: '',
    do_not_proxy: false,
    content: c.content,
    offset: 0n,
    check_registers: undefined,
    union_registers: undefined,
    subtract_registers: undefined,
    suspend: 0,
    min_etcd_revision: 0n,
  };
}

/** Decodes a ReplicateRequest as `ReplicateRequest.decode` does; a content message without a copy. */
export function decodeReplicateRequest(bytes: Uint8Array): ReplicateRequest {
  const c = contentOnly(asBuffer(bytes), true);
  if (!c) return ReplicateRequest.decode(bytes);
  return {
    header: undefined,
    deprecated_journal: '',
    proposal: undefined,
    content: c.content,
    content_delta: BigInt(c.delta),
    acknowledge: false,
    registers: undefined,
  };
}

/** The ReplicateRequest {content, content_delta}, encoded (as the generated encoder would). */
export function encodeReplicateContent(content: Uint8Array, delta: number): Buffer {
  if (!Number.isSafeInteger(delta) || delta < 0) throw new RangeError(`content delta ${delta} out of range`);
  const size = (content.length > 0 ? 1 + varintSize(content.length) + content.length : 0) + (delta !== 0 ? 1 + varintSize(delta) : 0);
  const out = Buffer.allocUnsafe(size);
  let pos = 0;
  if (content.length > 0) {
    out[pos++] = CONTENT_TAG;
    pos = putVarint(out, pos, content.length);
    out.set(content, pos);
    pos += content.length;
  }
  if (delta !== 0) {
    out[pos++] = DELTA_TAG;
    pos = putVarint(out, pos, delta);
  }
  return out;
}

/** Any ReplicateRequest, encoded by the generated encoder. */
export function encodeReplicateRequest(r: Partial<ReplicateRequest>): Buffer {
  return Buffer.from(ReplicateRequest.encode(ReplicateRequest.fromPartial(r)).finish());
}

/** The protocol.Journal service definition with the decoders above for Append and Replicate. */
export const FastJournalService: typeof JournalService = {
  ...JournalService,
  append: { ...JournalService.append, requestDeserialize: (b: Buffer) => decodeAppendRequest(b) },
  replicate: { ...JournalService.replicate, requestDeserialize: (b: Buffer) => decodeReplicateRequest(b) },
};
