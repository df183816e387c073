// Inflating a whole GZIP object (a fragment file, an HTTP body held in memory) for a direct read.
//
// Two ways, one per reason:
//   * speed: the native module (native-inflate.ts) inflates the whole object with libdeflate into
//     one pooled buffer of the fragment's content length, on libuv's thread pool, CRC-32 and
//     length checks included. A direct read of GZIP fragments is bound by inflating, and this is
//     the one step that moved the benchmark's GZIP half (bench/results/direct.md).
//   * correctness everywhere else: Node's own gunzip stream, used where the module is not built
//     or turned off, where the content length is unknown, and for every object libdeflate leaves
//     to zlib (so that errors read exactly as zlib words them).
// Earlier builds had three more zlib variants between these two (output into pooled buffers by
// replacing private fields of zlib streams, skipping zlib's own output allocations by reading
// Node's module source, and a gzip framing reader checking CRC-32 with @node-rs/crc32). They only
// ever ran where the native module did not, relied on Node internals that a Node upgrade could
// change, and were removed (docs/direct-reads.md, "Inflating GZIP").
import { EventEmitter } from 'node:events';
import * as zlib from 'node:zlib';
import { nativeInflate, nativeInflateMissing, type NativeInflate } from './native-inflate.js';
import { PIECE_SIZE, pieces } from './piece-pool.js';

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
 * An inflate of one whole GZIP object. Given the content's length (a fragment's end less its
 * begin), by the native inflate where it is built; otherwise by a gunzip stream. Every piece
 * emitted is at most PIECE_SIZE bytes and is given to `pieces.release` once used (a no-op for the
 * gunzip stream's own buffers).
 */
export function createObjectInflate(contentLength?: number): ObjectInflate {
  const native = contentLength !== undefined && contentLength > 0 ? nativeInflate() : undefined;
  if (native) return new NativeObject(native, contentLength!);
  return zlibGunzip();
}

/** Which way GZIP fragments of known length inflate in this process, in a few words (for logs). */
export function gzipInflatePath(): string {
  const native = nativeInflate();
  return native ? `libdeflate ${native.libdeflate} (native module)` : `zlib gunzip stream (${nativeInflateMissing()})`;
}

/** A plain gunzip stream whose pieces are at most PIECE_SIZE bytes. */
function zlibGunzip(): zlib.Gunzip {
  return zlib.createGunzip({ chunkSize: PIECE_SIZE });
}

/**
 * A whole GZIP object inflated by libdeflate (native-inflate.ts) into one pooled buffer of its
 * content length, on the thread pool, then handed out as views of at most PIECE_SIZE bytes (each
 * released as a piece; the buffer goes back to the pool with the last of them). Nothing comes out
 * before the whole object has inflated and every member's CRC-32 and length have been checked:
 * where libdeflate leaves the object to zlib (an unusual header, any corruption, content longer
 * than the fragment says), a gunzip stream takes it from the start, and what comes out, content
 * and error alike, is exactly what zlib gives.
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
    const z = zlibGunzip();
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
