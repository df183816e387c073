// Snappy decompression for fragment files written with the SNAPPY codec: the framing format
// (stream identifier chunk "sNaPpY"; data chunks of at most 64 KiB of content, each either a raw
// snappy block (type 0x00) or stored bytes (0x01), prefixed by the masked CRC-32C of the
// content; skippable chunks 0x80-0xfe; 0x02-0x7f reserved and fatal) around the raw snappy
// block format. The framing is ours; blocks and checksums are the native packages' (backends.ts).
import { Transform, type TransformCallback } from 'node:stream';

import { crc32c as crc32cImpl, snappyBlocks } from './backends.js';

export class SnappyError extends Error {
  constructor(message: string) {
    super(`snappy: ${message}`);
    this.name = 'SnappyError';
  }
}

/** Largest uncompressed data chunk the framing format allows. */
export const SNAPPY_CHUNK_MAX = 65536;

/**
 * Decodes one raw Snappy block (varint length, then literals and back-references) with the
 * block codec in use (backends.ts). The length is checked against `maxLength` before anything
 * is allocated, so a corrupt header cannot ask for gigabytes.
 */
export function decodeSnappyBlock(src: Uint8Array, maxLength = 0xffffffff): Buffer {
  let pos = 0;
  let n = 0;
  let shift = 0;
  for (;;) {
    if (pos >= src.length || shift > 28) throw new SnappyError('corrupt block length');
    const b = src[pos++]!;
    n += (b & 0x7f) * 2 ** shift;
    if (b < 0x80) break;
    shift += 7;
  }
  if (n > maxLength) throw new SnappyError(`block of ${n} bytes exceeds ${maxLength}`);
  let out: Buffer;
  try {
    out = snappyBlocks().uncompress(src);
  } catch (e) {
    throw new SnappyError(`corrupt block (${e instanceof Error ? e.message : String(e)})`);
  }
  if (out.length !== n) throw new SnappyError(`block decoded to ${out.length} bytes, header said ${n}`);
  return out;
}

/** CRC-32C (Castagnoli) of `buf`. */
export function crc32c(buf: Uint8Array): number {
  return crc32cImpl(buf, 0);
}

/** The framing format's masked checksum of `data`. */
export function maskedCrc32c(data: Uint8Array): number {
  const c = crc32cImpl(data, 0);
  return ((((c >>> 15) | (c << 17)) >>> 0) + 0xa282ead8) >>> 0;
}

const STREAM_ID = Buffer.from('sNaPpY', 'latin1');
const MAX_CHUNK = 16 * 1024 * 1024 + 4;

/** A Transform decoding the Snappy framing format into plain bytes. */
export class SnappyFramedDecoder extends Transform {
  private pending: Buffer | null = null;
  private sawStreamId = false;

  constructor(private readonly verifyChecksums = true) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    const out: Buffer[] = [];
    try {
      let buf = chunk;
      const p = this.pending;
      this.pending = null;
      if (p) {
        if (p.length < 4) buf = Buffer.concat([p, chunk]);
        else {
          // Complete the chunk begun in an earlier write from the head of this one, copying only
          // its own bytes (not the whole write).
          const len = p[1]! | (p[2]! << 8) | (p[3]! << 16);
          const need = 4 + len - p.length;
          if (chunk.length < need) {
            this.pending = Buffer.concat([p, chunk]);
            return cb();
          }
          this.chunk(p[0]!, Buffer.concat([p.subarray(4), chunk.subarray(0, need)]), out);
          buf = chunk.subarray(need);
        }
      }
      let pos = 0;
      while (buf.length - pos >= 4) {
        const type = buf[pos]!;
        const len = buf[pos + 1]! | (buf[pos + 2]! << 8) | (buf[pos + 3]! << 16);
        if (len > MAX_CHUNK) throw new SnappyError('chunk too large');
        if (buf.length - pos - 4 < len) break;
        const body = buf.subarray(pos + 4, pos + 4 + len);
        pos += 4 + len;
        this.chunk(type, body, out);
      }
      if (pos < buf.length) this.pending = Buffer.from(buf.subarray(pos));
    } catch (err) {
      return cb(err as Error);
    }
    // One push per write rather than per 64 KiB chunk: each push costs the stream machinery
    // more than copying the chunks together.
    if (out.length) this.push(out.length === 1 ? out[0]! : Buffer.concat(out));
    cb();
  }

  private chunk(type: number, body: Buffer, out: Buffer[]): void {
    if (type === 0xff) {
      if (!body.equals(STREAM_ID)) throw new SnappyError('bad stream identifier');
      this.sawStreamId = true;
      return;
    }
    if (!this.sawStreamId) throw new SnappyError('missing stream identifier');
    if (type === 0x00 || type === 0x01) {
      if (body.length < 4) throw new SnappyError('short data chunk');
      const want = body.readUInt32LE(0);
      const data = type === 0x00 ? decodeSnappyBlock(body.subarray(4), SNAPPY_CHUNK_MAX) : body.subarray(4);
      if (data.length > SNAPPY_CHUNK_MAX) throw new SnappyError('data chunk too large');
      if (this.verifyChecksums && maskedCrc32c(data) !== want) throw new SnappyError('checksum mismatch');
      if (data.length) out.push(data);
      return;
    }
    if (type >= 0x02 && type <= 0x7f) throw new SnappyError(`unskippable chunk type 0x${type.toString(16)}`);
    // 0x80-0xfd: skippable; 0xfe: padding.
  }

  override _flush(cb: TransformCallback): void {
    if (this.pending && this.pending.length) cb(new SnappyError('truncated stream'));
    else cb();
  }
}
