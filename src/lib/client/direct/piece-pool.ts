// Reusable 2 MiB buffers for the pieces that direct reads hand out.
//
// A fresh buffer is fresh memory: the kernel maps and zeroes each of its pages when it is first
// written (one page fault per 4 KiB), and V8 counts it as external memory, whose growth starts a
// full garbage collection every few tens of MiB. A read of a GiB into fresh 1 MiB pieces pays
// for both about a thousand times over. Pieces that go back to this pool once their consumer is
// done with them are filled again by later reads, in memory that is already mapped.
//
// The contract, for every piece a direct read hands out:
//   * a piece (an event's or a chunk's `content`) stays valid and unchanged until its `release`
//     is called; a consumer that never calls it keeps every piece for as long as it holds it, as
//     with any buffer, and the garbage collector reclaims it;
//   * `release` is called at most once per piece, when nothing uses its content any more (for
//     output: once the write of it has completed, not merely been queued); the buffer under it
//     may then be overwritten by a later read at any time.
// Only buffers made by this pool are taken back; releasing anything else (a broker's message, a
// decompressor's output) does nothing. A buffer already free is not taken twice.
//
// A buffer may carry several pieces at once (the native inflate fills one buffer with a whole
// fragment's content and hands it out as views of PIECE_SIZE bytes, see gzip-object.ts): each
// piece beyond the first is counted with `retain`, and the buffer goes back once every piece has
// been released.

/**
 * Size of every pooled buffer. Each piece costs the main thread a few steps (a thread-pool read or
 * a zlib write, the run's queue, the Reader, the output) whatever its size; once the buffers are
 * reused, bigger pieces cost no fresh memory. 2 MiB pieces took less CPU time than 1 MiB ones at
 * the same peak RSS; bigger ones were no faster and held more memory.
 */
export const PIECE_SIZE = 2 << 20;
/** Pieces smaller than this are allocated on their own: a pooled MiB would be mostly idle. */
const POOL_FROM = 64 * 1024;
/**
 * Free buffers kept at most; more are left to the garbage collector. Enough for the pieces of a
 * few open fragments, each reading a few pieces ahead: with fewer, buffers are dropped and made
 * anew over and over (more CPU time and more peak RSS, not less).
 */
const KEEP = 16;

/** Bytes of a memory page on the machines this runs on (x86-64 and arm64 Linux). */
const PAGE = 4096;
/**
 * Where a pooled piece starts within its buffer, and a page-aligned buffer's content within its
 * allocation. A buffer of a few MiB is a malloc chunk of its own (glibc maps chunks of 128 KiB and
 * more with mmap at first), whose memory starts 16 bytes into a fresh page: so the content of an
 * exact-size buffer starts 16 bytes past a page boundary, while a fragment file's bytes lie in the
 * page cache at their file offset modulo the page. The kernel copies a read() out of the page
 * cache with `rep movsb`, which some CPUs run several times slower when the destination is just
 * past the source's offset within a page (seen on an AMD EPYC host; docs/direct-reads.md,
 * "Page-aligned pieces"). So each buffer is made a page longer and its
 * pieces start PAGE - 16 bytes into it: page-aligned where the layout is glibc's, and clear of that
 * narrow band otherwise (a buffer from malloc's heap, once its mmap threshold has grown, lies at
 * a 16-byte boundary anywhere in a page). The slack is never written: it costs no memory.
 */
export const PIECE_OFFSET = PAGE - 16;

/** A buffer of `n` bytes that starts where a pooled piece does (see PIECE_OFFSET), not pooled. */
export function pageAlignedBuffer(n: number): Buffer {
  return Buffer.from(Buffer.allocUnsafeSlow(n + PIECE_OFFSET).buffer, PIECE_OFFSET, n);
}

/**
 * Bytes to read into one piece from `position` of a file that holds `left` more: a whole piece,
 * except that a read starting inside a page stops at a page boundary, so that every later read of
 * the file starts at one and its content lies at the same offset within a page as in the page
 * cache (see PIECE_OFFSET).
 */
export function alignedReadLength(position: number, left: number): number {
  return Math.min(PIECE_SIZE - (position % PAGE), left);
}

/**
 * Bytes of whole-content buffers (`getWhole`) kept free at most; more are left to the garbage
 * collector. A direct read holds one such buffer per GZIP fragment open and one or two more whose
 * views are still being written out: with the default 3 fragments open and the benchmark's 8 MiB
 * fragments, 64 MiB keeps every one of them for reuse.
 */
const KEEP_WHOLE_BYTES = 64 << 20;

export class PiecePool {
  private readonly free: ArrayBuffer[] = [];
  /** Free whole-content buffers (see getWhole), each bigger than a piece's buffer. */
  private readonly freeWhole: ArrayBuffer[] = [];
  private freeWholeBytes = 0;
  /** Buffers this pool made (and may take back). */
  private readonly made = new WeakSet<ArrayBufferLike>();
  /** Made buffers currently in `free`. */
  private readonly isFree = new WeakSet<ArrayBufferLike>();
  /** Pieces not yet released, of every made buffer that is handed out. */
  private readonly refs = new WeakMap<ArrayBufferLike, number>();

