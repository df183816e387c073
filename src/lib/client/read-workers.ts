// Direct reads of fragment files on worker threads.
//
// Reading a fragment file of a file:// store on the main thread (fragment-fetch.ts's FileSource
// and WholeGzipSource) hands every 2 MiB read and every zlib write to libuv's thread pool: on the
// benchmark machine (2 cores) each hand-over cost the main thread 0.1-0.2 ms and often a
// preemption, and the main thread also checked each GZIP piece's CRC-32. A worker thread does the
// same work in a loop of its own, synchronously: it reads each file (NONE objects piece by piece,
// GZIP objects whole, then inflated piece by piece with zlib's own code), checks the CRC-32, and
// posts each piece to the main thread, which only writes it out.
//
// The pieces lie in a SharedArrayBuffer of each worker, cut into PIECE_SIZE slots; a piece is
// handed to the reader as a Buffer over its slot and goes back to the worker when the reader
// releases it (piece-pool.ts's contract: `pieces.release`). A reader that never releases its
// pieces is served as well, slower: when every slot is taken, the worker reads into a buffer of
// its own and transfers it with the piece. The protocol is described in read-worker.cts.
//
// Each fragment is a job of one worker (the one with the fewest jobs). A job may have at most
// QUOTA pieces posted and not yet taken by its source's next(), so memory stays bounded by the
// caller's own bounds (readFragmentRun's budget) plus QUOTA pieces per open fragment.
//
// Only whole reads of NONE and GZIP objects of a file store go to the workers; a GZIP object too
// large to load whole is handed back, and read by the main thread as before. Where workers are
// not available (no SharedArrayBuffer or Atomics.waitAsync, a worker that failed to start,
// GAZCTL_READ_WORKERS=0), `workerSource` returns undefined and the caller reads as before.
import { createRequire } from 'node:module';
import type { Worker } from 'node:worker_threads';
import { DirectReadError, type FragmentSource } from './fragment-fetch.js';
import { pieces, PIECE_SIZE } from './piece-pool.js';
import type * as ReadWorkerModule from './read-worker.cjs';

/**
 * The worker's module (its main-thread side): next to this file, and in the CLI bundle next to
 * the bundle (scripts/bundle.mjs copies it there), as `import.meta.url` is then the bundle's.
 * bin/run.js loads the same file to start the workers early, so this is the one module instance.
 */
function workerModule(): typeof ReadWorkerModule {
  return createRequire(import.meta.url)('./read-worker.cjs') as typeof ReadWorkerModule;
}

/** The worker module's constants, once it is loaded. */
let K: Pick<typeof ReadWorkerModule, 'SLOTS' | 'QUOTA' | 'CELLS' | 'WHOLE_MAX'>;

const GEN = 0;
const SLOT0 = 1;

type Kind = 'raw' | 'gzip';

/** A source fed by a worker's job. */
class WorkerSource implements FragmentSource {
  /** As FileSource: a local file is read as fast when asked as ahead of time. */
  readonly readAhead = K.QUOTA * PIECE_SIZE;
  private readonly queue: Buffer[] = [];
  private state: 'open' | 'ended' | 'failed' | 'fallback' | 'closed' = 'open';
  private failure: Error | undefined;
  private waiter: (() => void) | undefined;
  private delegate: FragmentSource | undefined;

  constructor(
    private readonly w: ReadWorker,
    readonly id: number,
    readonly cell: number,
    readonly skipped: bigint,
    private readonly fallback: () => Promise<FragmentSource>,
  ) {}

  /** A piece posted by the worker. */
  piece(b: Buffer): void {
    if (this.state === 'closed') {
      pieces.release(b);
      this.w.took(this.cell);
      return;
    }
    this.queue.push(b);
    this.wake();
  }

  /** The worker's last word on this job. */
  settle(state: 'ended' | 'failed' | 'fallback', failure?: Error): void {
    if (this.state !== 'open') return;
    this.state = state;
    this.failure = failure;
    this.wake();
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }

  async next(): Promise<Buffer | null> {
    for (;;) {
      if (this.delegate) return this.delegate.next();
      const b = this.queue.shift();
      if (b) {
        this.w.took(this.cell);
        return b;
      }
      switch (this.state) {
        case 'failed':
          throw this.failure;
        case 'ended':
        case 'closed':
          return null;
        case 'fallback':
          this.delegate = await this.fallback();
          if ((this.state as string) === 'closed') this.delegate.close();
          continue;
      }
      await new Promise<void>((r) => (this.waiter = r));
    }
  }

  close(): void {
    if (this.state === 'closed') return;
    const was = this.state;
    this.state = 'closed';
    this.delegate?.close();
    for (const b of this.queue.splice(0)) {
      pieces.release(b); // seen by nobody
      this.w.took(this.cell);
    }
    if (was === 'open') this.w.cancel(this.id);
    this.wake();
  }
}

class ReadWorker {
  private readonly worker: Worker;
  private readonly ctl: Int32Array;
  private readonly mem: SharedArrayBuffer;
  private readonly sources = new Map<number, WorkerSource>();
  /** Cells not in use; a cell is in use from its job's start to the worker's last word on it. */
  private readonly freeCells: number[] = [];
  private readonly cellOf = new Map<number, number>();
  broken = false;

