// Zstandard compression for ZSTANDARD fragments.
//
// libzstd through the native `@mongodb-js/zstd` package (prebuilt per platform) compresses
// whole buffers on libuv's thread pool, so the stream cuts its input into pieces of FRAME_BYTES
// and writes each as one zstd frame: a fragment is then a sequence of frames, which every zstd
// reader (libzstd and the `zstd` CLI, Go's DataDog/zstd and klauspost readers, fzstd) decodes as
// the concatenation of their contents. At level 5 libzstd's window is 1-2 MiB, so a frame of
// 4 MiB loses little ratio to one frame for the whole fragment (the benchmark measures it
// against the Go broker's output). Level 5 is what the Go broker writes (DataDog/zstd's
// default). Frames carry their content size and libzstd's XXH64 content checksum.
//
// Where the native package cannot load, each piece is written as a frame of stored ("raw")
// blocks: valid zstd that any reader decodes, but not smaller than its content
// (`compressesFor(ZSTANDARD)` says so). Layout: magic 28 B5 2F FD, frame header descriptor
// 0x00 (no checksum, no content size, not single-segment) and a window descriptor, then blocks
// of at most 128 KiB, each with a 3-byte little-endian header: bit 0 last block, bits 1-2 type
// (0 raw), bits 3-23 size.
import { Transform, type TransformCallback } from 'node:stream';

import { zstdFrames } from './backends.js';

/** Content bytes per zstd frame. */
export const ZSTD_FRAME_BYTES = 4 * 1024 * 1024;
/** libzstd's compression level: the Go broker's (DataDog/zstd's DefaultCompression). */
export const ZSTD_LEVEL = 5;

const BLOCK_MAX = 128 * 1024;
// Window descriptor 0x38: exponent 7 (2^(10+7) = 128 KiB), the largest block that size allows.
const RAW_FRAME_HEADER = Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x38]);

/** `data` as one zstd frame of stored blocks (the portable path). */
export function storedZstdFrame(data: Uint8Array): Buffer {
  const parts: Buffer[] = [RAW_FRAME_HEADER];
  let at = 0;
  do {
    const n = Math.min(BLOCK_MAX, data.length - at);
    const last = at + n >= data.length;
    const v = (last ? 1 : 0) | (n << 3); // type 0: raw
    parts.push(Buffer.from([v & 0xff, (v >>> 8) & 0xff, (v >>> 16) & 0xff]));
    if (n > 0) parts.push(Buffer.from(data.buffer, data.byteOffset + at, n));
    at += n;
  } while (at < data.length);
  return Buffer.concat(parts);
}

/** Frames being compressed at once (libuv's pool has 4 threads; this machine class has 2 cores). */
const IN_FLIGHT = 2;

/** A Transform writing its input as zstd frames of up to `frameBytes` content each. */
export class ZstdCompressor extends Transform {
  private pending: Buffer[] = [];
  private pendingLength = 0;
  private started = false;
  // Frames being compressed, in output order: the next frame's input is read while one is
  // compressed, up to IN_FLIGHT frames ahead of the output.
  private readonly inFlight: Promise<Buffer>[] = [];

  constructor(
    private readonly frameBytes = ZSTD_FRAME_BYTES,
    private readonly level = ZSTD_LEVEL,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.pending.push(chunk);
    this.pendingLength += chunk.length;
    if (this.pendingLength < this.frameBytes) return cb();
    const all = Buffer.concat(this.pending, this.pendingLength);
    let at = 0;
    for (; all.length - at >= this.frameBytes; at += this.frameBytes) this.start(all.subarray(at, at + this.frameBytes));
    const rest = all.subarray(at);
    this.pending = rest.length ? [rest] : [];
    this.pendingLength = rest.length;
    this.drain(IN_FLIGHT - 1).then(() => cb(), cb);
  }

  override _flush(cb: TransformCallback): void {
    // An empty stream still gets one (empty) frame, as libzstd's streaming writers produce.
    if (this.pendingLength > 0 || !this.started) this.start(Buffer.concat(this.pending, this.pendingLength));
    this.pending = [];
    this.pendingLength = 0;
    this.drain(0).then(() => cb(), cb);
  }

  private start(data: Buffer): void {
    this.started = true;
    const z = zstdFrames();
    const p = z ? z.compress(data, this.level) : Promise.resolve(storedZstdFrame(data));
    p.catch(() => undefined); // awaited in drain(); this only keeps a failure from going unhandled meanwhile
    this.inFlight.push(p);
  }

  /** Writes finished frames, in order, until at most `limit` are still being compressed. */
  private async drain(limit: number): Promise<void> {
    while (this.inFlight.length > limit) this.push(await this.inFlight.shift()!);
  }
}
