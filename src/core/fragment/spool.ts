// A journal's open fragment on local disk: the "spool" that appends are written to before the
// fragment is persisted to a store.
//
// Content arrives in two steps, as the replication protocol has it. `apply(content, delta)`
// stages bytes after the committed end (delta = bytes staged so far in this transaction); they
// are on disk and in the running SHA-1 but not part of the fragment. A proposal then either
// commits them (it equals `next()`: same begin, end = end + staged, sum over everything), rolls
// them back (it equals the current fragment), rolls the spool to a new empty fragment (its end
// is beyond what we hold, or it is an empty fragment at our end), or mismatches (the caller
// answers PROPOSAL_MISMATCH with our fragment and registers). `applyProposal` does all of this.
//
// When a spool rolls, the fragment it held is handed out as a LocalFragment (closed: no more
// content will be added) for the persister; the new spool starts empty at the proposal's end
// with the proposal's codec. A spool's file is created on its first content, in `dir` (default:
// the OS temp directory), and unlinked at once, so nothing is left behind by a crash. The file
// descriptor is closed when the last LocalFragment referring to the file is garbage collected,
// or explicitly by `SpoolFile.close()` (readers still holding it then fail with EBADF).
//
// A spool made with `asyncWrites` defers its content writes: `apply` queues them, and the queue
// is written at the event loop's next check phase (a setImmediate), after everything else the
// loop had for that turn. The messages handled in one turn (libuv reads a busy socket many times
// per turn) then cost one writev, in the order they were staged (a rolled-back range written
// again must end up with the later bytes). The write itself is synchronous: handing each batch
// to libuv's threadpool instead cost a thread wake-up there and another back, which on a loaded
// machine were each a chance to lose the CPU and came to more than the write. The caller must
// wait for `settled()` before anything it wrote is committed, so committed content is always in
// the file when a reader or the persister looks.
import { createHash, type Hash } from 'node:crypto';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';

import { sumFromDigest, zeroSum, sumEquals } from '../../lib/protocol/fragment.js';
import { durationToNanos } from '../../lib/protocol/duration.js';
import {
  CompressionCodec,
  Status,
  type Fragment,
  type JournalSpec_Fragment,
  type LabelSet,
} from '../../lib/protocol/gen/broker/protocol.js';

/** Running totals over every spool file of this process: for the broker's metrics. */
export const spoolStats = {
  /** Spool files currently open. */
  openFiles: 0,
  /** Bytes written to spool files that are still open (committed and staged). */
  bytesOnDisk: 0,
  /** Commits, rollbacks and completed spools since start. */
  commits: 0,
  rollbacks: 0,
  rollbackBytes: 0,
  completed: 0,
};

/** A read or write of a SpoolFile after `close()`. */
export class SpoolFileClosedError extends Error {}

/** What the finalizer needs of a SpoolFile; it must not refer back to the SpoolFile itself. */
interface FileHandleState {
  fd: number;
  written: number;
  closed: boolean;
  /** Asynchronous writes issued and not yet done, in issue order (the first one is running). */
  queue: PendingWrite[];
  /** Bytes of those writes not yet written. */
  queuedBytes: number;
  /** The first failure of a write since the last `settled()`. */
  failed: Error | undefined;
  /** Waiters of `settled()`, woken when the queue runs empty. */
  drained: (() => void)[];
  /** close() was called while writes were pending: close once they are done. */
  closeWhenDrained: boolean;
}

interface PendingWrite {
  data: Uint8Array;
  done: number;
  position: number;
}

/**
 * Files with deferred writes queued. Holding them here keeps them from being garbage collected,
 * and their descriptor closed, before the queue is written.
 */
const writing = new Set<SpoolFile>();

/** Queued writes that continue each other in the file are written by one writev of at most this many buffers. */
const WRITEV_MAX_BUFFERS = 64;

function closeHandle(h: FileHandleState): void {
  if (h.closed) return;
  if (h.queue.length > 0) {
    h.closeWhenDrained = true;
    return;
  }
  h.closed = true;
  spoolStats.openFiles--;
  spoolStats.bytesOnDisk -= h.written;
  try {
    fs.closeSync(h.fd);
  } catch {
    /* already closed */
  }
}

const finalizer = new FinalizationRegistry<FileHandleState>(closeHandle);

