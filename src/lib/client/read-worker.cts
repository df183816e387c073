// The worker thread of read-workers.ts: reads fragment files of a file:// store and inflates GZIP
// ones, synchronously, into the pieces of a shared buffer that the main thread writes out.
//
// Each job is one fragment file. The worker runs the jobs it holds one piece at a time, always
// the earliest job (the lowest id) that may take another piece: a job may have at most `quota`
// pieces posted to the main thread and not yet taken by its reader, so a fragment ahead of the
// one being written out stops after a few pieces, and never holds up the others.
//
// Memory shared with the main thread (`ctl`, an Int32Array over a SharedArrayBuffer):
//   ctl[0]                  a generation count, bumped by the main thread after every change it
//                           makes (a piece taken or released, a message posted); the worker
//                           waits on it when no job may go on;
//   ctl[1 + s]              the state of piece slot s of `mem` (0 free, 1 handed out): the
//                           worker takes free slots, the main thread frees them;
//   ctl[1 + slots + c]      pieces of the job in cell c posted and not yet taken (the worker
//                           adds, the main thread subtracts).
// When every slot is handed out, a piece is read into an ArrayBuffer of its own, transferred to
// the main thread with its message: slower (fresh memory), never stuck.
//
// Messages to the main thread, each [job id, kind, ...]:
//   [id, 0, slot, length]     a piece in `mem` at slot * PIECE;
//   [id, 1, ArrayBuffer]      a piece in a buffer of its own;
//   [id, 2]                   the end of the object;
//   [id, 3, error fields]     a failure (message, code, errno, syscall, path);
//   [id, 4]                   the object is one this worker does not read (a GZIP object too
//                             large to load whole): the main thread reads it itself;
//   [id, 5]                   the job was cancelled, as asked: its cell may be reused.
//
// Loaded on the main thread, this module starts such workers (`spawnReadWorker`), and holds the
// ones bin/run.js starts as soon as it sees a `journals read` with a file root (a worker takes
// some 30-50 ms to boot, about what the command takes to reach its first fragment), until
// read-workers.ts takes them over.
//
// GZIP framing (RFC 1952) is read here as gzip-object.ts reads it on the main thread, so that
// what is accepted and refused is the same: plain member headers are read here and their deflate
// data inflated raw (checked with the native CRC-32 when it loads), anything else goes with the
// rest of the object to zlib's gunzip.
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { isMainThread, parentPort, receiveMessageOnPort, Worker, workerData, type MessagePort } from 'node:worker_threads';
import * as zlib from 'node:zlib';
import { availableParallelism } from 'node:os';

/** Bytes of each piece slot: piece-pool.ts's PIECE_SIZE (read-workers.ts checks they agree). */
export const PIECE = 2 << 20;
/** Slots of each worker's shared buffer. */
export const SLOTS = 12;
/** Pieces of a job posted and not yet taken by its reader, at most. */
export const QUOTA = 4;
/** Jobs a worker holds at once, at most. */
export const CELLS = 64;
/** Largest GZIP object loaded whole (as fragment-fetch.ts's WHOLE_MAX). */
export const WHOLE_MAX = 16 << 20;
/** Marks the worker's data, so that only workers started here run the worker side. */
const MARK = 'gazctlReadWorker';

/** A worker started by spawnReadWorker, and the memory it shares with the main thread. */
export interface SpawnedWorker {
  worker: Worker;
  mem: SharedArrayBuffer;
  ctl: SharedArrayBuffer;
}

/** Starts a worker (unref'd: it keeps no process running until it is given work). */
export function spawnReadWorker(): SpawnedWorker {
  const mem = new SharedArrayBuffer(SLOTS * PIECE);
  const ctl = new SharedArrayBuffer(4 * (1 + SLOTS + CELLS));
  let crc32Path = '';
  if (process.env.GAZCTL_NATIVE_CRC32 !== '0') {
    try {
      crc32Path = require.resolve('@node-rs/crc32');
    } catch {
      // zlib checks the content
    }
  }
  const data: Data = { [MARK]: true, mem, ctl, crc32Path };
  const worker = new Worker(__filename, { workerData: data, stdout: false, stderr: false });
  worker.unref();
  return { worker, mem, ctl };
}

/** How many workers a process starts: one per core, at most 4. */
export function workerCount(): number {
  return Math.max(1, Math.min(4, availableParallelism()));
}

