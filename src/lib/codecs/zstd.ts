// Zstandard decoding for ZSTANDARD fragments. Node 20's zlib has no zstd. ZstdNativeDecoder
// (below) hands whole frames to libzstd; ZstdDecoder wraps fzstd, a pure-JS streaming decoder,
// in a Transform: for frames too big to hold, and where the native package does not load. A
// fragment may hold several concatenated frames (and skippable frames); both walk them in order.
//
// fzstd does not verify the optional per-frame content checksum (XXH64). We accept that: the
// integrity check for fragment content is its SHA-1 sum, which readers compare against the
// decompressed bytes, not the codec's own checksum.
import { Transform, type TransformCallback } from 'node:stream';
import { Decompress } from 'fzstd';

import { zstdFrames } from './backends.js';

/** A zstd stream ended early or is malformed. */
export class ZstdError extends Error {}

/** Decompresses a stream of zstd frames. */
export class ZstdDecoder extends Transform {
  private readonly d: Decompress;
  private sawInput = false;
  private ended = false;

  constructor() {
    super();
    this.d = new Decompress((data, final) => {
      if (data.length > 0) this.push(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
      if (final) this.ended = true;
    });
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    if (chunk.length === 0) return cb();
    this.sawInput = true;
    try {
      this.d.push(chunk);
    } catch (e) {
      return cb(wrap(e));
    }
    cb();
  }

  override _flush(cb: TransformCallback): void {
    if (!this.sawInput) return cb(); // an empty fragment decodes to nothing
    try {
      this.d.push(new Uint8Array(0), true);
    } catch (e) {
      return cb(wrap(e));
    }
    if (!this.ended) return cb(new ZstdError('zstd: stream ended inside a frame'));
    cb();
  }
}

function wrap(e: unknown): ZstdError {
  const msg = e instanceof Error ? e.message : String(e);
  return new ZstdError(`zstd: ${msg}`, { cause: e });
}

/**
 * Content a frame may have before it is left to the streaming decoder: about the most a native
 * whole-frame decode holds in memory (compressed plus decoded) per stream.
 */
export const ZSTD_NATIVE_FRAME_MAX = 16 * 1024 * 1024;
/** A block regenerates at most this many bytes (the format's Block_Maximum_Size). */
const BLOCK_MAX = 128 * 1024;
/** Frames being decoded at once. */
const IN_FLIGHT = 2;

/**
 * Decompresses a stream of zstd frames with libzstd (`@mongodb-js/zstd`), one whole frame at a
 * time on the thread pool. Frame boundaries are found by walking the frame and block headers
 * (RFC 8878: magic, frame header descriptor, optional window descriptor, dictionary id and
 * content size, then blocks with 3-byte headers, then an optional 4-byte checksum; skippable
 * frames carry their length), which also bounds a frame's content before it is decoded: at
 * most 128 KiB a compressed block, the stated size for raw and RLE blocks. Our persister's frames
 * hold 4 MiB each; a small fragment is one small frame. A frame that may hold more than
 * `frameMax` (a big fragment the Go broker wrote as one frame) is not buffered: from it on, the
 * rest of the stream is decoded by fzstd as it arrives. libzstd verifies the content checksums
 * of frames that have them.
 */
export class ZstdNativeDecoder extends Transform {
  // The current frame's bytes so far (chunks as written), their total, and what the walk knows.
  private parts: Buffer[] = [];
  private have = 0;
  private headerEnd = -1; // where the first block header starts, once the frame header is read
  private next = 0; // where the next block header starts
  private bound = 0;
  private frameEnd = -1; // once the last block header is read
  private skippable = false;
  private readonly inFlight: Promise<Buffer>[] = [];
  private fz: Decompress | undefined;
  private fzEnded = false;

  constructor(
    private readonly decompress: (frame: Buffer) => Promise<Buffer>,
    private readonly frameMax = ZSTD_NATIVE_FRAME_MAX,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    if (this.fz) return this.feed(chunk, cb);
    if (chunk.length === 0) return cb();
    this.parts.push(chunk);
    this.have += chunk.length;
    try {
      while (this.scan() && this.bound <= this.frameMax) {
        const all = this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts, this.have);
        if (!this.skippable) this.start(all.subarray(0, this.frameEnd));
        const rest = all.subarray(this.frameEnd);
        this.reset();
        if (rest.length) {
          this.parts = [rest];
          this.have = rest.length;
        }
      }
    } catch (e) {
      return cb(e as Error);
    }
    if (this.bound > this.frameMax) return this.toStreaming(cb);
    this.drain(IN_FLIGHT - 1).then(() => cb(), cb);
  }

