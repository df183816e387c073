// Snappy compression in the framing format that SnappyFramedDecoder reads: a stream identifier
// chunk, then one data chunk per (at most) 64 KiB of input, each carrying the masked CRC-32C of
// its uncompressed bytes. A chunk whose block would not save at least 1/8 of its size is written
// uncompressed (chunk type 0x01), as the reference encoders do.
//
// The block compressor is a plain greedy LZ77: a hash table over 4-byte sequences finds an earlier
// occurrence, matches are extended forward and emitted as copies, everything else as literals.
// It compresses less tightly than libsnappy but its output is valid Snappy for any decoder.
import { Transform, type TransformCallback } from 'node:stream';
import { maskedCrc32c } from './snappy.js';

/** Uncompressed bytes per framed data chunk (the format's maximum). */
const CHUNK_MAX = 65536;
const HASH_BITS = 14;
const MIN_MATCH = 4;

/** The stream identifier chunk that opens every framed stream. */
export const SNAPPY_STREAM_IDENTIFIER = Buffer.from([0xff, 0x06, 0x00, 0x00, 0x73, 0x4e, 0x61, 0x50, 0x70, 0x59]);

function hash4(v: number): number {
  return Math.imul(v, 0x1e35a7bd) >>> (32 - HASH_BITS);
}

function load32(b: Uint8Array, i: number): number {
  return (b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16) | (b[i + 3]! << 24)) >>> 0;
}

/** Worst-case compressed size of an `n`-byte block. */
function maxBlockLength(n: number): number {
  return 32 + n + Math.ceil(n / 6);
}

/**
 * Compresses `src` into one raw Snappy block (varint length, literals and copies). Offsets are
 * kept below 64 KiB, so inputs larger than that still decode but find no far matches.
 */
export function encodeSnappyBlock(src: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(maxBlockLength(src.length));
  let o = 0;
  // Uncompressed length as a little-endian base-128 varint.
  let n = src.length;
  while (n >= 0x80) {
    out[o++] = (n & 0x7f) | 0x80;
    n = Math.floor(n / 128);
  }
  out[o++] = n;

  const emitLiteral = (from: number, to: number): void => {
    let len = to - from;
    while (len > 0) {
      // A literal element holds at most 2^32 bytes; we cut at 64 KiB to keep tags short.
      const take = Math.min(len, 65536);
      const l = take - 1;
      if (l < 60) out[o++] = l << 2;
      else if (l < 0x100) {
        out[o++] = 60 << 2;
        out[o++] = l;
      } else {
        out[o++] = 61 << 2;
        out[o++] = l & 0xff;
        out[o++] = l >>> 8;
      }
      out.set(src.subarray(from, from + take), o);
      o += take;
      from += take;
      len -= take;
    }
  };
  const emitCopy = (offset: number, len: number): void => {
    while (len > 0) {
      // Copy-2 elements carry up to 64 bytes; leave at least 4 for a final element.
      const take = len > 64 ? (len - 64 < 4 ? 60 : 64) : len;
      if (take < 12 && take >= 4 && offset < 2048) {
        out[o++] = 1 | ((take - 4) << 2) | ((offset >>> 8) << 5);
        out[o++] = offset & 0xff;
      } else {
        out[o++] = 2 | ((take - 1) << 2);
        out[o++] = offset & 0xff;
        out[o++] = offset >>> 8;
      }
      len -= take;
    }
  };

  const end = src.length;
  if (end < MIN_MATCH + 1) {
    emitLiteral(0, end);
    return Buffer.from(out.subarray(0, o));
  }
  const table = new Int32Array(1 << HASH_BITS).fill(-1);
  let lit = 0; // start of pending literal bytes
  let i = 0;
  const limit = end - MIN_MATCH;
  while (i <= limit) {
    const v = load32(src, i);
    const h = hash4(v);
    const cand = table[h]!;
    table[h] = i;
    if (cand >= 0 && i - cand < 65536 && load32(src, cand) === v) {
      let len = MIN_MATCH;
      while (i + len < end && src[cand + len] === src[i + len]) len++;
      if (lit < i) emitLiteral(lit, i);
      emitCopy(i - cand, len);
      // Index a couple of positions inside the match so later data can refer to it.
      const stop = Math.min(i + len, limit + 1);
      for (let k = i + 1; k < stop; k += 3) table[hash4(load32(src, k))] = k;
      i += len;
      lit = i;
    } else {
      i++;
    }
  }
  if (lit < end) emitLiteral(lit, end);
  return Buffer.from(out.subarray(0, o));
}

/** One framed data chunk (header, masked CRC, compressed or stored payload) for `data`. */
export function snappyFramedChunk(data: Uint8Array): Buffer {
  const block = encodeSnappyBlock(data);
  const compressed = block.length < data.length - (data.length >>> 3);
  const payload = compressed ? block : data;
  const len = payload.length + 4;
  const chunk = Buffer.allocUnsafe(4 + len);
  chunk[0] = compressed ? 0x00 : 0x01;
  chunk[1] = len & 0xff;
  chunk[2] = (len >>> 8) & 0xff;
  chunk[3] = (len >>> 16) & 0xff;
  chunk.writeUInt32LE(maskedCrc32c(data), 4);
  chunk.set(payload, 8);
  return chunk;
}

/** A Transform writing its input in the Snappy framing format. */
export class SnappyFramedEncoder extends Transform {
  private pending: Buffer[] = [];
  private pendingLength = 0;
  private started = false;

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.start();
    this.pending.push(chunk);
    this.pendingLength += chunk.length;
    if (this.pendingLength >= CHUNK_MAX) {
      const all = Buffer.concat(this.pending, this.pendingLength);
      let at = 0;
      while (all.length - at >= CHUNK_MAX) {
        this.push(snappyFramedChunk(all.subarray(at, at + CHUNK_MAX)));
        at += CHUNK_MAX;
      }
      const rest = all.subarray(at);
      this.pending = rest.length ? [Buffer.from(rest)] : [];
      this.pendingLength = rest.length;
    }
    cb();
  }

  override _flush(cb: TransformCallback): void {
    this.start();
    if (this.pendingLength > 0) this.push(snappyFramedChunk(Buffer.concat(this.pending, this.pendingLength)));
    this.pending = [];
    this.pendingLength = 0;
    cb();
  }

  private start(): void {
    if (!this.started) {
      this.started = true;
      this.push(SNAPPY_STREAM_IDENTIFIER);
    }
  }
}