let early: SpawnedWorker[] | undefined;

/** Starts the workers now, for a read that will need them (bin/run.js). */
export function prestartReadWorkers(): void {
  if (early) return;
  early = [];
  for (let i = 0; i < workerCount(); i++) early.push(spawnReadWorker());
}

/** The workers prestartReadWorkers started, handed over once. */
export function takePrestarted(): SpawnedWorker[] {
  const e = early ?? [];
  early = undefined;
  return e;
}

interface Data {
  [MARK]: true;
  mem: SharedArrayBuffer;
  ctl: SharedArrayBuffer;
  /** Path of @node-rs/crc32, or '' to let zlib check the content. */
  crc32Path: string;
}

/** Job kinds, as posted by read-workers.ts. */
const RAW = 0;
const GZIP = 1;

interface JobMessage {
  op: 'job';
  id: number;
  cell: number;
  path: string;
  kind: typeof RAW | typeof GZIP;
  /** RAW: first byte to read and bytes expected. GZIP: the content length expected. */
  pos: number;
  length: number;
  /** GZIP: largest content read whole (the caller's budget). */
  wholeMax: number;
}
type Message = JobMessage | { op: 'cancel'; id: number };

interface ZlibHandle {
  writeSync(flush: number, input: Uint8Array, inOff: number, inLen: number, out: Uint8Array, outOff: number, outLen: number): void;
  reset(): void;
  close(): void;
  onerror: (message: string, errno: number, code: string) => void;
}
interface Inflater {
  handle: ZlibHandle;
  /** [output room left, input left] after each writeSync. */
  state: Uint32Array;
  error: Error | undefined;
}