  /**
   * A buffer of `n` bytes (at most PIECE_SIZE): a view of a pooled buffer, a free one when there
   * is one, for any `n` of POOL_FROM bytes or more; a buffer of its own below.
   */
  get(n: number = PIECE_SIZE): Buffer {
    if (n > PIECE_SIZE) throw new RangeError(`a pooled piece holds at most ${PIECE_SIZE} bytes, not ${n}`);
    if (n < POOL_FROM) return Buffer.allocUnsafeSlow(n);
    let ab = this.free.pop();
    if (ab) {
      this.isFree.delete(ab);
    } else {
      ab = Buffer.allocUnsafeSlow(PIECE_SIZE + PIECE_OFFSET).buffer as ArrayBuffer;
      this.made.add(ab);
    }
    this.refs.set(ab, 1);
    return Buffer.from(ab, PIECE_OFFSET, n);
  }

  /**
   * A buffer of `n` bytes (more than PIECE_SIZE) for a whole object's content (the native inflate
   * of a GZIP fragment writes it in one go), laid out as pieces are (it starts PIECE_OFFSET into
   * its allocation): a free one of at least `n` bytes (the smallest) when there is one, else a new
   * one of `n` rounded up to a whole number of pieces, so that the next fragment of about the same
   * size fits it. Hand out pieces of it with `retain` (each view of it counts as one piece) and
   * give it back with `release`, as for `get`.
   */
  getWhole(n: number): Buffer {
    if (n <= PIECE_SIZE) return this.get(n);
    let best = -1;
    for (let i = 0; i < this.freeWhole.length; i++) {
      const len = this.freeWhole[i]!.byteLength;
      if (len - PIECE_OFFSET >= n && (best < 0 || len < this.freeWhole[best]!.byteLength)) best = i;
    }
    let ab: ArrayBuffer;
    if (best >= 0) {
      ab = this.freeWhole.splice(best, 1)[0]!;
      this.freeWholeBytes -= ab.byteLength;
      this.isFree.delete(ab);
    } else {
      const cap = Math.ceil(n / PIECE_SIZE) * PIECE_SIZE;
      ab = Buffer.allocUnsafeSlow(cap + PIECE_OFFSET).buffer as ArrayBuffer;
      this.made.add(ab);
    }
    this.refs.set(ab, 1);
    return Buffer.from(ab, PIECE_OFFSET, n);
  }

  /**
   * Counts one more piece of the pooled buffer under `piece` (handed out, not free): the buffer
   * then goes back only after one more `release`. Does nothing for other buffers.
   */
  retain(piece: Uint8Array): void {
    const ab = piece.buffer;
    if (!this.made.has(ab) || this.isFree.has(ab)) return;
    this.refs.set(ab, (this.refs.get(ab) ?? 1) + 1);
  }

  /**
   * Releases one piece of the pooled buffer under `piece` (a view of it), if it is one of ours and
   * not free already; the buffer is taken back when that was its last piece (see `retain`). The
   * caller must hold no other view of that piece that is still in use.
   */
  release(piece: Uint8Array): void {
    const ab = piece.buffer;
    if (!this.made.has(ab) || this.isFree.has(ab)) return;
    const left = (this.refs.get(ab) ?? 1) - 1;
    if (left > 0) {
      this.refs.set(ab, left);
      return;
    }
    this.refs.delete(ab);
    if (ab.byteLength > PIECE_SIZE + PIECE_OFFSET) {
      // A whole-content buffer (getWhole): kept while the free ones stay under their budget.
      if (this.freeWholeBytes + ab.byteLength > KEEP_WHOLE_BYTES) {
        this.made.delete(ab);
        return;
      }
      this.isFree.add(ab);
      this.freeWhole.push(ab as ArrayBuffer);
      this.freeWholeBytes += ab.byteLength;
      return;
    }
    if (this.free.length >= KEEP) {
      // Left to the garbage collector: it is no longer ours to hand out or take back.
      this.made.delete(ab);
      return;
    }
    this.isFree.add(ab);
    this.free.push(ab as ArrayBuffer);
  }

  /** Whether `piece` lies in a buffer of this pool. */
  owns(piece: Uint8Array): boolean {
    return this.made.has(piece.buffer);
  }

  /** Free buffers held (tests). */
  get freeCount(): number {
    return this.free.length;
  }

  /** Free whole-content buffers held (tests). */
  get freeWholeCount(): number {
    return this.freeWhole.length;
  }
}

/** The pool of this process's direct reads. */
export const pieces = new PiecePool();

/** A release function for `piece` that gives it back to `pieces` the first time it is called. */
export function releaser(piece: Uint8Array): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    pieces.release(piece);
  };
}