  constructor(spawned: ReadWorkerModule.SpawnedWorker) {
    this.worker = spawned.worker;
    this.mem = spawned.mem;
    this.ctl = new Int32Array(spawned.ctl);
    for (let c = K.CELLS - 1; c >= 0; c--) this.freeCells.push(c);
    // A piece goes back to its slot when its reader releases it.
    pieces.adopt(this.mem, (piece) => {
      Atomics.store(this.ctl, SLOT0 + Math.floor(piece.byteOffset / PIECE_SIZE), 0);
      this.bump();
    });
    this.worker.on('message', (m: unknown[]) => this.message(m));
    this.worker.on('error', (e) => this.lost(e));
    this.worker.on('exit', (code) => this.lost(new Error(`exited with code ${code}`)));
    // A 'message' listener refs the worker's port again: idle, it must keep no process running.
    this.worker.unref();
  }

  get jobs(): number {
    return this.sources.size;
  }

  get hasRoom(): boolean {
    return !this.broken && this.freeCells.length > 0;
  }

  private bump(): void {
    Atomics.add(this.ctl, GEN, 1);
    Atomics.notify(this.ctl, GEN);
  }

  /** One piece of job `cell` taken by its reader (or dropped). */
  took(cell: number): void {
    Atomics.sub(this.ctl, SLOT0 + K.SLOTS + cell, 1);
    this.bump();
  }

  start(id: number, path: string, kind: Kind, pos: number, length: number, wholeMax: number, skipped: bigint, fallback: () => Promise<FragmentSource>): WorkerSource {
    const cell = this.freeCells.pop()!;
    Atomics.store(this.ctl, SLOT0 + K.SLOTS + cell, 0);
    const src = new WorkerSource(this, id, cell, skipped, fallback);
    this.sources.set(id, src);
    this.cellOf.set(id, cell);
    if (this.sources.size === 1) this.worker.ref(); // a read waiting on the worker keeps Node running
    this.worker.postMessage({ op: 'job', id, cell, path, kind: kind === 'raw' ? 0 : 1, pos, length, wholeMax });
    this.bump();
    return src;
  }

  cancel(id: number): void {
    if (this.broken) return;
    this.worker.postMessage({ op: 'cancel', id });
    this.bump();
  }

  /** The worker's last word on job `id`: its cell may be used again. */
  private done(id: number): void {
    const cell = this.cellOf.get(id);
    if (cell === undefined) return;
    this.cellOf.delete(id);
    this.freeCells.push(cell);
    this.sources.delete(id);
    if (this.sources.size === 0) this.worker.unref();
  }

  private message(m: unknown[]): void {
    const id = m[0] as number;
    const kind = m[1] as number;
    const src = this.sources.get(id);
    switch (kind) {
      case 0: {
        const b = Buffer.from(this.mem, (m[2] as number) * PIECE_SIZE, m[3] as number);
        if (src) src.piece(b);
        else pieces.release(b);
        return;
      }
      case 1: {
        const b = Buffer.from(m[2] as ArrayBuffer);
        if (src) src.piece(b);
        return;
      }
      case 2:
        src?.settle('ended');
        break;
      case 3: {
        const [, , message, code, errno, syscall, path] = m as [number, number, string, string?, number?, string?, string?];
        const e = Object.assign(new Error(message), { code, errno, syscall, path }) as NodeJS.ErrnoException;
        for (const k of ['code', 'errno', 'syscall', 'path'] as const) if (e[k] === undefined) delete e[k];
        src?.settle('failed', e);
        break;
      }
      case 4:
        src?.settle('fallback');
        break;
      case 5:
        break;
    }
    this.done(id);
  }

  /** The worker is gone: its jobs fail (the reader goes on as after any failed direct read). */
  private lost(e: Error): void {
    if (this.broken) return;
    this.broken = true;
    for (const [id, src] of [...this.sources]) {
      src.settle('failed', new DirectReadError(`the read worker thread failed: ${e.message}`, { cause: e }));
      this.done(id);
    }
  }
}

let pool: ReadWorker[] | undefined;
let nextId = 1;

/** Whether this process reads fragment files on worker threads. */
export function readWorkersAvailable(): boolean {
  return (
    process.env.GAZCTL_READ_WORKERS !== '0' &&
    typeof SharedArrayBuffer === 'function' &&
    typeof (Atomics as { waitAsync?: unknown }).waitAsync === 'function' &&
    (pool === undefined || pool.some((w) => !w.broken))
  );
}

/**
 * Starts the workers (or takes over those bin/run.js started), so that they are up by the first
 * fragment; `workerSource` starts them otherwise. Does nothing where workers are not available.
 */
export function startReadWorkers(): void {
  if (pool !== undefined || !readWorkersAvailable()) return;
  pool = [];
  try {
    const m = workerModule();
    // The slots must hold the pieces the rest of the read hands around.
    if (m.PIECE !== PIECE_SIZE) return;
    K = m;
    const spawned = m.takePrestarted();
    while (spawned.length < m.workerCount()) spawned.push(m.spawnReadWorker());
    for (const w of spawned) pool.push(new ReadWorker(w));
  } catch {
    for (const w of pool) w.broken = true;
  }
}

/**
 * A source of a fragment file at `path` read on a worker thread: a NONE object from `pos`
 * (`length` bytes expected), or a GZIP object whose content is `length` bytes (inflated whole if
 * it and its content fit in `wholeMax`, else `fallback` reads it). Undefined where workers are
 * not available, or all are full.
 */
export function workerSource(
  path: string,
  kind: Kind,
  o: { pos: number; length: number; wholeMax: number; skipped: bigint },
  fallback: () => Promise<FragmentSource>,
): FragmentSource | undefined {
  startReadWorkers();
  let best: ReadWorker | undefined;
  for (const w of pool ?? []) if (w.hasRoom && (!best || w.jobs < best.jobs)) best = w;
  if (!best) return undefined;
  return best.start(nextId++, path, kind, o.pos, o.length, Math.min(K.WHOLE_MAX, o.wholeMax), o.skipped, fallback);
}