/** An unlinked temporary file holding one spool's content from offset 0 (= the spool's begin). */
export class SpoolFile {
  private readonly h: FileHandleState;

  constructor(dir: string = tmpdir()) {
    const path = join(dir, `spool-${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`);
    const fd = fs.openSync(path, 'wx+', 0o600);
    try {
      fs.unlinkSync(path);
    } catch (e) {
      fs.closeSync(fd);
      throw e;
    }
    this.h = { fd, written: 0, closed: false, queue: [], queuedBytes: 0, failed: undefined, drained: [], closeWhenDrained: false };
    spoolStats.openFiles++;
    finalizer.register(this, this.h, this);
  }

  get fd(): number {
    return this.h.fd;
  }

  /** Bytes written to the file (its length). */
  get size(): number {
    return this.h.written;
  }

  get isClosed(): boolean {
    return this.h.closed;
  }

  writeAt(data: Uint8Array, position: number): void {
    this.checkOpen();
    let done = 0;
    while (done < data.length) done += fs.writeSync(this.h.fd, data, done, data.length - done, position + done);
    const end = position + data.length;
    if (end > this.h.written) {
      spoolStats.bytesOnDisk += end - this.h.written;
      this.h.written = end;
    }
  }

  /**
   * Queues `data` for writing at `position`, after every deferred write queued before it; the
   * queue is written at the event loop's next check phase (see the top of this file). `data`
   * must not change until `settled()` resolves. A failure is reported by the next `settled()`.
   */
  writeAtAsync(data: Uint8Array, position: number): void {
    this.checkOpen();
    if (this.h.closeWhenDrained) throw new SpoolFileClosedError('spool file is closed');
    if (data.length === 0) return;
    const end = position + data.length;
    if (end > this.h.written) {
      spoolStats.bytesOnDisk += end - this.h.written;
      this.h.written = end;
    }
    this.h.queue.push({ data, done: 0, position });
    this.h.queuedBytes += data.length;
    if (this.h.queue.length === 1) {
      writing.add(this);
      setImmediate(() => this.flush());
    }
  }

  /**
   * Writes the whole queue, in order: each run of writes that continue each other in the file
   * (up to WRITEV_MAX_BUFFERS) as one writev. A rolled-back range written again does not
   * continue what came before it, so it goes in a call of its own, after the earlier one: the
   * later bytes win. A failed call drops its run (reported by `settled()`) and the rest is still
   * written; then waiters are woken.
   */
  private flush(): void {
    const h = this.h;
    while (h.queue.length > 0) {
      const first = h.queue[0]!;
      let count = 1;
      let end = first.position + first.data.length;
      while (count < h.queue.length && count < WRITEV_MAX_BUFFERS && h.queue[count]!.position === end) {
        end += h.queue[count]!.data.length;
        count++;
      }
      const at = first.position + first.done;
      let n: number;
      try {
        if (count === 1) n = fs.writeSync(h.fd, first.data, first.done, first.data.length - first.done, at);
        else {
          const bufs: Uint8Array[] = new Array(count);
          bufs[0] = first.done === 0 ? first.data : first.data.subarray(first.done);
          for (let i = 1; i < count; i++) bufs[i] = h.queue[i]!.data;
          n = fs.writevSync(h.fd, bufs, at);
        }
      } catch (e) {
        h.failed ??= e as Error;
        this.dropWritten(count);
        continue;
      }
      if (n === 0) {
        h.failed ??= new Error(`spool file write at ${at} wrote nothing`);
        this.dropWritten(count);
        continue;
      }
      // Drop what was written whole; a short write leaves the rest of its last write at the
      // head of the queue (marked done that far), to go first.
      let whole = 0;
      let left = n;
      while (whole < count && left > 0) {
        const w = h.queue[whole]!;
        const rest = w.data.length - w.done;
        if (left < rest) {
          w.done += left;
          break;
        }
        left -= rest;
        whole++;
      }
      this.dropWritten(whole);
    }
    writing.delete(this);
    const waiters = h.drained.splice(0);
    for (const wake of waiters) wake();
    if (h.closeWhenDrained) {
      h.closeWhenDrained = false;
      closeHandle(h);
    }
  }

  private dropWritten(count: number): void {
    for (const w of this.h.queue.splice(0, count)) this.h.queuedBytes -= w.data.length;
  }

