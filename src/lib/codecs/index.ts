// Fragment compression codecs: which ones this Node can decode, and a decompressing stream for
// each (the compressing streams are in compress.ts). NONE needs none; GZIP is a (possibly
// multi-member) gzip stream; SNAPPY is the framed snappy format; ZSTANDARD is decoded frame by
// frame by libzstd, or streamed through fzstd (zstd.ts), since Node 20's zlib has no zstd (a zlib
// that has one is preferred). Which native packages load is decided in backends.ts.
// GZIP_OFFLOAD_DECOMPRESSION objects are stored as gzip and served decompressed by the store, so
// the caller decides whether bytes arrive compressed.
import { pipeline, type Readable } from 'node:stream';
import * as zlib from 'node:zlib';
import { CompressionCodec } from '../protocol/gen/broker/protocol.js';
import { SnappyFramedDecoder } from './snappy.js';
import { zstdDecoder } from './zstd.js';

export { ZstdDecoder, ZstdError, ZstdNativeDecoder, zstdDecoder, ZSTD_NATIVE_FRAME_MAX } from './zstd.js';
export { decodeSnappyBlock, SnappyFramedDecoder, SnappyError, crc32c, maskedCrc32c, SNAPPY_CHUNK_MAX } from './snappy.js';
export { encodeSnappyBlock, snappyFramedChunk, SnappyFramedEncoder, SNAPPY_STREAM_IDENTIFIER } from './snappy-encode.js';
export { storedZstdFrame, ZstdCompressor, ZSTD_FRAME_BYTES, ZSTD_LEVEL } from './zstd-encode.js';
export { codecBackends, setPortableCodecs } from './backends.js';
export { compressor, compressBuffer, canEncode, compressesFor } from './compress.js';

/**
 * Output chunk size of the decompressors: large, since each chunk costs the consumer a few
 * event-loop turns whatever its size, while memory per open decoder stays about one chunk.
 */
export const CHUNK = 1024 * 1024;

type ZstdFactory = (opts?: { chunkSize?: number }) => NodeJS.ReadWriteStream;

function zstdFactory(): ZstdFactory | undefined {
  const f = (zlib as unknown as { createZstdDecompress?: ZstdFactory }).createZstdDecompress;
  return typeof f === 'function' ? f : undefined;
}

/** Whether this Node can decode `codec` itself. */
export function canDecode(codec: CompressionCodec): boolean {
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

/**
 * A stream decompressing `codec`'s stored bytes, or undefined where the bytes are stored as they
 * are (NONE, GZIP_OFFLOAD_DECOMPRESSION). Throws for a codec `canDecode` refuses.
 */
export function decompressor(codec: CompressionCodec): NodeJS.ReadWriteStream | undefined {
  switch (codec) {
    case CompressionCodec.GZIP:
      return zlib.createGunzip({ chunkSize: CHUNK });
    case CompressionCodec.SNAPPY:
      return new SnappyFramedDecoder();
    case CompressionCodec.ZSTANDARD: {
      const f = zstdFactory();
      return f ? f({ chunkSize: CHUNK }) : zstdDecoder();
    }
    case CompressionCodec.NONE:
    case CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION:
      return undefined;
    default:
      throw new Error(`no decoder for codec ${CompressionCodec[codec] ?? codec}`);
  }
}

/**
 * The stored bytes `raw` of a `codec` fragment, decompressed (`transportGzip`: gunzip first).
 * The stages are joined with pipeline, so a reader that stops early (destroying the stream
 * returned) closes `raw` too, and a failure of any stage, `raw` included, fails that stream.
 */
export function decodeFragmentStream(raw: Readable, codec: CompressionCodec, transportGzip: boolean): Readable {
  const stages: NodeJS.ReadWriteStream[] = [];
  if (transportGzip) stages.push(zlib.createGunzip({ chunkSize: CHUNK }));
  const decoder = decompressor(codec);
  if (decoder) stages.push(decoder);
  if (stages.length === 0) return raw;
  const last = stages[stages.length - 1] as unknown as Readable;
  // pipeline() destroys every stage on error, so the error surfaces on the last one.
  (pipeline as unknown as (...args: unknown[]) => void)(raw, ...stages, (err: Error | null) => {
    if (err && !last.destroyed) last.destroy(err);
  });
  return last;
}
