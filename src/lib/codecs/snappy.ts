// Snappy decompression for fragment files written with the SNAPPY codec: the framing format
// (stream identifier, compressed/uncompressed data chunks with masked CRC-32C) around the raw
// Snappy block format. Decoding only; brokers are the ones that compress.
import { Transform, type TransformCallback } from 'node:stream';

export class SnappyError extends Error {
  constructor(message: string) {
    super(`snappy: ${message}`);
    this.name = 'SnappyError';
  }
}

/** Decodes one raw Snappy block (varint length, then literals and back-references). */
export function decodeSnappyBlock(src: Uint8Array): Buffer {
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
  if (n > 0xffffffff) throw new SnappyError('block too large');
  const dst = Buffer.allocUnsafe(n);
  let d = 0;
  while (pos < src.length) {
    const tag = src[pos++]!;
    const kind = tag & 3;
    if (kind === 0) {
      let len = tag >>> 2;
      if (len >= 60) {
        const extra = len - 59;
        if (pos + extra > src.length) throw new SnappyError('corrupt literal');
        len = 0;
        for (let i = 0; i < extra; i++) len += src[pos + i]! * 2 ** (8 * i);
        pos += extra;
      }
      len += 1;
      if (pos + len > src.length || d + len > n) throw new SnappyError('corrupt literal');
      dst.set(src.subarray(pos, pos + len), d);
      pos += len;
      d += len;
      continue;
    }
    let len: number;
    let off: number;
    if (kind === 1) {
      if (pos >= src.length) throw new SnappyError('corrupt copy');
      len = ((tag >>> 2) & 7) + 4;
      off = ((tag >>> 5) << 8) | src[pos++]!;
    } else if (kind === 2) {
      if (pos + 2 > src.length) throw new SnappyError('corrupt copy');
      len = (tag >>> 2) + 1;
      off = src[pos]! | (src[pos + 1]! << 8);
      pos += 2;
    } else {
      if (pos + 4 > src.length) throw new SnappyError('corrupt copy');
      len = (tag >>> 2) + 1;
      off = (src[pos]! | (src[pos + 1]! << 8) | (src[pos + 2]! << 16)) + src[pos + 3]! * 0x1000000;
      pos += 4;
    }
    if (off === 0 || off > d || d + len > n) throw new SnappyError('corrupt copy');
    if (off >= len) {
      dst.copyWithin(d, d - off, d - off + len);
      d += len;
    } else {
      // Overlapping copy: repeat the pattern byte by byte.
      for (let i = 0; i < len; i++, d++) dst[d] = dst[d - off]!;
    }
  }
  if (d !== n) throw new SnappyError(`block decoded to ${d} bytes, header said ${n}`);
  return dst;
}

const CRC32C_TABLE = (() => {
  const t = new Int32Array(256 * 4);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    t[i] = c;
  }
  for (let i = 0; i < 256; i++) {
    for (let s = 1; s < 4; s++) {
      const prev = t[(s - 1) * 256 + i]!;
      t[s * 256 + i] = (prev >>> 8) ^ t[prev & 0xff]!;
    }
  }
  return t;
})();

/** CRC-32C (Castagnoli) of `buf`. */
export function crc32c(buf: Uint8Array): number {
  const t = CRC32C_TABLE;
  let c = ~0;
  let i = 0;
  const n4 = buf.length - (buf.length % 4);
  for (; i < n4; i += 4) {
    c ^= buf[i]! | (buf[i + 1]! << 8) | (buf[i + 2]! << 16) | (buf[i + 3]! << 24);
    c = t[768 + (c & 0xff)]! ^ t[512 + ((c >>> 8) & 0xff)]! ^ t[256 + ((c >>> 16) & 0xff)]! ^ t[(c >>> 24) & 0xff]!;
  }
  for (; i < buf.length; i++) c = t[(c ^ buf[i]!) & 0xff]! ^ (c >>> 8);
  return ~c >>> 0;
}

/** The framing format's masked checksum of `data`. */
export function maskedCrc32c(data: Uint8Array): number {
  const c = crc32c(data);
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
    const buf = this.pending ? Buffer.concat([this.pending, chunk]) : chunk;
    this.pending = null;
    try {
      let pos = 0;
      while (buf.length - pos >= 4) {
        const type = buf[pos]!;
        const len = buf[pos + 1]! | (buf[pos + 2]! << 8) | (buf[pos + 3]! << 16);
        if (len > MAX_CHUNK) throw new SnappyError('chunk too large');
        if (buf.length - pos - 4 < len) break;
        const body = buf.subarray(pos + 4, pos + 4 + len);
        pos += 4 + len;
        this.chunk(type, body);
      }
      if (pos < buf.length) this.pending = Buffer.from(buf.subarray(pos));
      cb();
    } catch (err) {
      cb(err as Error);
    }
  }

  private chunk(type: number, body: Buffer): void {
    if (type === 0xff) {
      if (!body.equals(STREAM_ID)) throw new SnappyError('bad stream identifier');
      this.sawStreamId = true;
      return;
    }
    if (!this.sawStreamId) throw new SnappyError('missing stream identifier');
    if (type === 0x00 || type === 0x01) {
      if (body.length < 4) throw new SnappyError('short data chunk');
      const want = body.readUInt32LE(0);
      const data = type === 0x00 ? decodeSnappyBlock(body.subarray(4)) : body.subarray(4);
      if (this.verifyChecksums && maskedCrc32c(data) !== want) throw new SnappyError('checksum mismatch');
      if (data.length) this.push(data);
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
