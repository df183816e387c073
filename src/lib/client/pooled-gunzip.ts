// Gunzip and raw inflate streams that write into pooled pieces (piece-pool.ts), not fresh buffers.
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
import { nodeLibSource } from '../node-source.js';
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

/** The zlib streams made pooled here. */
type Inflate = zlib.Gunzip | zlib.InflateRaw;

/** The checks of a fresh stream's fields (made with chunks of `size` bytes), before any write. */
function fieldsAsExpected(g: Inflate, size: number): boolean {
  const z = g as unknown as ZlibFields;
  const d = Object.getOwnPropertyDescriptor(g, '_outBuffer');
  return (
    d !== undefined &&
    'value' in d &&
    d.writable === true &&
    d.configurable === true &&
    Buffer.isBuffer(d.value) &&
    d.value.length === size &&
    z._outOffset === 0 &&
    z._chunkSize === size &&
    typeof g.push === 'function'
  );
}

/**
 * A gunzip stream with PIECE_SIZE output chunks. Where `pooled` is true, each chunk it emits is
 * a view of a pooled buffer, counted by the pool: the consumer calls `pieces.release(chunk)` once
 * for each chunk when done with it (or never; the garbage collector then reclaims the buffer).
 */
export function createPooledGunzip(): PooledGunzip {
  const { stream, pooled } = createPooled((chunkSize) => zlib.createGunzip({ chunkSize }));
  return { gunzip: stream, pooled };
}

/** As createPooledGunzip, for a raw inflate stream (deflate data with no gzip framing). */
export function createPooledInflateRaw(): { inflate: zlib.InflateRaw; pooled: boolean } {
  const { stream, pooled } = createPooled((chunkSize) => zlib.createInflateRaw({ chunkSize }));
  return { inflate: stream, pooled };
}

// Skipping zlib's own output buffers.
//
// Even with pooled output, a zlib stream still allocates a buffer of `_chunkSize` bytes each
// time it moves to the next one (`Buffer.allocUnsafe(self._chunkSize)` in lib/zlib.js's
// processCallback, assigned to `_outBuffer`, whose setter below drops it), and one when it is
// made. Those 2 MiB buffers are never written, so they cost no page faults, but V8 counts each as
// external memory: on the benchmark's GZIP half (256 of them) that set off some 25 young and up
// to a dozen full collections of a 12 MiB heap, against 9 and 1 without them.
//
// The allocation reads `_chunkSize` right after `_outOffset` is set to 0, in these three lines:
const ALLOCATION = '    handle.availOutBefore = self._chunkSize;\n    self._outOffset = 0;\n    self._outBuffer = Buffer.allocUnsafe(self._chunkSize);\n';
// So where this Node's zlib module has exactly them (and sets `_outOffset = 0` nowhere else
// after the constructor), `_outOffset` and `_chunkSize` become accessors: setting the offset to
// 0 arms the next read of the chunk size to give 1, which is that allocation's size (a byte of
// Node's shared pool), and every other read gives PIECE_SIZE. The module's source is checked
// once (process.binding('natives'), some 0.3 ms, with deprecation warnings held back); when it
// cannot be read or differs, or with GAZCTL_ZLIB_SKIP_ALLOCATION=0, streams allocate as zlib does.
let skipAllocation: boolean | undefined;

/** Whether zlib's own output allocations are skipped on this Node (decided once). */
export function zlibAllocationSkipped(): boolean {
  if (skipAllocation === undefined) {
    skipAllocation = false;
    if (process.env.GAZCTL_ZLIB_SKIP_ALLOCATION !== '0') {
      const src = nodeLibSource('zlib');
      skipAllocation = src !== undefined && src.split(ALLOCATION).length === 2 && src.split('_outOffset = 0;').length === 3;
    }
  }
  return skipAllocation;
}

/**
 * Gives a fresh zlib inflate stream (made by `make` with chunks of the size it is given) pooled
 * output buffers of PIECE_SIZE bytes.
 */
function createPooled<T extends Inflate>(make: (chunkSize: number) => T): { stream: T; pooled: boolean } {
  let skip = internalsOk !== false && zlibAllocationSkipped();
  // Made with the smallest chunks when the chunk size is ours to give (see above).
  const made = skip ? zlib.constants.Z_MIN_CHUNK : PIECE_SIZE;
  const g = make(made);
  if (internalsOk === false || !fieldsAsExpected(g, made)) {
    internalsOk = false;
    if (made === PIECE_SIZE) return { stream: g, pooled: false };
    g.destroy();
    return { stream: make(PIECE_SIZE), pooled: false };
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
      const mini = skip && Buffer.isBuffer(fresh) && fresh.length === 1;
      if (live && Buffer.isBuffer(fresh) && (fresh.length === PIECE_SIZE || mini)) {
        cur = pieces.get(PIECE_SIZE);
        given.add(cur.buffer);
      } else {
        // Not what we know: zlib keeps its own buffers from now on (of PIECE_SIZE bytes).
        live = false;
        skip = false;
        cur = Buffer.isBuffer(fresh) && fresh.length < PIECE_SIZE ? Buffer.allocUnsafe(PIECE_SIZE) : fresh;
      }
      pieces.release(old);
    },
  });
  if (skip) {
    let offset = 0;
    let armed = false;
    let chunkSize = PIECE_SIZE;
    Object.defineProperty(g, '_outOffset', {
      configurable: true,
      enumerable: true,
      get: () => offset,
      set: (v: number) => {
        offset = v;
        if (v === 0 && skip) armed = true;
      },
    });
    Object.defineProperty(g, '_chunkSize', {
      configurable: true,
      enumerable: true,
      get: () => {
        if (!armed) return chunkSize;
        armed = false;
        return 1;
      },
      set: (v: number) => {
        chunkSize = v;
      },
    });
  } else {
    (g as unknown as ZlibFields)._outOffset = 0;
  }
  // Counted when zlib pushes a slice (before it is emitted, or queued in the stream), so that a
  // buffer zlib moves on from right after never goes back while a slice of it waits.
  const push = g.push;
  g.push = function (this: T, chunk: unknown, encoding?: BufferEncoding): boolean {
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
  return { stream: g, pooled: true };
}