function serve(data: Data, port: MessagePort): void {
  const ctl = new Int32Array(data.ctl);
  const mem = Buffer.from(data.mem);
  const SLOT0 = 1;
  const CELL0 = 1 + SLOTS;
  const { Z_FINISH } = zlib.constants;
  /** Atomics.waitAsync (in Node since 16; not in the ES2022 library this is compiled with). */
  const waitAsync = (Atomics as unknown as { waitAsync: (a: Int32Array, i: number, v: number) => { async: boolean; value: Promise<unknown> | string } }).waitAsync;

  type Crc = (b: Uint8Array, crc: number) => number;
  let crc32: Crc | undefined;
  if (data.crc32Path) {
    try {
      const f = (require(data.crc32Path) as { crc32: Crc }).crc32;
      // The check value of the gzip CRC-32, as crc32.ts checks it on the main thread.
      crc32 = f(Buffer.from('123456789'), 0) === 0xcbf43926 ? f : undefined;
    } catch {
      crc32 = undefined; // zlib's gunzip checks the content
    }
  }

  /** A zlib stream's native handle, reporting its errors to us rather than to the stream. */
  function inflater(make: () => zlib.InflateRaw | zlib.Gunzip): Inflater {
    const s = make() as unknown as { _handle: ZlibHandle; _writeState: Uint32Array };
    const z: Inflater = { handle: s._handle, state: s._writeState, error: undefined };
    z.handle.onerror = (message, errno, code) => {
      z.error = Object.assign(new Error(message), { errno, code });
    };
    return z;
  }

  /** An error as Node's zlib makes them. */
  function zlibError(message: string, code: 'Z_DATA_ERROR' | 'Z_BUF_ERROR'): Error {
    return Object.assign(new Error(message), { errno: code === 'Z_DATA_ERROR' ? -3 : -5, code });
  }

  /** The end of a plain member header at `at` (as gzip-object.ts's plainHeaderEnd). */
  function plainHeaderEnd(s: Buffer, at: number): number | undefined {
    if (s.length - at < 10 || s[at] !== 0x1f || s[at + 1] !== 0x8b || s[at + 2] !== 8) return undefined;
    const flags = s[at + 3]!;
    if (flags & 0xe2) return undefined;
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

  class Job {
    fd = -1;
    /** RAW: the next read's position, the bytes still expected, whether the end was probed. */
    pos: number;
    left: number;
    probed = false;
    /** GZIP: the stored object, where its input goes on, and the member being inflated. */
    stored: Buffer | undefined;
    inOff = 0;
    inLen = 0;
    z: Inflater | undefined;
    /** Whether the member is inflated raw (checked here) or by gunzip (the rest of the object). */
    raw = false;
    crc = 0;
    length = 0;
    constructor(readonly m: JobMessage) {
      this.pos = m.pos;
      this.left = m.length;
    }
  }

  const jobs = new Map<number, Job>();
  let nextSlot = 0;

  /** A piece's memory: a free slot of `mem`, or a buffer of its own. */
  function room(n: number): { slot: number; buf: Buffer } {
    for (let k = 0; k < SLOTS; k++) {
      const s = (nextSlot + k) % SLOTS;
      if (Atomics.load(ctl, SLOT0 + s) === 0) {
        Atomics.store(ctl, SLOT0 + s, 1);
        nextSlot = s + 1;
        return { slot: s, buf: mem.subarray(s * PIECE, s * PIECE + n) };
      }
    }
    return { slot: -1, buf: Buffer.from(new ArrayBuffer(n)) };
  }

  function giveBack(r: { slot: number }): void {
    if (r.slot >= 0) Atomics.store(ctl, SLOT0 + r.slot, 0);
  }

  /** Posts `n` bytes of `r` as the job's next piece. */
  function post(job: Job, r: { slot: number; buf: Buffer }, n: number): void {
    Atomics.add(ctl, CELL0 + job.m.cell, 1);
    if (r.slot >= 0) port.postMessage([job.m.id, 0, r.slot, n]);
    else {
      const ab = r.buf.buffer as ArrayBuffer;
      port.postMessage([job.m.id, 1, n === ab.byteLength ? ab : ab.slice(0, n)], [ab]);
    }
  }

  function finish(job: Job, msg: unknown[]): void {
    drop(job);
    port.postMessage(msg);
  }

  function drop(job: Job): void {
    jobs.delete(job.m.id);
    if (job.fd >= 0) closeSync(job.fd);
    job.fd = -1;
    job.stored = undefined;
    if (job.z?.error) job.z.handle.close();
    else if (job.z) idle.push(job.z);
    job.z = undefined;
  }

  /** Inflaters not in use, by kind, for the next members (reset before use). */
  const idle: Inflater[] = [];
  const kindOf = new WeakMap<Inflater, 'raw' | 'gunzip'>();
  function take(kind: 'raw' | 'gunzip'): Inflater {
    const i = idle.findIndex((z) => kindOf.get(z) === kind);
    if (i >= 0) {
      const z = idle.splice(i, 1)[0]!;
      z.handle.reset();
      return z;
    }
    const z = inflater(kind === 'raw' ? () => zlib.createInflateRaw() : () => zlib.createGunzip());
    kindOf.set(z, kind);
    return z;
  }

  /** One step of a RAW job: one piece read, or the end. */
  function stepRaw(job: Job): void {
    if (job.fd < 0) job.fd = openSync(job.m.path, 'r');
    // Past the bytes expected, one byte tells whether the file holds more (the reader then fails
    // the read); a reader that reads on anyway gets the rest in full pieces.
    const n = job.left > 0 ? Math.min(PIECE, job.left) : job.probed ? PIECE : 1;
    if (job.left === 0) job.probed = true;
    const r = room(n);
    let got: number;
    try {
      got = readSync(job.fd, r.buf, 0, n, job.pos);
    } catch (e) {
      giveBack(r);
      throw e;
    }
    if (got === 0) {
      giveBack(r);
      return finish(job, [job.m.id, 2]);
    }
    job.pos += got;
    job.left = Math.max(0, job.left - got);
    // A short read: the file ends sooner than expected; the next read finds its end.
    if (got < n) job.left = 0;
    post(job, r, got);
  }

  /** Starts inflating the member at `at` of the stored object. */
  function member(job: Job, at: number): void {
    const s = job.stored!;
    const dataAt = crc32 ? plainHeaderEnd(s, at) : undefined;
    if (job.z) idle.push(job.z);
    // A header of any other kind goes, with the rest of the object, to gunzip, which accepts or
    // refuses it as it would the whole object.
    job.raw = dataAt !== undefined;
    job.z = take(job.raw ? 'raw' : 'gunzip');
    job.inOff = dataAt ?? at;
    job.inLen = s.length - job.inOff;
    job.crc = 0;
    job.length = 0;
  }

  /** One step of a GZIP job: one piece inflated (members ending in between), or the end. */
  function stepGzip(job: Job): void {
    if (!job.stored) {
      job.fd = openSync(job.m.path, 'r');
      const size = fstatSync(job.fd).size;
      if (size > WHOLE_MAX || job.m.length > job.m.wholeMax) return finish(job, [job.m.id, 4]);
      const buf = Buffer.allocUnsafe(size);
      let at = 0;
      while (at < size) {
        const got = readSync(job.fd, buf, at, size - at, at);
        if (got === 0) break;
        at += got;
      }
      closeSync(job.fd);
      job.fd = -1;
      job.stored = at < size ? buf.subarray(0, at) : buf;
      member(job, 0);
    }
    const r = room(PIECE);
    let have = 0;
    for (;;) {
      const z = job.z!;
      z.handle.writeSync(Z_FINISH, job.stored!, job.inOff, job.inLen, r.buf, have, PIECE - have);
      if (z.error) {
        if (have > 0) post(job, r, have);
        else giveBack(r);
        throw z.error;
      }
      const outLeft = z.state[0]!;
      const inLeft = z.state[1]!;
      const made = PIECE - have - outLeft;
      if (job.raw && made > 0) {
        job.crc = crc32!(r.buf.subarray(have, have + made), job.crc);
        job.length += made;
      }
      have += made;
      job.inOff += job.inLen - inLeft;
      job.inLen = inLeft;
      if (outLeft === 0) return post(job, r, have); // the piece is full; the member goes on
      // The member's deflate data (or, for gunzip, the rest of the object) has ended.
      let failure: Error | undefined;
      if (job.raw) {
        const s = job.stored!;
        const t = job.inOff;
        if (s.length - t < 8) failure = zlibError('unexpected end of file', 'Z_BUF_ERROR');
        else if (s.readUInt32LE(t) !== job.crc >>> 0) failure = zlibError('incorrect data check', 'Z_DATA_ERROR');
        else if (s.readUInt32LE(t + 4) !== job.length % 2 ** 32) failure = zlibError('incorrect length check', 'Z_DATA_ERROR');
        // After a member, the end of the object or a zero byte (padding) ends the content.
        else if (t + 8 < s.length && s[t + 8] !== 0) {
          member(job, t + 8);
          continue; // the next member fills the rest of this piece
        }
      }
      if (have > 0) post(job, r, have);
      else giveBack(r);
      if (failure) throw failure;
      return finish(job, [job.m.id, 2]);
    }
  }

  function fail(job: Job, e: unknown): void {
    const err = e as NodeJS.ErrnoException;
    finish(job, [job.m.id, 3, String(err?.message ?? e), err?.code, err?.errno, err?.syscall, err?.path]);
  }

  function handle(m: Message): void {
    if (m.op === 'job') jobs.set(m.id, new Job(m));
    else {
      const job = jobs.get(m.id);
      if (job) drop(job);
      port.postMessage([m.id, 5]);
    }
  }

  /** The earliest job that may take another piece. */
  function runnable(): Job | undefined {
    let best: Job | undefined;
    for (const job of jobs.values()) {
      if (Atomics.load(ctl, CELL0 + job.m.cell) >= QUOTA) continue;
      if (!best || job.m.id < best.m.id) best = job;
    }
    return best;
  }

  let pumping = false;
  let waiting = false;

  /** Runs jobs until none may go on, then waits for the main thread to change something. */
  function pump(): void {
    pumping = false;
    for (;;) {
      const seen = Atomics.load(ctl, 0);
      for (let m = receiveMessageOnPort(port); m; m = receiveMessageOnPort(port)) handle(m.message as Message);
      const job = runnable();
      if (!job) {
        if (jobs.size === 0 || waiting) return; // a message wakes us (port listener)
        const w = waitAsync(ctl, 0, seen);
        if (!w.async) continue;
        waiting = true;
        void (w.value as Promise<unknown>).then(() => {
          waiting = false;
          kick();
        });
        return;
      }
      try {
        if (job.m.kind === RAW) stepRaw(job);
        else stepGzip(job);
      } catch (e) {
        if (jobs.has(job.m.id)) fail(job, e);
      }
    }
  }

  function kick(): void {
    if (pumping) return;
    pumping = true;
    setImmediate(pump);
  }

  port.on('message', (m: Message) => {
    handle(m);
    kick();
  });
}

if (!isMainThread && (workerData as Partial<Data> | undefined)?.[MARK] === true) serve(workerData as Data, parentPort!);
