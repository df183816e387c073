// CRC-32C (Castagnoli), continued from a previous value: crc32c(b, crc32c(a)) == crc32c(a ‖ b).
// The native @node-rs/crc32 where it loads; a table-driven fallback otherwise. A root module of
// the library: recovery logs (op framing) and the snappy codec (chunk checksums) both use it.
import { createRequire } from 'node:module';

let table: Uint32Array | undefined;

/** The portable implementation (also used to cross-check the native one in tests). */
export function crc32cPortable(data: Uint8Array, crc = 0): number {
  if (!table) {
    table = new Uint32Array(256);
    for (let n = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
      table[n] = c >>> 0;
    }
  }
  let c = ~crc >>> 0;
  for (let i = 0; i < data.length; i++) c = table[(c ^ data[i]!) & 0xff]! ^ (c >>> 8);
  return ~c >>> 0;
}

type Native = (input: Uint8Array, initial?: number) => number;

function loadNative(): Native | undefined {
  try {
    const m = createRequire(import.meta.url)('@node-rs/crc32') as { crc32c?: Native };
    const f = m.crc32c;
    const check = Buffer.from('123456789');
    // The check value 0xe3069283, also when continued.
    if (typeof f === 'function' && f(check, 0) >>> 0 === 0xe3069283 && f(check.subarray(5), f(check.subarray(0, 5), 0)) >>> 0 === 0xe3069283) return f;
  } catch {
    // no binary for this platform
  }
  return undefined;
}

// Loaded at the first checksum, not when this module loads: only a recovery log's reader and the
// snappy codec need it, and every command's start-up loads this module (the bundle has all
// commands in one file), where resolving the package and opening its shared library cost some
// 5 ms of CPU.
let native: Native | undefined;
let nativeTried = false;

function nativeImpl(): Native | undefined {
  if (!nativeTried) {
    nativeTried = true;
    native = loadNative();
  }
  return native;
}

/** CRC-32C of `data` continuing from `crc` (0 to start). */
export function crc32c(data: Uint8Array, crc = 0): number {
  const f = native ?? (nativeTried ? undefined : nativeImpl());
  return f ? f(data, crc) >>> 0 : crc32cPortable(data, crc);
}

/** Whether the native implementation is in use (loading it if it has not been tried yet). */
export function nativeCrc32c(): boolean {
  return nativeImpl() !== undefined;
}
