// A gunzip stream that inflates into pooled pieces (piece-pool.ts) rather than fresh buffers.
//
// Node's zlib streams write their output into a buffer of their own, `_outBuffer`, at
// `_outOffset`, with `_chunkSize` bytes of room; each time a write on the thread pool completes,
// the bytes it produced are pushed as a slice of that buffer, and once the buffer is full the
// stream replaces it with a fresh `Buffer.allocUnsafe(_chunkSize)`. On a direct read, that fresh
// memory was about half of the cost of inflating: every page of it is mapped and zeroed by the
// kernel when zlib first writes it (in the pool threads), and the garbage collector runs to
// reclaim it. Inflating the benchmark's GZIP objects (8 MiB of content each) into one reused
// buffer took a third to a half of the CPU time of gunzipSync's fresh buffers.
//
// Those fields belong to the stream instance, so a stream can be given pooled buffers instead:
// before the first write `_outBuffer` becomes an accessor that yields the current pooled buffer,
// and when zlib assigns a fresh buffer (it is done with the current one) the accessor keeps the
// fresh one out and takes the next pooled buffer. The inflating itself stays where it was: on
// libuv's thread pool, so fragments inflate in parallel.
//
// Lifetime of a pooled buffer (counted by the pool, see PiecePool.retain): the stream holds the
// buffer zlib writes into (the one reference `pieces.get` gives); every slice zlib pushes from
// it is counted, before anyone sees it; the stream lets go of the buffer when zlib assigns the
// next one, or at the stream's end. The buffer returns to the pool once the stream and every
// slice have let go. A stream destroyed before its end (a write may still be under way on the
// thread pool) never lets go of its current buffer: that one is left to the garbage collector.
//
// This relies on Node internals. They are checked when a stream is made (the fields exist, are
// plain data with the expected values), and again at the first output (it lies in the pooled
// buffer): when either check fails, the stream goes on as a plain gunzip stream and later ones
// are made plain from the start. test/unit/lib/client/pooled-gunzip.test.ts fails when a Node
// upgrade changes what this relies on.
import * as zlib from 'node:zlib';
import { pieces, PIECE_SIZE } from './piece-pool.js';

/** The fields of a zlib stream this module relies on. */
interface ZlibFields {
  _outBuffer: Buffer;
  _outOffset: number;
  _chunkSize: number;
}

/** Whether this Node's zlib streams behave as expected: unknown until one has been checked. */
let internalsOk: boolean | undefined;

/** Whether streams are still made pooled (false once a check failed; tests). */
export function pooledGunzipWorks(): boolean {
  return internalsOk !== false;
}

export interface PooledGunzip {
  gunzip: zlib.Gunzip;
  /** Whether the output lands in pooled pieces (false: a plain gunzip stream). */
  pooled: boolean;
}

/** The checks of a fresh stream's fields, before any write. */
function fieldsAsExpected(g: zlib.Gunzip): boolean {
  const z = g as unknown as ZlibFields;
  const d = Object.getOwnPropertyDescriptor(g, '_outBuffer');
  return (
    d !== undefined &&
    'value' in d &&
    d.writable === true &&
    d.configurable === true &&
    Buffer.isBuffer(d.value) &&
    d.value.length === PIECE_SIZE &&
    z._outOffset === 0 &&
    z._chunkSize === PIECE_SIZE &&
    typeof g.push === 'function'
  );
}

/**
 * A gunzip stream with PIECE_SIZE output chunks. Where `pooled` is true, each chunk it emits is
 * a view of a pooled buffer, counted by the pool: the consumer calls `pieces.release(chunk)` once
 * for each chunk when done with it (or never; the garbage collector then reclaims the buffer).
 */
export function createPooledGunzip(): PooledGunzip {
  return createPooled(zlib.createGunzip({ chunkSize: PIECE_SIZE }));
}

/** As createPooledGunzip, for a raw inflate stream (deflate data with no gzip framing). */
export function createPooledInflateRaw(): { inflate: zlib.InflateRaw; pooled: boolean } {
  const { gunzip, pooled } = createPooled(zlib.createInflateRaw({ chunkSize: PIECE_SIZE }) as unknown as zlib.Gunzip);
  return { inflate: gunzip as unknown as zlib.InflateRaw, pooled };
}

/** Gives `g` (a fresh zlib inflate stream of PIECE_SIZE chunks) pooled output buffers. */
function createPooled(g: zlib.Gunzip): PooledGunzip {
  if (internalsOk === false || !fieldsAsExpected(g)) {
    internalsOk = false;
    return { gunzip: g, pooled: false };
  }
  /** The buffer zlib writes into; the stream holds one reference to it. */
  let cur = pieces.get(PIECE_SIZE);
  /** Pooled buffers given to zlib, whose slices are counted. */
  const given = new WeakSet<ArrayBufferLike>([cur.buffer]);
  let checked = internalsOk === true;
  let live = true;
  Object.defineProperty(g, '_outBuffer', {
    configurable: true,
    enumerable: true,
    get: () => cur,
    set: (fresh: Buffer) => {
      // zlib is done with `cur` (full, or past its last write) and wants a new buffer.
      const old = cur;
      if (live && Buffer.isBuffer(fresh) && fresh.length === PIECE_SIZE) {
        cur = pieces.get(PIECE_SIZE);
        given.add(cur.buffer);
      } else {
        live = false; // not what we know: zlib keeps its own buffers from now on
        cur = fresh;
      }
      pieces.release(old);
    },
  });
  (g as unknown as ZlibFields)._outOffset = 0;
  // Counted when zlib pushes a slice (before it is emitted, or queued in the stream), so that a
  // buffer zlib moves on from right after never goes back while a slice of it waits.
  const push = g.push;
  g.push = function (this: zlib.Gunzip, chunk: unknown, encoding?: BufferEncoding): boolean {
    if (chunk instanceof Uint8Array && chunk.length > 0) {
      if (!checked) {
        checked = true;
        internalsOk = given.has(chunk.buffer);
        if (!internalsOk) live = false;
      }
      if (given.has(chunk.buffer)) pieces.retain(chunk);
    }
    return push.call(this, chunk, encoding);
  } as typeof g.push;
  // At the end no write is under way any more: the last buffer may go back.
  g.once('end', () => {
    if (given.has(cur.buffer)) pieces.release(cur);
    given.delete(cur.buffer);
  });
  return { gunzip: g, pooled: true };
}
