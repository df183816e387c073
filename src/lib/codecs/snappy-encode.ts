// Snappy compression in the framing format that SnappyFramedDecoder reads, as Gazette's Go
// persister writes it (golang/snappy's buffered writer): a stream identifier chunk, then one
// data chunk per (at most) 64 KiB of input, each carrying the masked CRC-32C of its uncompressed
// bytes. A chunk whose block would not save at least 1/8 of its size is written uncompressed
// (chunk type 0x01), as the reference encoders do. Blocks come from the native `snappy` package
// (snappyjs where it cannot load), checksums from @node-rs/crc32: see backends.ts.
import { Transform, type TransformCallback } from 'node:stream';

import { snappyBlocks } from './backends.js';
import { maskedCrc32c, SNAPPY_CHUNK_MAX as CHUNK_MAX } from './snappy.js';

/** The stream identifier chunk that opens every framed stream. */
export const SNAPPY_STREAM_IDENTIFIER = Buffer.from([0xff, 0x06, 0x00, 0x00, 0x73, 0x4e, 0x61, 0x50, 0x70, 0x59]);

/** Compresses `src` into one raw Snappy block with the block codec in use (backends.ts). */
export function encodeSnappyBlock(src: Uint8Array): Buffer {
  return snappyBlocks().compress(src);
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
      const all = this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending, this.pendingLength);
      // One push per write rather than per 64 KiB chunk: each push costs the stream machinery
      // more than copying the chunks together.
      const out: Buffer[] = [];
      let at = 0;
      while (all.length - at >= CHUNK_MAX) {
        out.push(snappyFramedChunk(all.subarray(at, at + CHUNK_MAX)));
        at += CHUNK_MAX;
      }
      this.push(out.length === 1 ? out[0]! : Buffer.concat(out));
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