  /**
   * Resolves once every asynchronous write issued so far is in the file; rejects with the first
   * failure among them (and forgets it: what failed was never committed).
   */
  settled(): Promise<void> {
    const h = this.h;
    const check = (): void => {
      const e = h.failed;
      h.failed = undefined;
      if (e) throw e;
    };
    if (h.queue.length === 0) {
      try {
        check();
      } catch (e) {
        return Promise.reject(e as Error);
      }
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => h.drained.push(resolve)).then(check);
  }

  /** Whether asynchronous writes are still in flight. */
  get pendingWrites(): boolean {
    return this.h.queue.length > 0;
  }

  /** Bytes of asynchronous writes not yet done. */
  get pendingWriteBytes(): number {
    return this.h.queuedBytes;
  }

  /** Resolves once no asynchronous write is in flight (a failure is left for `settled()`). */
  idle(): Promise<void> {
    if (this.h.queue.length === 0) return Promise.resolve();
    return new Promise<void>((resolve) => this.h.drained.push(resolve));
  }

  /** Up to `length` bytes at `position` (fewer only at the end of the file). */
  readAt(position: number, length: number): Buffer {
    const buf = Buffer.allocUnsafe(length);
    const got = this.readInto(position, buf, 0, length);
    return got === length ? buf : buf.subarray(0, got);
  }

  /**
   * Reads up to `length` bytes at `position` into `dst` from `at` on, so a caller can read straight
   * into a larger buffer of its own; returns the bytes read (fewer only at the end of the file).
   */
  readInto(position: number, dst: Uint8Array, at: number, length: number): number {
    this.checkOpen();
    let got = 0;
    while (got < length) {
      const n = fs.readSync(this.h.fd, dst, at + got, length - got, position + got);
      if (n === 0) break;
      got += n;
    }
    return got;
  }

  /** Streams `[start, end)` of the file in `chunk`-byte pieces. */
  stream(start: number, end: number, chunk = 256 * 1024): Readable {
    let pos = start;
    const file = this;
    return new Readable({
      read() {
        if (pos >= end) {
          this.push(null);
          return;
        }
        try {
          const b = file.readAt(pos, Math.min(chunk, end - pos));
          if (b.length === 0) throw new Error(`spool file ended at ${pos}, before ${end}`);
          pos += b.length;
          this.push(b);
        } catch (e) {
          this.destroy(e as Error);
        }
      },
    });
  }

  /** A closed descriptor's number may belong to another file by now: never use it. */
  private checkOpen(): void {
    if (this.h.closed) throw new SpoolFileClosedError('spool file is closed');
  }

  /**
   * Closes the descriptor now (otherwise closed when the file is garbage collected); with
   * asynchronous writes in flight, once they are done (no new ones are taken meanwhile).
   */
  close(): void {
    finalizer.unregister(this);
    closeHandle(this.h);
  }
}

/** A spool's content as of one commit: what the index serves reads from until it is persisted. */
export interface LocalFragment {
  /** The fragment (backing_store empty, mod_time 0, no path postfix yet). */
  readonly fragment: Fragment;
  /** Holds the fragment's content from file offset 0; undefined for an empty fragment. */
  readonly file: SpoolFile | undefined;
  /** UTC time of the spool's first commit; undefined for an empty fragment. */
  readonly firstAppendTime: Date | undefined;
  /** Journal registers as of the commit. */
  readonly registers: LabelSet;
}

/** Up to `max` committed bytes of `lf` starting at journal offset `offset`. */
export function readLocal(lf: LocalFragment, offset: bigint, max: number): Buffer {
  const f = lf.fragment;
  if (offset < f.begin || offset > f.end) {
    throw new RangeError(`offset ${offset} is outside fragment [${f.begin}, ${f.end})`);
  }
  const n = Math.min(max, Number(f.end - offset));
  if (n === 0 || !lf.file) return Buffer.alloc(0);
  return lf.file.readAt(Number(offset - f.begin), n);
}

/**
 * Like {@link readLocal}, into `dst` from `at` on: up to `max` committed bytes of `lf` at journal
 * offset `offset`; returns how many were read.
 */
export function readLocalInto(lf: LocalFragment, offset: bigint, dst: Uint8Array, at: number, max: number): number {
  const f = lf.fragment;
  if (offset < f.begin || offset > f.end) {
    throw new RangeError(`offset ${offset} is outside fragment [${f.begin}, ${f.end})`);
  }
  const n = Math.min(max, Number(f.end - offset));
  if (n === 0 || !lf.file) return 0;
  return lf.file.readInto(Number(offset - f.begin), dst, at, n);
}

