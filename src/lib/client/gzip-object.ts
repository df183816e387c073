// Inflating a whole GZIP object (a fragment file, an HTTP body held in memory) into pooled pieces,
// checking its content with the native CRC-32 (crc32.ts) rather than zlib's.
//
// A gunzip stream checks every member's CRC-32 inside zlib, on the thread pool, at some 4 GB/s
// here; measured on the benchmark's direct read (512 MiB of GZIP content), leaving that check out
// took some 0.14 s off the wall time and 0.18 s of CPU. So where the native CRC-32 loads, the
// gzip framing (RFC 1952) is read here and only the deflate data of each member goes through
// zlib, as a raw inflate stream (pooled-gunzip.ts) on the thread pool as before; each piece it
// pushes is added to the member's CRC-32 and length on the main thread (some 0.2 ms per 2 MiB
// piece), and the member's trailer is checked against them when its deflate data ends.
//
// What a plain gunzip stream accepts and refuses is kept:
//   * members follow each other; after a member, the end of the object or a zero byte (padding:
//     Node's gunzip ignores what follows one) ends the content;
//   * a member whose header is not the plain kind read here (not gzip at all, a truncated header,
//     an unknown method or flag, a header CRC) is inflated, with everything after it, by a pooled
//     gunzip stream, which fails or succeeds on it exactly as on the whole object;
//   * a bad trailer fails as zlib fails it: `incorrect data check` (CRC-32), `incorrect length
//     check` (length), `unexpected end of file` (the object ends inside it), with zlib's codes;
//   * errors in the deflate data are zlib's own (a raw inflate stream reports them as gunzip does).
// One thing differs, as it does between gunzip streams fed differently: how much content comes
// out before a failure. A gunzip stream drops the output of the zlib call that found the error;
// here a member's content is handed out before its trailer is checked. Either way it is content
// of the object, in order, and the failure comes after it.
import { EventEmitter } from 'node:events';
import type * as zlib from 'node:zlib';
import { fastCrc32, type Crc32 } from './crc32.js';
import { nativeInflate, type NativeInflate } from './native-inflate.js';
import { PIECE_SIZE, pieces } from './piece-pool.js';
import { createPooledGunzip, createPooledInflateRaw } from './pooled-gunzip.js';

/** What a whole-object inflate looks like to its user: a gunzip stream's events and end/destroy. */
export interface ObjectInflate {
  on(event: 'data', listener: (piece: Buffer) => void): this;
  on(event: 'error', listener: (err: Error) => void): this;
  on(event: 'end', listener: () => void): this;
  /** Starts inflating `stored`, the whole object. */
  end(stored: Buffer): void;
  /** Stops; the pieces not emitted yet are dropped. */
  destroy(): void;
}

/**
 * An inflate of one whole GZIP object into pooled pieces (each piece emitted is released with
 * `pieces.release` once used, as with createPooledGunzip). Given the content's length (a
 * fragment's end less its begin), by the native inflate where it is built (native-inflate.ts);
 * otherwise, or for an object the native inflate leaves to zlib: checked with the native CRC-32
 * where it loads and pooled raw inflate streams work on this Node, else a pooled gunzip stream.
 */
export function createObjectInflate(contentLength?: number): ObjectInflate {
  const native = contentLength !== undefined && contentLength > 0 ? nativeInflate() : undefined;
  if (native) return new NativeObject(native, contentLength!);
  return createZlibObjectInflate();
}

/** The zlib inflate of createObjectInflate (see there). */
function createZlibObjectInflate(): ObjectInflate {
  const crc32 = fastCrc32();
  if (crc32 !== undefined) {
    const probe = createPooledInflateRaw();
    if (probe.pooled) return new GzipMembers(crc32, probe.inflate);
    probe.inflate.destroy();
  }
  return createPooledGunzip().gunzip;
}

/** The end of a plain member header at `at` (no header CRC), or undefined for anything else. */
export function plainHeaderEnd(s: Buffer, at: number): number | undefined {
  if (s.length - at < 10 || s[at] !== 0x1f || s[at + 1] !== 0x8b || s[at + 2] !== 8) return undefined;
  const flags = s[at + 3]!;
  if (flags & 0xe2) return undefined; // reserved bits, or FHCRC: left to zlib
  let p = at + 10;
  if (flags & 0x04) {
    if (s.length - p < 2) return undefined;
    p += 2 + s.readUInt16LE(p);
    if (p > s.length) return undefined;
  }
  for (const bit of [0x08, 0x10]) {
    if (flags & bit) {
      const z = s.indexOf(0, p);
      if (z < 0) return undefined;
      p = z + 1;
    }
  }
  return p;
}

/** An error as Node's zlib makes them (message, errno, code). */
function zlibError(message: string, code: 'Z_DATA_ERROR' | 'Z_BUF_ERROR'): Error {
  return Object.assign(new Error(message), { errno: code === 'Z_DATA_ERROR' ? -3 : -5, code });
}

class GzipMembers extends EventEmitter implements ObjectInflate {
  private stored: Buffer | undefined;
  private current: zlib.InflateRaw | zlib.Gunzip | undefined;
  private over = false;

  constructor(
    private readonly crc32: Crc32,
    /** The raw inflate stream of the first member (made to check that pooling works). */
    private first: zlib.InflateRaw | undefined,
  ) {
    super();
  }