  override _flush(cb: TransformCallback): void {
    this.drain(0).then(() => {
      if (this.fz) {
        try {
          this.fz.push(new Uint8Array(0), true);
        } catch (e) {
          return cb(wrap(e));
        }
        return cb(this.fzEnded ? undefined : new ZstdError('zstd: stream ended inside a frame'));
      }
      cb(this.have > 0 ? new ZstdError('zstd: stream ended inside a frame') : undefined);
    }, cb);
  }

  private reset(): void {
    this.parts = [];
    this.have = 0;
    this.headerEnd = -1;
    this.next = 0;
    this.bound = 0;
    this.frameEnd = -1;
    this.skippable = false;
  }

  /** `n` bytes of the current frame from `at` (the caller checked they are there). */
  private bytes(at: number, n: number): Buffer {
    const out = Buffer.allocUnsafe(n);
    let got = 0;
    let base = 0;
    for (const p of this.parts) {
      if (got === n) break;
      const end = base + p.length;
      if (end > at + got) {
        const from = at + got - base;
        got += p.copy(out, got, from, Math.min(p.length, from + (n - got)));
      }
      base = end;
    }
    return out;
  }

  /** Walks the current frame as far as its bytes go; true once all of it is here. */
  private scan(): boolean {
    if (this.headerEnd < 0) {
      if (this.have < 8) return false;
      const head = this.bytes(0, 8);
      const magic = head.readUInt32LE(0);
      if ((magic & 0xfffffff0) === 0x184d2a50) {
        this.skippable = true;
        this.headerEnd = this.next = 8;
        this.frameEnd = 8 + head.readUInt32LE(4);
      } else {
        if (magic !== 0xfd2fb528) throw new ZstdError('zstd: not a zstd frame (bad magic number)');
        const fhd = head[4]!;
        if (fhd & 0x08) throw new ZstdError('zstd: reserved bit set in a frame header');
        const single = (fhd & 0x20) !== 0;
        const fcsFlag = fhd >>> 6;
        const fcsBytes = fcsFlag === 0 ? (single ? 1 : 0) : [0, 2, 4, 8][fcsFlag]!;
        this.headerEnd = this.next = 5 + (single ? 0 : 1) + [0, 1, 2, 4][fhd & 3]! + fcsBytes;
      }
    }
    while (this.frameEnd < 0 && this.have >= this.next + 3) {
      const h = this.bytes(this.next, 3);
      const v = h[0]! | (h[1]! << 8) | (h[2]! << 16);
      const type = (v >>> 1) & 3;
      const size = v >>> 3;
      if (type === 3) throw new ZstdError('zstd: reserved block type');
      if (size > BLOCK_MAX) throw new ZstdError('zstd: block larger than the format allows');
      this.bound += type === 2 ? BLOCK_MAX : size;
      this.next += 3 + (type === 1 ? 1 : size);
      if (v & 1) {
        const checksum = (this.bytes(4, 1)[0]! & 0x04) !== 0;
        this.frameEnd = this.next + (checksum ? 4 : 0);
      }
    }
    return this.frameEnd >= 0 && this.have >= this.frameEnd;
  }

  private start(frame: Buffer): void {
    const p = this.decompress(frame).catch((e: unknown) => {
      throw wrap(e);
    });
    p.catch(() => undefined); // awaited in drain(); this only keeps a failure from going unhandled meanwhile
    this.inFlight.push(p);
  }

  private async drain(limit: number): Promise<void> {
    while (this.inFlight.length > limit) {
      const out = await this.inFlight.shift()!;
      if (out.length) this.push(out);
    }
  }

  /** Hands the current frame and everything after it to fzstd, once earlier frames are out. */
  private toStreaming(cb: TransformCallback): void {
    const held = Buffer.concat(this.parts, this.have);
    this.reset();
    this.drain(0).then(() => {
      this.fz = new Decompress((data, final) => {
        if (data.length > 0) this.push(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
        if (final) this.fzEnded = true;
      });
      this.feed(held, cb);
    }, cb);
  }

  private feed(chunk: Buffer, cb: TransformCallback): void {
    try {
      if (chunk.length) this.fz!.push(chunk);
    } catch (e) {
      return cb(wrap(e));
    }
    cb();
  }
}

/** The decoder of ZSTANDARD content: libzstd frame by frame where it loads, fzstd otherwise. */
export function zstdDecoder(): Transform {
  const z = zstdFrames();
  return z ? new ZstdNativeDecoder((frame) => z.decompress(frame)) : new ZstdDecoder();
}