/** Streams the content of `lf` from journal offset `from` (default: its begin) to its end. */
export function streamLocal(lf: LocalFragment, from: bigint = lf.fragment.begin): Readable {
  const f = lf.fragment;
  if (from < f.begin || from > f.end) throw new RangeError(`offset ${from} is outside fragment [${f.begin}, ${f.end})`);
  if (!lf.file || from === f.end) return Readable.from([]);
  return lf.file.stream(Number(from - f.begin), Number(f.end - f.begin));
}

/** Hooks a spool calls: each commit (for the index) and each completed spool (for the persister). */
export interface SpoolObserver {
  onCommit?(lf: LocalFragment): void;
  onComplete?(closed: LocalFragment): void;
}

export interface SpoolOptions {
  /** Directory of spool files (default: the OS temp directory). */
  dir?: string;
  observer?: SpoolObserver;
  /** Clock, for the first-append time (tests). */
  now?: () => Date;
  /**
   * Content writes are deferred to the loop's check phase (see the top of this file): the owner
   * awaits `settled()` before it commits staged content.
   */
  asyncWrites?: boolean;
}

/** The staged content's delta is not what the spool holds: a protocol error of the sender. */
export class SpoolDeltaError extends Error {}

/** What `applyProposal` decided. */
export type ProposalResult =
  | {
      status: Status.OK;
      /** Whether staged content was committed (false: a roll-back or a sync with nothing staged). */
      committed: boolean;
      /** The fragment the spool held before rolling, when the proposal rolled a non-empty spool. */
      completed?: LocalFragment;
    }
  | {
      status: Status.PROPOSAL_MISMATCH;
      /** Our fragment and registers, for the ReplicateResponse. */
      fragment: Fragment;
      registers: LabelSet;
      completed?: LocalFragment;
    };

/** Whether every field of two fragments is equal (as the replication protocol compares them). */
export function fragmentEquals(a: Fragment, b: Fragment): boolean {
  return (
    a.journal === b.journal &&
    a.begin === b.begin &&
    a.end === b.end &&
    sumEquals(a.sum, b.sum) &&
    a.compression_codec === b.compression_codec &&
    a.backing_store === b.backing_store &&
    a.mod_time === b.mod_time &&
    a.path_postfix === b.path_postfix
  );
}

export function labelSetEquals(a: LabelSet | undefined, b: LabelSet | undefined): boolean {
  const x = a?.labels ?? [];
  const y = b?.labels ?? [];
  return x.length === y.length && x.every((l, i) => l.name === y[i]!.name && l.value === y[i]!.value && l.prefix === y[i]!.prefix);
}

function copyLabels(s: LabelSet | undefined): LabelSet {
  return { labels: (s?.labels ?? []).map((l) => ({ ...l })) };
}

function emptyFragment(journal: string, at: bigint, codec: CompressionCodec): Fragment {
  return {
    journal,
    begin: at,
    end: at,
    sum: zeroSum(),
    compression_codec: codec,
    backing_store: '',
    mod_time: 0n,
    path_postfix: '',
  };
}

/** A journal's open spool: committed content, staged content, running SHA-1, registers. */
export class Spool {
  private frag: Fragment;
  private regs: LabelSet = { labels: [] };
  private first: Date | undefined;
  private file: SpoolFile | undefined;
  private delta = 0;
  /** SHA-1 over committed and staged content. */
  private summer: Hash = createHash('sha1');
  /** SHA-1 over committed content only (restored on roll-back). */
  private committedSum: Hash = createHash('sha1');
  private readonly dir: string | undefined;
  private readonly observer: SpoolObserver;
  private readonly now: () => Date;
  private readonly asyncWrites: boolean;

  /** A new spool of `journal`: empty at offset 0 with codec NONE, as upstream's are. */
  constructor(readonly journal: string, opts: SpoolOptions = {}) {
    this.frag = emptyFragment(journal, 0n, CompressionCodec.NONE);
    this.dir = opts.dir;
    this.observer = opts.observer ?? {};
    this.now = opts.now ?? (() => new Date());
    this.asyncWrites = opts.asyncWrites ?? false;
  }

