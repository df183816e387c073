// Parallel direct reads of persisted fragments. Given a run of fragments that follow each other
// without a gap (each begins where the one before ends), several are fetched and decompressed at
// once, and their content comes out strictly in offset order.
//
// Two bounds keep memory in check:
//   * at most `concurrency` fragments are open at a time: the one being written out (the head)
//     and the next ones after it; the next fragment is opened only when the head is done;
//   * fragments ahead of the head stop reading once the decompressed bytes waiting to be written
//     reach `budgetBytes` (counting every fragment's queue). The head itself is never held back by
//     the others' bytes (else nobody could make room), only by its own queue reaching the budget.
// So buffered content stays under about twice the budget plus one piece per open fragment (a
// piece, what a fragment's pull source hands out in one step, is typically 2 MiB or less). A
// GZIP object inflated in one go also holds its whole content (at most the budget, and 16 MiB)
// until it is handed out. A fragment ahead of the head waits for room before each step, so it
// does not even start inflating while the budget is full.
//
// A fragment that fails (HTTP status, I/O error, corrupt compression, wrong length) ends the run:
// every byte before the failure point has been yielded exactly once, the rest of the run is
// cancelled, and a FragmentRunError says where reading stopped, so the caller can go on from
// there (e.g. through a broker).
import { availableParallelism } from 'node:os';
import type { Readable } from 'node:stream';
import type { Fragment } from '../../protocol/gen/broker/protocol.js';
import { DirectReadError, openFragmentSource } from './fragment-fetch.js';
import { pieces, releaser } from './piece-pool.js';

/** One fragment of a run, and how to get its stored bytes. */
export interface RunItem {
  fragment: Fragment;
  /** A URL to fetch (signed http(s), or file:// under `fileRoot`). */
  url?: string;
  /** Opens the stored bytes through a store client; used instead of `url` when set. */
  open?: () => Promise<Readable>;
}

export interface FragmentRunOptions {
  /** First offset wanted: within the first fragment (default its begin). */
  from?: bigint;
  /** Offset to stop before (0 or absent: the end of the last fragment). */
  stopAt?: bigint;
  /** Fragments open at once (default {@link DEFAULT_RUN_CONCURRENCY}, at least 1). */
  concurrency?: number;
  /** Decompressed bytes fragments ahead of the head may hold (default 64 MiB). */
  budgetBytes?: number;
  fileRoot?: string;
  signal?: AbortSignal;
  /** Tests: called with the bytes held whenever they change. */
  onBuffered?: (bytes: number) => void;
}

/** What a run yields: a fragment starting (`content` empty), or its content at `offset`. */
export interface RunEvent {
  index: number;
  fragment: Fragment;
  offset: bigint;
  content: Uint8Array;
  /**
   * Gives `content`'s buffer back for later reads (see piece-pool.ts): call it once, when nothing
   * uses `content` any more, or never. Does nothing for content not in a pooled buffer.
   */
  release: () => void;
}

