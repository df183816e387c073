// A fast CRC-32 (the gzip polynomial) for checking inflated GZIP content.
//
// Node 20's zlib computes CRC-32 without carry-less multiply: some 4 GB/s here, which made the
// check a third of the CPU time of inflating the benchmark's GZIP fragments (zlib's crc32_z was
// nearly as big in a profile of a direct read as inflating itself). @node-rs/crc32 (a prebuilt
// native module, one package per platform) folds with PCLMULQDQ where the CPU has it: some
// 11-12 GB/s on the same machine, hot or cold. It is an ordinary dependency whose platform
// binaries are optional: where none loads (a platform without a prebuilt binary, a broken
// install), `fastCrc32()` is undefined and GZIP content is checked by zlib as before.
import { createRequire } from 'node:module';

/** CRC-32 of `data` continuing from `crc` (0 to start), as zlib.crc32 computes it. */
export type Crc32 = (data: Uint8Array, crc: number) => number;

let loaded: Crc32 | null | undefined;

/** The native CRC-32, or undefined where it cannot be loaded (loaded once, on first use). */
export function fastCrc32(): Crc32 | undefined {
  if (loaded === undefined) {
    loaded = null;
    if (process.env.GAZCTL_NATIVE_CRC32 !== '0') {
      try {
        const m = createRequire(import.meta.url)('@node-rs/crc32') as { crc32?: (input: Uint8Array, initial?: number) => number };
        const f = m.crc32;
        // The check value of the gzip CRC-32 ("123456789" gives 0xcbf43926), continued too.
        if (typeof f === 'function' && f(Buffer.from('123456789'), 0) === 0xcbf43926 && f(Buffer.from('6789'), f(Buffer.from('12345'), 0)) === 0xcbf43926) {
          loaded = f;
        }
      } catch {
        // no binary for this platform: zlib checks the content
      }
    }
  }
  return loaded ?? undefined;
}