  /** The committed fragment (a copy). */
  get fragment(): Fragment {
    return { ...this.frag, sum: { ...this.frag.sum! } };
  }
  get begin(): bigint {
    return this.frag.begin;
  }
  get end(): bigint {
    return this.frag.end;
  }
  get codec(): CompressionCodec {
    return this.frag.compression_codec;
  }
  /** Committed content length. */
  get contentLength(): bigint {
    return this.frag.end - this.frag.begin;
  }
  /** Content handed to the spool file and still queued in memory for writing. */
  get queuedWriteBytes(): number {
    return this.file ? this.file.pendingWriteBytes : 0;
  }
  /** Bytes staged by `apply` and not yet committed or rolled back. */
  get staged(): number {
    return this.delta;
  }
  get registers(): LabelSet {
    return copyLabels(this.regs);
  }
  get firstAppendTime(): Date | undefined {
    return this.first;
  }

  /** Replaces the registers (a primary restoring them from a peer, or a test). */
  setRegisters(r: LabelSet): void {
    this.regs = copyLabels(r);
  }

  /**
   * Stages `content` after the committed end plus `delta`, which must equal the bytes staged so
   * far (the ReplicateRequest's content_delta).
   */
  apply(content: Uint8Array, delta: number | bigint = this.delta): void {
    if (Number(delta) !== this.delta) {
      throw new SpoolDeltaError(`invalid content delta ${delta} (expected ${this.delta})`);
    }
    if (content.length === 0) return;
    this.file ??= new SpoolFile(this.dir);
    if (this.asyncWrites) this.file.writeAtAsync(content, Number(this.contentLength) + this.delta);
    else this.file.writeAt(content, Number(this.contentLength) + this.delta);
    this.summer.update(content);
    this.delta += content.length;
  }

  /**
   * Resolves once the staged content is in the spool file (at once unless `asyncWrites`); rejects
   * when a write of it failed. Await it before applying a proposal that commits.
   */
  settled(): Promise<void> {
    return this.file ? this.file.settled() : Promise.resolve();
  }

  /**
   * With more than `maxBytes` of content still being written, a promise that resolves once the
   * writes are done (never rejects: `settled()` reports failures); else undefined. Lets a
   * caller stop taking content while the disk is behind, so queued writes do not pile up in
   * memory.
   */
  writesBehind(maxBytes: number): Promise<void> | undefined {
    if (!this.file || this.file.pendingWriteBytes <= maxBytes) return undefined;
    return this.file.idle();
  }

  /** The fragment that committing the staged content would make: the proposal to expect. */
  next(): Fragment {
    const f = this.fragment;
    f.end += BigInt(this.delta);
    f.sum = f.begin === f.end ? zeroSum() : sumFromDigest(this.summer.copy().digest());
    return f;
  }

  /** Drops the staged content. */
  rollback(): void {
    if (this.delta !== 0) {
      spoolStats.rollbacks++;
      spoolStats.rollbackBytes += this.delta;
    }
    this.delta = 0;
    this.summer = this.committedSum.copy();
  }

  /** The committed content as a LocalFragment. */
  local(): LocalFragment {
    return {
      fragment: this.fragment,
      file: this.contentLength > 0n ? this.file : undefined,
      firstAppendTime: this.first,
      registers: this.registers,
    };
  }

  /** Up to `max` committed bytes at journal offset `offset` (for reads served from the spool). */
  read(offset: bigint, max: number): Buffer {
    return readLocal(this.local(), offset, max);
  }

  /**
   * Applies a replication proposal with the registers that go with it (see the top of this file).
   * Calls the observer's onComplete for a rolled non-empty spool and onCommit for a commit.
   */
  applyProposal(proposal: Fragment, registers: LabelSet | undefined): ProposalResult {
    let completed: LocalFragment | undefined;
    const fullEnd = this.frag.end + BigInt(this.delta);
    if (proposal.end > fullEnd || (proposal.end === this.frag.end && proposal.begin === proposal.end)) {
      if (this.contentLength > 0n) {
        completed = this.local();
        spoolStats.completed++;
        this.observer.onComplete?.(completed);
      }
      if (proposal.end > this.frag.end) this.regs = copyLabels(registers);
      this.reset(proposal.end, proposal.compression_codec);
    }

    if (fragmentEquals(this.frag, proposal) && labelSetEquals(this.regs, registers)) {
      this.rollback();
      return completed ? { status: Status.OK, committed: false, completed } : { status: Status.OK, committed: false };
    }

    if (this.delta !== 0 && fragmentEquals(this.next(), proposal)) {
      spoolStats.commits++;
      this.frag = { ...proposal, sum: { ...proposal.sum! } };
      this.first ??= new Date(this.now().getTime());
      this.regs = copyLabels(registers);
      this.delta = 0;
      this.committedSum = this.summer.copy();
      this.observer.onCommit?.(this.local());
      return completed ? { status: Status.OK, committed: true, completed } : { status: Status.OK, committed: true };
    }

    const mismatch: ProposalResult = {
      status: Status.PROPOSAL_MISMATCH,
      fragment: this.fragment,
      registers: this.registers,
    };
    if (completed) mismatch.completed = completed;
    return mismatch;
  }

