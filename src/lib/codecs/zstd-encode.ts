// A Zstandard frame writer for ZSTANDARD fragments. Node 20's zlib has no zstd and no
// dependency of ours compresses it, so this is our own: one frame of blocks of up to 128 KiB,
// each written as an RLE block (a single repeated byte), a compressed block (zstd-block.ts:
// greedy matches, raw literals, predefined entropy tables; far from libzstd's ratio), or a raw
// block where compressing would not save anything, then the frame's content checksum (low 32
// bits of XXH64). Any zstd decoder (the `zstd` CLI, libzstd, fzstd) reads it. Where the running
// Node's zlib has a zstd compressor, `compressor()` uses that instead.
//
// Frame layout written here:
//   magic 28 B5 2F FD | frame header descriptor 0x04 (checksum flag; no content size, not single
//   segment, no dictionary) | window descriptor 0x38 (window 128 KiB) | blocks... | checksum.
// A block header is 3 bytes little-endian: bit 0 last block, bits 1-2 type (0 raw, 1 RLE,
// 2 compressed), bits 3-23 size (for RLE: the repeat count, followed by the one byte).
import { Transform, type TransformCallback } from 'node:stream';
import { Xxh64 } from './xxh64.js';
import { encodeZstdBlock } from './zstd-block.js';

/** Largest block: with a 128 KiB window the format's 128 KiB maximum applies. */
export const ZSTD_BLOCK_MAX = 128 * 1024;
const FRAME_HEADER = Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x04, 0x38]);

function blockHeader(last: boolean, type: 0 | 1 | 2, size: number): Buffer {
  const v = (last ? 1 : 0) | (type << 1) | (size << 3);
  return Buffer.from([v & 0xff, (v >>> 8) & 0xff, (v >>> 16) & 0xff]);
}

function isRun(b: Uint8Array): boolean {
  if (b.length < 16) return false;
  const c = b[0];
  for (let i = 1; i < b.length; i++) if (b[i] !== c) return false;
  return true;
}

/** A Transform writing its input as one zstd frame with a content checksum. */
export class ZstdFrameEncoder extends Transform {
  private readonly sum = new Xxh64();
  private pending: Buffer[] = [];
  private pendingLength = 0;
  private started = false;

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.start();
    this.sum.update(chunk);
    this.pending.push(chunk);
    this.pendingLength += chunk.length;
    // Keep back at least one byte so that the final block (flagged last) is never empty unless
    // the whole frame is.
    if (this.pendingLength > ZSTD_BLOCK_MAX) {
      const all = Buffer.concat(this.pending, this.pendingLength);
      let at = 0;
      while (all.length - at > ZSTD_BLOCK_MAX) {
        this.block(all.subarray(at, at + ZSTD_BLOCK_MAX), false);
        at += ZSTD_BLOCK_MAX;
      }
      const rest = Buffer.from(all.subarray(at));
      this.pending = [rest];
      this.pendingLength = rest.length;
    }
    cb();
  }

  override _flush(cb: TransformCallback): void {
    this.start();
    this.block(Buffer.concat(this.pending, this.pendingLength), true);
    this.pending = [];
    this.pendingLength = 0;
    const check = Buffer.allocUnsafe(4);
    check.writeUInt32LE(Number(this.sum.digest() & 0xffffffffn), 0);
    this.push(check);
    cb();
  }

  private start(): void {
    if (!this.started) {
      this.started = true;
      this.push(FRAME_HEADER);
    }
  }

  private block(data: Uint8Array, last: boolean): void {
    if (isRun(data)) {
      this.push(Buffer.concat([blockHeader(last, 1, data.length), Buffer.from([data[0]!])]));
      return;
    }
    const compressed = data.length >= 64 ? encodeZstdBlock(data) : undefined;
    if (compressed) {
      this.push(blockHeader(last, 2, compressed.length));
      this.push(compressed);
    } else {
      this.push(blockHeader(last, 0, data.length));
      if (data.length) this.push(Buffer.from(data));
    }
  }
}