  end(stored: Buffer): void {
    if (this.stored !== undefined) throw new Error('a GZIP object inflate takes one object');
    this.stored = stored;
    this.member(0);
  }

  destroy(): void {
    if (this.over) return;
    this.over = true;
    this.first?.destroy();
    this.current?.destroy();
    this.emit('close');
  }

  private fail(err: Error): void {
    if (this.over) return;
    this.over = true;
    this.emit('error', err);
    this.emit('close');
  }

  private finish(): void {
    if (this.over) return;
    this.over = true;
    this.emit('end');
    this.emit('close');
  }

  /** Emits `piece`, or gives it back to the pool when stopped (nobody will see it). */
  private hand(piece: Buffer): void {
    if (this.over) pieces.release(piece);
    else this.emit('data', piece);
  }

  /** Inflates the member at `at`, then the ones after it. */
  private member(at: number): void {
    if (this.over) return;
    const s = this.stored!;
    if (at > 0 && (at >= s.length || s[at] === 0)) return this.finish();
    const dataAt = plainHeaderEnd(s, at);
    if (dataAt === undefined) return this.rest(s.subarray(at));
    const raw = this.first ?? createPooledInflateRaw().inflate;
    this.first = undefined;
    this.current = raw;
    let crc = 0;
    let length = 0;
    raw.on('data', (piece: Buffer) => {
      crc = this.crc32(piece, crc);
      length += piece.length;
      this.hand(piece);
    });
    raw.on('error', (e: Error) => this.fail(e));
    raw.on('end', () => {
      const trailer = dataAt + raw.bytesWritten;
      if (s.length - trailer < 8) return this.fail(zlibError('unexpected end of file', 'Z_BUF_ERROR'));
      if (s.readUInt32LE(trailer) !== crc >>> 0) return this.fail(zlibError('incorrect data check', 'Z_DATA_ERROR'));
      if (s.readUInt32LE(trailer + 4) !== length % 2 ** 32) return this.fail(zlibError('incorrect length check', 'Z_DATA_ERROR'));
      this.member(trailer + 8);
    });
    raw.end(s.subarray(dataAt));
  }

  /** The rest of the object, from a member whose header is not read here, by a gunzip stream. */
  private rest(from: Buffer): void {
    this.first?.destroy();
    this.first = undefined;
    const g = createPooledGunzip().gunzip;
    this.current = g;
    g.on('data', (piece: Buffer) => this.hand(piece));
    g.on('error', (e: Error) => this.fail(e));
    g.on('end', () => this.finish());
    g.end(from);
  }
}

/**
 * A whole GZIP object inflated by libdeflate (native-inflate.ts) into one pooled buffer of its
 * content length, on the thread pool, then handed out as views of at most PIECE_SIZE bytes (each
 * released as a piece; the buffer goes back to the pool with the last of them). Nothing comes out
 * before the whole object has inflated and every member's CRC-32 and length have been checked:
 * where libdeflate leaves the object to zlib (an unusual header, any corruption, content longer
 * than the fragment says), the zlib inflate takes it from the start, and what comes out, content
 * and error alike, is exactly what it gives.
 */
class NativeObject extends EventEmitter implements ObjectInflate {
  private started = false;
  private over = false;
  private zlib: ObjectInflate | undefined;

  constructor(
    private readonly native: NativeInflate,
    private readonly length: number,
  ) {
    super();
  }

  end(stored: Buffer): void {
    if (this.started) throw new Error('a GZIP object inflate takes one object');
    this.started = true;
    const out = pieces.getWhole(this.length);
    let work: Promise<number>;
    try {
      work = this.native.inflate(stored, out);
    } catch {
      // Not queued (the module refused the call): the buffers were not touched.
      pieces.release(out);
      return this.byZlib(stored);
    }
    work.then(
      (n) => {
        // The thread pool is done with both buffers.
        if (this.over || n < 0) {
          pieces.release(out);
          if (!this.over) this.byZlib(stored);
          return;
        }
        // One piece of the pool per view (the first is `out` itself; none: give it back).
        const views = Math.ceil(n / PIECE_SIZE);
        if (views === 0) pieces.release(out);
        for (let i = 1; i < views; i++) pieces.retain(out);
        for (let at = 0; at < n; at += PIECE_SIZE) {
          const v = out.subarray(at, Math.min(at + PIECE_SIZE, n));
          if (this.over) pieces.release(v);
          else this.emit('data', v);
        }
        this.close('end');
      },
      (e: Error) => {
        // The work never ran: the buffers were not touched.
        pieces.release(out);
        this.close('error', e);
      },
    );
  }

  destroy(): void {
    if (this.over) return;
    this.zlib?.destroy();
    this.close();
  }

  private close(how?: 'end' | 'error', err?: Error): void {
    if (this.over) return;
    this.over = true;
    if (how === 'error') this.emit('error', err);
    else if (how === 'end') this.emit('end');
    this.emit('close');
  }

  /** Inflates `stored` with zlib instead, passing on what comes out. */
  private byZlib(stored: Buffer): void {
    const z = createZlibObjectInflate();
    this.zlib = z;
    z.on('data', (piece: Buffer) => {
      if (this.over) pieces.release(piece);
      else this.emit('data', piece);
    });
    z.on('error', (e: Error) => this.close('error', e));
    z.on('end', () => this.close('end'));
    z.end(stored);
  }
}
