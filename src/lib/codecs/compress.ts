// Compressing streams, one per fragment codec: what a broker writes when it persists a spool.
//
// * NONE: the bytes as they are (a PassThrough).
// * GZIP: one RFC 1952 gzip member (readers accept several concatenated members too).
// * GZIP_OFFLOAD_DECOMPRESSION: the same gzip bytes; the persister stores them with
//   `Content-Encoding: gzip` so that the store serves them decompressed.
// * SNAPPY: the Snappy framing format (snappy-encode.ts), blocks from the native `snappy`.
// * ZSTANDARD: frames of libzstd at the Go broker's level, through `@mongodb-js/zstd`
//   (zstd-encode.ts); stored zstd blocks where that cannot load.
import { PassThrough, Readable, type Transform } from 'node:stream';
import * as zlib from 'node:zlib';
import { pipeline } from 'node:stream/promises';

import { CompressionCodec } from '../protocol/gen/broker/protocol.js';
import { zstdFrames } from './backends.js';
import { SnappyFramedEncoder } from './snappy-encode.js';
import { ZstdCompressor } from './zstd-encode.js';

/** Whether `compressor(codec)` produces output that actually shrinks compressible input. */
export function compressesFor(codec: CompressionCodec): boolean {
  switch (codec) {
    case CompressionCodec.GZIP:
    case CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION:
    case CompressionCodec.SNAPPY:
      return true;
    case CompressionCodec.ZSTANDARD:
      return zstdFrames() !== undefined;
    default:
      return false;
  }
}

/** Whether this Node can write `codec`. */
export function canEncode(codec: CompressionCodec): boolean {
  switch (codec) {
    case CompressionCodec.NONE:
    case CompressionCodec.GZIP:
    case CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION:
    case CompressionCodec.SNAPPY:
    case CompressionCodec.ZSTANDARD:
      return true;
    default:
      return false;
  }
}

/** A stream turning content into `codec`'s stored bytes. Throws for a codec `canEncode` refuses. */
export function compressor(codec: CompressionCodec): Transform {
  switch (codec) {
    case CompressionCodec.NONE:
      return new PassThrough();
    case CompressionCodec.GZIP:
    case CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION:
      return zlib.createGzip();
    case CompressionCodec.SNAPPY:
      return new SnappyFramedEncoder();
    case CompressionCodec.ZSTANDARD:
      return new ZstdCompressor();
    default:
      throw new Error(`no encoder for codec ${CompressionCodec[codec] ?? codec}`);
  }
}

/** Compresses `content` whole with `codec`. A failure of the input or the encoder rejects, with both torn down. */
export async function compressBuffer(codec: CompressionCodec, content: Uint8Array | Iterable<Uint8Array> | AsyncIterable<Uint8Array>): Promise<Buffer> {
  const src = content instanceof Uint8Array ? Readable.from([content]) : Readable.from(content);
  const out: Buffer[] = [];
  await pipeline(src, compressor(codec), async (compressed: AsyncIterable<Buffer>) => {
    for await (const b of compressed) out.push(b);
  });
  return Buffer.concat(out);
}