  /**
   * Closes the spool where it is: hands out its committed content (undefined when empty) and
   * starts a new empty spool at its end with `codec` (default: the current codec). Staged content
   * is dropped. A replica does this only through a proposal; this is for a broker that owns the
   * journal alone or is shutting down.
   */
  roll(codec: CompressionCodec = this.codec): LocalFragment | undefined {
    this.rollback();
    const r = this.applyProposal(emptyFragment(this.journal, this.frag.end, codec), this.regs);
    return r.completed;
  }

  private reset(at: bigint, codec: CompressionCodec): void {
    this.frag = emptyFragment(this.journal, at, codec);
    this.first = undefined;
    this.file = undefined;
    this.delta = 0;
    this.summer = createHash('sha1');
    this.committedSum = createHash('sha1');
  }
}

/** Why the primary should roll its spool before the next append (undefined: don't). */
export type RollReason = 'empty' | 'length' | 'offset' | 'flush-interval' | 'codec' | 'flush';

export interface RollOptions {
  /** The clock reading to judge the flush interval by (default: now). */
  now?: Date;
  /** A peer holds content up to here: roll forward to this offset (0: no request). */
  rollToOffset?: bigint;
  /** Roll now if the spool holds anything (on-demand flush). */
  flush?: boolean;
}

interface SpoolView {
  readonly journal: string;
  readonly fragment: Fragment;
  readonly firstAppendTime: Date | undefined;
}

/**
 * Why the spool should roll before the next append, per the journal's fragment spec: it is empty
 * (rolling an empty spool just picks up the spec's codec), it is longer than `length`, a peer
 * asks for a larger offset, the UTC-aligned flush interval it began in has passed
 * (floor(unix seconds / interval) differs), its codec is no longer the spec's, or a flush asks.
 */
export function rollReason(spool: SpoolView, spec: JournalSpec_Fragment, opts: RollOptions = {}): RollReason | undefined {
  const f = spool.fragment;
  const cl = f.end - f.begin;
  const rollTo = opts.rollToOffset ?? 0n;
  if (cl === 0n) return 'empty';
  if (cl > spec.length) return 'length';
  if (rollTo !== 0n && rollTo !== f.begin) return 'offset';
  const interval = durationToNanos(spec.flush_interval) / 1_000_000_000n;
  if (interval > 0n && spool.firstAppendTime) {
    const first = BigInt(Math.floor(spool.firstAppendTime.getTime() / 1000)) / interval;
    const now = BigInt(Math.floor((opts.now ?? new Date()).getTime() / 1000)) / interval;
    if (first !== now) return 'flush-interval';
  }
  if (f.compression_codec !== spec.compression_codec) return 'codec';
  if (opts.flush) return 'flush';
  return undefined;
}

/**
 * The proposal the primary sends next: the spool's fragment as it is, or, when `rollReason` says
 * so, an empty fragment at its end (or at `rollToOffset`) with the spec's codec.
 */
export function nextProposal(spool: SpoolView, spec: JournalSpec_Fragment, opts: RollOptions = {}): Fragment {
  const f = spool.fragment;
  if (!rollReason(spool, spec, opts)) return f;
  const rollTo = opts.rollToOffset ?? 0n;
  let at = f.end;
  if (rollTo !== 0n) {
    if (rollTo < f.end) throw new RangeError(`roll-to offset ${rollTo} is before the spool's end ${f.end}`);
    at = rollTo;
  }
  return { ...emptyFragment(spool.journal, at, spec.compression_codec) };
}
