// Zstandard decoding for ZSTANDARD fragments. Node 20's zlib has no zstd, so this wraps fzstd, a
// pure-JS streaming decoder, in a Transform. A fragment may hold several concatenated frames
// (and skippable frames); fzstd's streaming decoder walks them in order.
//
// fzstd does not verify the optional per-frame content checksum (XXH64). We accept that: the
// integrity check for fragment content is its SHA-1 sum, which readers compare against the
// decompressed bytes, not the codec's own checksum.
import { Transform, type TransformCallback } from 'node:stream';
import { Decompress } from 'fzstd';

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
