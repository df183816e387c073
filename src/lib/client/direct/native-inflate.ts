// The optional native inflate of whole GZIP objects (src/native/gzip-inflate.c, built by
// scripts/build-native.mjs into dist/native/gzip-inflate.node): libdeflate on libuv's thread pool.
//
// Why: a direct read of a journal of GZIP fragments is bound by inflating. zlib inflates a stream,
// keeping its state between calls; libdeflate inflates a whole object into a whole buffer with no
// state to carry, several times faster, CRC-32 and length checks included. A direct read knows
// each fragment's content length (end - begin), so it can give libdeflate the whole output buffer
// it needs (docs/direct-reads.md, "Inflating GZIP"; figures in bench/results/direct.md).
//
// Where the module was not built (no compiler, headers or libdeflate where gazctl was installed),
// or with GAZCTL_NATIVE_INFLATE=0, `nativeInflate()` is undefined and GZIP objects are inflated by
// a gunzip stream (gzip-object.ts). The module answers -1 for anything it does not take on itself (an unusual header,
// any corruption, content longer than the buffer), and the caller then inflates that object with
// zlib, so every error reads exactly as before.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

export interface NativeInflate {
  /**
   * Inflates every member of the gzip object `stored` into `out`, on the thread pool: resolves with
   * the content's length, or -1 where zlib must do it instead. Neither buffer may be used by the
   * caller until it settles.
   */
  inflate(stored: Uint8Array, out: Uint8Array): Promise<number>;
  /** libdeflate's version, as the module was built with it. */
  libdeflate: string;
}

/** Where the module may lie: from the tsc output (dist/src/lib/client/direct) or the bundle (dist/bundle). */
const CANDIDATES = ['../../../../native/gzip-inflate.node', '../native/gzip-inflate.node'];

let loaded: NativeInflate | null | undefined;
let why = '';

/** The native inflate, or undefined where it is not there (loaded once, on first use). */
export function nativeInflate(): NativeInflate | undefined {
  if (loaded === undefined) {
    loaded = null;
    if (process.env.GAZCTL_NATIVE_INFLATE === '0') {
      why = 'turned off by GAZCTL_NATIVE_INFLATE=0';
    } else {
      why = 'dist/native/gzip-inflate.node was not built (see scripts/build-native.mjs)';
      for (const rel of CANDIDATES) {
        const path = fileURLToPath(new URL(rel, import.meta.url));
        if (!existsSync(path)) continue;
        try {
          const m = createRequire(import.meta.url)(path) as Partial<NativeInflate>;
          if (typeof m.inflate === 'function' && typeof m.libdeflate === 'string') loaded = m as NativeInflate;
          else why = `${path} is not gazctl's native inflate`;
        } catch (e) {
          why = `${path} does not load: ${(e as Error).message.split('\n')[0]}`;
        }
        break;
      }
    }
  }
  return loaded ?? undefined;
}

/** Why nativeInflate() is undefined ('' where it loaded); looks for the module first if need be. */
export function nativeInflateMissing(): string {
  nativeInflate();
  return loaded ? '' : why;
}