/** A run stopped at `offset`, inside (or at the begin of) fragment `index`. */
export class FragmentRunError extends DirectReadError {
  constructor(
    message: string,
    readonly index: number,
    readonly fragment: Fragment,
    readonly offset: bigint,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/**
 * Fragments open at once by default: one more than the CPU cores, at least 3 and at most 8.
 * Decompression runs on libuv's thread pool; the one fragment more keeps a core busy while the
 * next fragment after a finished one is opened and loaded, and more than that only adds memory
 * and contention (on 2 cores, 3 at once read faster than 2, and 4 no faster than 3).
 */
export const DEFAULT_RUN_CONCURRENCY = Math.max(3, Math.min(8, availableParallelism() + 1));
export const DEFAULT_RUN_BUDGET = 64 * 1024 * 1024;

const EMPTY = new Uint8Array(0);
const NOTHING = () => {};

/**
 * Queued pieces smaller than MERGE_BELOW are handed out together with the ones queued behind
 * them, up to MERGE_MAX bytes in one buffer: a store that serves small pieces (an HTTP response
 * arrives in 16-64 KiB reads) then costs the consumer one step per MiB instead of one per piece,
 * for one memory copy. A consumer that keeps up gets the pieces as they come.
 */
const MERGE_BELOW = 256 * 1024;
const MERGE_MAX = 1024 * 1024;

function take(t: Task): Buffer | undefined {
  const q = t.queue;
  if (q.length <= 1 || q[0]!.length >= MERGE_BELOW) return q.shift();
  let n = 0;
  let k = 0;
  while (k < q.length && n + q[k]!.length <= MERGE_MAX) n += q[k++]!.length;
  if (k <= 1) return q.shift();
  const merged = q.splice(0, k);
  const out = Buffer.concat(merged, n);
  for (const b of merged) pieces.release(b); // copied out, seen by nobody
  return out;
}

interface Task {
  queue: Buffer[];
  queued: number;
  done: boolean;
  error?: unknown;
  ac: AbortController;
  /** Wakes the consumer waiting on this task. */
  wake?: () => void;
}

/** Yields the content of `items` (a gap-free run, in offset order) from `from` to `stopAt`. */
export async function* readFragmentRun(items: RunItem[], opts: FragmentRunOptions = {}): AsyncGenerator<RunEvent, void, undefined> {
  if (items.length === 0) return;
  for (let i = 1; i < items.length; i++) {
    if (items[i]!.fragment.begin !== items[i - 1]!.fragment.end) {
      throw new RangeError(`fragment run has a gap or overlap at ${items[i - 1]!.fragment.end}`);
    }
  }
  const concurrency = Math.max(1, Math.floor(opts.concurrency ?? DEFAULT_RUN_CONCURRENCY));
  const budget = Math.max(1, opts.budgetBytes ?? DEFAULT_RUN_BUDGET);
  const from = opts.from ?? items[0]!.fragment.begin;
  const lastEnd = items[items.length - 1]!.fragment.end;
  const stopAt = opts.stopAt && opts.stopAt > 0n && opts.stopAt < lastEnd ? opts.stopAt : lastEnd;
  if (from < items[0]!.fragment.begin || from > lastEnd) throw new RangeError(`offset ${from} is outside the fragment run`);

  const tasks: Task[] = [];
  let head = 0;
  let buffered = 0;
  let roomWaiters: (() => void)[] = [];
  const wakeRoom = () => {
    const w = roomWaiters;
    roomWaiters = [];
    for (const f of w) f();
  };
  const note = () => opts.onBuffered?.(buffered);

  const run = async (i: number, t: Task): Promise<void> => {
    const { fragment: f, url, open } = items[i]!;
    const want0 = i === 0 ? from : f.begin;
    const end = f.end < stopAt ? f.end : stopAt;
    const what = url ?? `${f.journal} [${f.begin}, ${f.end})`;
    // Fragments ahead of the head wait for room before they read at all: a piece may be large.
    // Once open, one whose source gains nothing by reading far ahead (a local file) stops sooner.
    let ahead = Infinity;
    const full = () => !t.ac.signal.aborted && (t.queued >= budget || (head !== i && (buffered >= budget || t.queued >= ahead)));
    const room = async () => {
      while (full()) await new Promise<void>((r) => roomWaiters.push(r));
    };
    if (full()) await room();
    if (t.ac.signal.aborted) return;
    const src = await openFragmentSource({ url, open, what }, f.compression_codec, {
      fileRoot: opts.fileRoot,
      signal: t.ac.signal,
      skip: want0 - f.begin,
      length: f.end - f.begin,
      wholeMax: budget,
    });
    ahead = src.readAhead ?? Infinity;
    let pos = f.begin + src.skipped;
    try {
      for (;;) {
        if (full()) await room();
        if (t.ac.signal.aborted) return;
        const piece = await src.next();
        if (piece === null) break;
        if (t.ac.signal.aborted) return;
        let b = piece;
        const next = pos + BigInt(b.length);
        if (next > f.end) throw new DirectReadError(`fragment ${what} holds more than its ${f.end - f.begin} bytes`);
        if (next <= want0) {
          pos = next;
          pieces.release(b); // skipped, seen by nobody
          continue;
        }
        if (pos < want0) {
          b = b.subarray(Number(want0 - pos));
          pos = want0;
        }
        if (pos + BigInt(b.length) > end) b = b.subarray(0, Number(end - pos));
        if (b.length === 0) pieces.release(b);
        else {
          t.queue.push(b);
          t.queued += b.length;
          buffered += b.length;
          pos += BigInt(b.length);
          note();
          t.wake?.();
        }
        if (pos >= end && end < f.end) return; // stopAt reached inside this fragment
      }
    } finally {
      src.close();
    }
    if (t.ac.signal.aborted) return;
    if (pos !== f.end) throw new DirectReadError(`unexpected EOF reading fragment ${what}: ended at ${pos}, expected ${f.end}`);
  };

  const start = (i: number) => {
    const t: Task = { queue: [], queued: 0, done: false, ac: new AbortController() };
    if (opts.signal?.aborted) t.ac.abort();
    tasks[i] = t;
    run(i, t).then(
      () => {
        t.done = true;
        t.wake?.();
      },
      (err) => {
        t.error = err;
        t.done = true;
        t.wake?.();
      },
    );
  };

  // One listener on the caller's signal for the whole run (not one per fragment: a long run
  // would pile them up) cancels whatever is open.
  const onAbort = () => {
    for (const t of tasks) t?.ac.abort();
    wakeRoom();
  };
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  let offset = from;
  try {
    for (let i = 0; i < items.length && offset < stopAt; i++) {
      head = i;
      for (let j = i; j < Math.min(items.length, i + concurrency); j++) {
        if (!tasks[j] && items[j]!.fragment.begin < stopAt) start(j);
      }
      wakeRoom(); // the new head may go on regardless of the others' bytes
      const f = items[i]!.fragment;
      const t = tasks[i]!;
      yield { index: i, fragment: f, offset, content: EMPTY, release: NOTHING };
      for (;;) {
        if (opts.signal?.aborted) return;
        const b = take(t);
        if (b) {
          t.queued -= b.length;
          buffered -= b.length;
          note();
          wakeRoom();
          const ev: RunEvent = { index: i, fragment: f, offset, content: b, release: pieces.owns(b) ? releaser(b) : NOTHING };
          offset += BigInt(b.length);
          yield ev;
          continue;
        }
        if (t.done) break;
        await new Promise<void>((r) => (t.wake = r));
        t.wake = undefined;
      }
      if (t.error !== undefined) {
        if (opts.signal?.aborted) return;
        const e = t.error;
        const msg = e instanceof Error ? e.message : String(e);
        throw new FragmentRunError(e instanceof DirectReadError ? msg : `reading fragment ${items[i]!.url ?? f.journal}: ${msg}`, i, f, offset, { cause: e });
      }
      tasks[i] = undefined as unknown as Task; // let its buffers go
    }
  } finally {
    opts.signal?.removeEventListener('abort', onAbort);
    for (const t of tasks) t?.ac.abort();
    wakeRoom();
  }
}
