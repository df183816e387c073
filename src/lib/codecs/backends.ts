// Which implementation does the heavy lifting of each codec. The native packages are prebuilt
// per platform (napi-rs; one optional package per OS/CPU, so nothing is compiled or downloaded at
// install time):
//
//   snappy blocks   `snappy` (the Rust snap crate)          portable: `snappyjs` (pure JS)
//   zstd frames     `@mongodb-js/zstd` 1.x (libzstd)        portable: stored (raw) zstd blocks
//                                                           to write, fzstd to read
//   CRC-32C         `@node-rs/crc32`                        portable: a table (../crc32c.ts)
//
// @mongodb-js/zstd stays on 1.x: later majors fetch their binary at install time. The codec
// modules are loaded on first use (not when the library is imported, so that commands that
// never touch a SNAPPY or ZSTANDARD fragment do not pay for loading a native module); snappy is
// checked with a round trip against snappyjs before it is trusted, CRC-32C against its check
// value (../crc32c.ts). Where one cannot load (a platform without a prebuilt binary, a broken
// install), the portable one is used; its output is valid for every reader, only slower
// (snappy) or not smaller (zstd). GAZCTL_NATIVE_CODECS=0 forces the portable ones.
import { createRequire } from 'node:module';

import { crc32c as crc32cNative, crc32cPortable, nativeCrc32c } from '../crc32c.js';

export interface SnappyBlocks {
  /** One raw snappy block (varint length, then elements) of `data`. */
  compress(data: Uint8Array): Buffer;
  /** The bytes of one raw snappy block; throws on a malformed block. */
  uncompress(block: Uint8Array): Buffer;
}

export interface ZstdFrames {
  /** `data` as one zstd frame at `level`, compressed off the main thread. */
  compress(data: Buffer, level: number): Promise<Buffer>;
  /** The content of the zstd frames in `data` (whole-buffer; the streaming reader is fzstd). */
  decompress(data: Buffer): Promise<Buffer>;
}

export type Crc32c = (data: Uint8Array, crc?: number) => number;

type Backend<T> = { impl: T; native: boolean };

let forcePortable = process.env.GAZCTL_NATIVE_CODECS === '0';
let snappy: Backend<SnappyBlocks> | undefined;
let zstd: Backend<ZstdFrames | undefined> | undefined;

const require = createRequire(import.meta.url);

const asBuffer = (b: Uint8Array): Buffer => (Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength));

// snappyjs returns a Buffer for a Buffer argument.
type SnappyJs = { compress(data: Buffer): Buffer; uncompress(block: Buffer): Buffer };
let sj: SnappyJs | undefined;
const snappyjs = (): SnappyJs => (sj ??= require('snappyjs') as SnappyJs);
const portableSnappy: SnappyBlocks = {
  compress: (data) => snappyjs().compress(asBuffer(data)),
  uncompress: (block) => snappyjs().uncompress(asBuffer(block)),
};

const SAMPLE = Buffer.from('gazette fragment gazette fragment gazette fragment 0123456789'.repeat(8));

function loadSnappy(): Backend<SnappyBlocks> {
  if (!forcePortable) {
    try {
      const m = require('snappy') as {
        compressSync(input: Uint8Array, opts?: { copyOutputData?: boolean }): Buffer;
        uncompressSync(input: Uint8Array, opts?: { asBuffer?: boolean; copyOutputData?: boolean }): Buffer | string;
      };
      // copyOutputData: results copied into ordinary Buffers rather than handed over as
      // external ones, whose finalizers made a long run of 64 KiB blocks 3-4x slower per byte
      // (CPU time) as they piled up for the garbage collector.
      const impl: SnappyBlocks = {
        compress: (data) => m.compressSync(data, { copyOutputData: true }),
        uncompress: (block) => m.uncompressSync(block, { asBuffer: true, copyOutputData: true }) as Buffer,
      };
      // Trust it only if its blocks are the raw format the portable decoder reads, and back.
      if (portableSnappy.uncompress(impl.compress(SAMPLE)).equals(SAMPLE) && impl.uncompress(portableSnappy.compress(SAMPLE)).equals(SAMPLE)) {
        return { impl, native: true };
      }
    } catch {
      // no binary for this platform
    }
  }
  return { impl: portableSnappy, native: false };
}

function loadZstd(): Backend<ZstdFrames | undefined> {
  if (!forcePortable) {
    try {
      const m = require('@mongodb-js/zstd') as ZstdFrames;
      if (typeof m.compress === 'function' && typeof m.decompress === 'function') return { impl: m, native: true };
    } catch {
      // no binary for this platform
    }
  }
  return { impl: undefined, native: false };
}

/** The snappy block codec in use. */
export function snappyBlocks(): SnappyBlocks {
  snappy ??= loadSnappy();
  return snappy.impl;
}

/** The native zstd compressor, or undefined where it cannot be loaded. */
export function zstdFrames(): ZstdFrames | undefined {
  zstd ??= loadZstd();
  return zstd.impl;
}

/** CRC-32C of `data` continuing from `crc` (0 to start). */
export function crc32c(data: Uint8Array, crc = 0): number {
  return forcePortable ? crc32cPortable(data, crc) : crc32cNative(data, crc);
}

/** Which implementations are in use (for diagnostics and the benchmark). */
export function codecBackends(): { snappy: 'native' | 'portable'; zstdCompress: 'native' | 'portable'; crc32c: 'native' | 'portable' } {
  snappy ??= loadSnappy();
  zstd ??= loadZstd();
  return {
    snappy: snappy.native ? 'native' : 'portable',
    zstdCompress: zstd.native ? 'native' : 'portable',
    crc32c: !forcePortable && nativeCrc32c() ? 'native' : 'portable',
  };
}

/**
 * Use only the portable implementations (`true`), or the native ones where they load (`false`).
 * For tests and benchmarks, which exercise both paths in one process; it applies from the next
 * block or frame any stream writes or reads.
 */
export function setPortableCodecs(portable: boolean): void {
  forcePortable = portable;
  snappy = undefined;
  zstd = undefined;
}
