// The write side of a recovery log: a Recorder turns file-system changes of a local directory
// into RecordedOps appended to the log journal, in the exact format and order Gazette's Go
// recorder writes, so a log written here plays back on a Go consumer and the other way round.
//
// How it works:
// - The op state (seq_no, running checksum, the files' links and segments) is a LogWriter over
//   the FSM the player handed over; every recorded call applies its ops to it at once (the
//   local change already happened), so `fsm.links` always mirrors the directory.
// - Bytes go out through one ordered chain of appends to the log journal, one RPC at a time:
//   whatever was recorded while an append was in flight goes out, whole, in the next one. A
//   barrier is a point in that chain; it resolves when everything recorded before it has
//   committed, and `barrier(waitFor)` also holds everything recorded after it until `waitFor`
//   settled (a commit's state must not reach the log before the writes it acknowledges).
// - Fencing, as upstream: the first append is a zero-byte barrier learning the write head (a
//   lower bound of every later op's offset). When recording to a log other than the one the
//   state was played from, a no-op continuing that state goes out with `union_registers` =
//   the author's fence (`author=<author in base 32>`). From then on every append carries
//   `check_registers` including that fence. A union replaces the values of a label of the same
//   name, so when another process hands the log off to itself (its player appends a no-op
//   unioning `author=<its author>`), this recorder's check fails at the broker from then on:
//   a zombie primary cannot append past a hand-off.
// - Transient append failures are retried with backoff forever, like Go's AppendService; a
//   retried append may duplicate bytes, which playback skips (a duplicate op has a past
//   seq_no). Final failures (a register mismatch after a hand-off, a missing journal, ...)
//   fail the recorder: every barrier after that rejects with the error.
import { constants as FS, readFileSync } from 'node:fs';
import path from 'node:path';
import { Status, type AppendResponse, type LabelSelector, type LabelSet } from '../protocol/gen/broker/protocol.js';
import type { FSMHints } from '../protocol/gen/recoverylog/recorded_op.js';
import { BrokerStatusError, GazctlError } from '../protocol/errors.js';
import type { AppendOptions } from '../client/appender.js';
import { abortError, backoff, isAbortError, sleep } from '../client/retry.js';
import { FSM } from './fsm.js';
import { RecoveryLogError, decodeFrames } from './framing.js';
import { playLog, type LogSource, type PlayOptions, type PlayResult } from './player.js';
import { emptyHints } from './hints.js';
import { LogWriter, authorFence, type RecordedFrame } from './record.js';

/** Paths recorded as properties (small files kept in hints) rather than as files: RocksDB's database id. */
export const PROPERTY_FILES: ReadonlySet<string> = new Set(['/IDENTITY']);

/** One append as the recorder drives it (our Appender fits). */
export interface RecorderAppend {
  write(chunk: Uint8Array): Promise<void>;
  commit(): Promise<AppendResponse>;
  abort(): void;
}

/** What the recorder appends through (a JournalClient fits). */
export interface RecorderAppendClient {
  append(journal: string, opts?: AppendOptions): RecorderAppend;
}

/** An append that failed and will be retried. */
export interface RecorderRetryInfo {
  log: string;
  attempt: number;
  error: unknown;
  delayMs: number;
}

export interface RecorderOptions {
  client: RecorderAppendClient;
  /** The recovery log recorded to. */
  log: string;
  /** The played state to continue (default: a new, empty log). */
  fsm?: FSM;
  /** Non-zero author of the ops (upstream: a random uint32, see randomAuthor). */
  author: number;
  /** Absolute, normalized directory holding the recorded files; paths are recorded relative to it. */
  dir: string;
  /** Stops retries and fails the recorder when aborted. */
  signal?: AbortSignal;
  onRetry?: (info: RecorderRetryInfo) => void;
  /** Delay before retry `attempt` (default: the clients' backoff). */
  delay?: (attempt: number) => number;
  /** Skip register checks on appends (upstream's DisableRegisterChecks, for tests of dead branches). */
  disableRegisterChecks?: boolean;
}

interface Deferred<T> {
  promise: Promise<T>;
  resolve(v: T): void;
  reject(e: unknown): void;
}

function deferred<T>(): Deferred<T> {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  promise.catch(() => undefined); // observed by whoever awaits it
  return { promise, resolve, reject };
}

/** One append of the chain: bytes of whole recorded calls, sent once `waitFor` settled. */
interface QueuedAppend {
  chunks: Uint8Array[];
  waitFor: Promise<unknown>[];
  /** Registers unioned by this append (the fenced no-op). */
  union?: LabelSet;
  /** Whether this append carries the register check (all but the ones before fencing). */
  check: boolean;
  started: boolean;
  done: Deferred<AppendResponse>;
}

/** Statuses an append is not retried on (as Go's AppendService). */
const FINAL_STATUSES = new Set<Status>([
  Status.JOURNAL_NOT_FOUND,
  Status.NOT_ALLOWED,
  Status.WRONG_APPEND_OFFSET,
  Status.INDEX_HAS_GREATER_OFFSET,
  Status.REGISTER_MISMATCH,
  Status.FRAGMENT_STORE_UNHEALTHY,
]);

function isFinalAppendError(err: unknown): boolean {
  if (isAbortError(err)) return true;
  return err instanceof BrokerStatusError && FINAL_STATUSES.has(err.status);
}

export class Recorder {
  readonly log: string;
  readonly author: number;
  readonly dir: string;
  /** The op state; its links mirror the recorded directory. */
  private readonly writer: LogWriter;
  private readonly client: RecorderAppendClient;
  private readonly opts: RecorderOptions;
  private checkRegisters: LabelSelector | undefined;
  private readonly queue: QueuedAppend[] = [];
  private pumping = false;
  private failure: unknown;
  /** Highest commit end seen (the lower bound of later ops' offsets). */
  private head = 0n;
  /** The response of the last append committed. */
  private last: AppendResponse | undefined;

  private constructor(opts: RecorderOptions) {
    if (opts.dir !== path.posix.normalize(opts.dir) || !path.posix.isAbsolute(opts.dir) || (opts.dir.length > 1 && opts.dir.endsWith('/'))) {
      throw new RecoveryLogError(`recorder directory ${JSON.stringify(opts.dir)} is not an absolute, normalized path`);
    }
    this.opts = opts;
    this.client = opts.client;
    this.log = opts.log;
    this.author = opts.author;
    this.dir = opts.dir;
    this.writer = new LogWriter({ log: opts.log, author: opts.author, fsm: opts.fsm ?? new FSM(emptyHints(opts.log)) });
  }

  /**
   * A recorder continuing `opts.fsm` (as upstream's NewRecorder): a barrier learns the write
   * head; when the log differs from the one the state was played from, a fenced no-op continues
   * the state in the new log; every later append checks the author's fence.
   */
  static async open(opts: RecorderOptions): Promise<Recorder> {
    const r = new Recorder(opts);
    await r.headBarrier();
    if (r.log !== r.writer.fsm.lastLog) {
      r.enqueue([r.writer.noop()], { union: fenceLabels(r.author), check: false, fresh: true });
    }
    if (!opts.disableRegisterChecks) r.checkRegisters = { include: fenceLabels(r.author), exclude: undefined };
    await r.barrier();
    return r;
  }

  /** The op state (read only: the recorder applies to it). */
  get fsm(): FSM {
    return this.writer.fsm;
  }

  /** The last commit end seen. */
  get writeHead(): bigint {
    return this.head;
  }

  /** The error that failed the recorder, if it failed. */
  get error(): unknown {
    return this.failure;
  }

  /** The recorded path of `file` (a path under dir): relative to dir, with a leading '/'. */
  normalizePath(file: string): string {
    const abs = path.posix.normalize(file);
    const root = this.dir === '/' ? '' : this.dir;
    if (!abs.startsWith(root + '/') || abs.length <= root.length + 1) throw new RecoveryLogError(`${JSON.stringify(file)} is not a file under ${this.dir}`);
    return path.posix.normalize(abs.slice(root.length));
  }

  private fnodeOf(p: string, what: string): bigint {
    const fnode = this.writer.fsm.links.get(p);
    if (fnode === undefined) throw new RecoveryLogError(`${what} of unknown path ${p}`);
    return fnode;
  }

  /** Records the creation (or truncation) of `file`; returns its fnode. */
  recordCreate(file: string): bigint {
    return this.recordOpenFile(file, FS.O_RDWR | FS.O_CREAT | FS.O_TRUNC);
  }

  /**
   * Records an open of `file` with node:fs `flags` (as upstream): with O_TRUNC an existing file
   * is unlinked and a new fnode created; with O_CREAT a missing file is created. Returns the fnode.
   */
  recordOpenFile(file: string, flags: number): bigint {
    const p = this.normalizePath(file);
    if (PROPERTY_FILES.has(p)) throw new RecoveryLogError(`unexpected open of property path ${p}`);
    if (flags & FS.O_APPEND) throw new RecoveryLogError(`O_APPEND is not supported by the recorder (${p})`);
    let fnode = this.writer.fsm.links.get(p);
    if (fnode === undefined && !(flags & FS.O_CREAT)) throw new RecoveryLogError(`open of unknown file ${p} without O_CREAT`);
    if (fnode !== undefined && flags & FS.O_EXCL) throw new RecoveryLogError(`open of known file ${p} with O_EXCL`);
    const frames: RecordedFrame[] = [];
    if (fnode !== undefined && flags & FS.O_TRUNC) {
      frames.push(this.writer.unlink(fnode, p));
      fnode = undefined;
    }
    if (fnode === undefined) {
      const c = this.writer.create(p);
      frames.push(c);
      fnode = c.fnode;
    }
    this.enqueue(frames);
    return fnode;
  }

  /** Records `data` written at `offset` of the file `fnode`. */
  recordWriteAt(fnode: bigint, data: Uint8Array, offset: bigint): void {
    this.enqueue([this.writer.write(fnode, data, offset)]);
  }

  /** Records the removal of `file`. */
  recordRemove(file: string): void {
    const p = this.normalizePath(file);
    if (PROPERTY_FILES.has(p)) throw new RecoveryLogError(`unexpected delete of property path ${p}`);
    this.enqueue([this.writer.unlink(this.fnodeOf(p, 'delete'), p)]);
  }

  /** Records a new hard link `target` of the file at `src`. */
  recordLink(src: string, target: string): void {
    const s = this.normalizePath(src);
    const t = this.normalizePath(target);
    if (PROPERTY_FILES.has(t)) throw new RecoveryLogError(`unexpected link of property path ${t}`);
    this.enqueue([this.writer.link(this.fnodeOf(s, 'link'), t)]);
  }

  /**
   * Records the rename of `src` to `target` as upstream decomposes it: unlink a file already at
   * target; link the file to target (or, for a property path, record the target's content,
   * read from disk, as a property); unlink it from src.
   */
  recordRename(src: string, target: string): void {
    const s = this.normalizePath(src);
    const t = this.normalizePath(target);
    const fnode = this.fnodeOf(s, 'rename');
    const frames: RecordedFrame[] = [];
    const prev = this.writer.fsm.links.get(t);
    if (prev !== undefined) frames.push(this.writer.unlink(prev, t));
    if (PROPERTY_FILES.has(t)) frames.push(this.writer.property(t, readFileSync(target, 'utf8')));
    else frames.push(this.writer.link(fnode, t));
    frames.push(this.writer.unlink(fnode, s));
    this.enqueue(frames);
  }

  /**
   * A point in the append chain: resolves with an append response once everything recorded
   * before it is committed to the log. Ops recorded after `barrier(waitFor)` are held until
   * every promise of `waitFor` resolved (a rejection fails the recorder). Rejects once the
   * recorder failed. Without `waitFor` it adds no append of its own when something is queued
   * (appends commit in order) or everything already committed.
   */
  barrier(waitFor: Promise<unknown>[] = []): Promise<AppendResponse> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    const tail = this.queue[this.queue.length - 1];
    if (waitFor.length > 0 || (!tail && !this.last)) return this.enqueue([], { waitFor, fresh: true }).done.promise;
    if (tail) return tail.done.promise;
    return Promise.resolve(this.last!);
  }

  /** A zero-byte append after everything queued: its commit is a current write head of the log. */
  headBarrier(): Promise<AppendResponse> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    return this.enqueue([], { fresh: true }).done.promise;
  }

  /**
   * Hints to play back the recorded directory as it is now; resolves once every op they
   * reference is committed (as upstream's BuildHints).
   */
  async buildHints(): Promise<FSMHints> {
    const hints = this.writer.hints();
    await this.barrier();
    return hints;
  }

  private enqueue(frames: RecordedFrame[], o: { waitFor?: Promise<unknown>[]; union?: LabelSet; check?: boolean; fresh?: boolean } = {}): QueuedAppend {
    let q = this.queue[this.queue.length - 1];
    if (!q || q.started || o.fresh || q.union) {
      q = { chunks: [], waitFor: o.waitFor ?? [], union: o.union, check: o.check ?? true, started: false, done: deferred() };
      if (this.failure !== undefined) q.done.reject(this.failure);
      else this.queue.push(q);
    }
    for (const f of frames) q.chunks.push(f.bytes);
    this.pump();
    return q;
  }

  private pump(): void {
    if (this.pumping || this.failure !== undefined) return;
    this.pumping = true;
    void this.run().finally(() => {
      this.pumping = false;
      if (this.queue.length > 0 && this.failure === undefined) this.pump();
    });
  }

  private async run(): Promise<void> {
    while (this.queue.length > 0) {
      const q = this.queue[0]!;
      try {
        if (q.waitFor.length > 0) await Promise.all(q.waitFor);
        q.started = true;
        const res = await this.appendWithRetry(q);
        const c = res.commit;
        if (c) {
          if (c.begin < this.head) throw new RecoveryLogError(`${this.log}: commit [${c.begin}, ${c.end}) begins before the write head ${this.head} seen before (broker data loss?)`);
          this.head = c.end;
          this.writer.observeHead(c.end);
        }
        this.queue.shift();
        this.last = res;
        q.done.resolve(res);
      } catch (err) {
        this.fail(err);
        return;
      }
    }
  }

  private fail(err: unknown): void {
    if (this.failure !== undefined) return;
    this.failure = err instanceof Error ? err : new GazctlError(`recording to ${this.log} failed: ${String(err)}`);
    for (const q of this.queue.splice(0)) q.done.reject(this.failure);
  }

  private async appendWithRetry(q: QueuedAppend): Promise<AppendResponse> {
    const total = q.chunks.reduce((n, c) => n + c.length, 0);
    const data = new Uint8Array(total);
    let at = 0;
    for (const c of q.chunks) {
      data.set(c, at);
      at += c.length;
    }
    q.chunks = [data];
    const signal = this.opts.signal;
    for (let attempt = 0; ; attempt++) {
      if (signal?.aborted) throw abortError(signal);
      const a = this.client.append(this.log, {
        check_registers: q.check ? this.checkRegisters : undefined,
        union_registers: q.union,
        signal,
      });
      try {
        if (data.length > 0) await a.write(data);
        return await a.commit();
      } catch (err) {
        a.abort();
        if (isFinalAppendError(err)) throw err;
        const delayMs = (this.opts.delay ?? backoff)(attempt);
        this.opts.onRetry?.({ log: this.log, attempt, error: err, delayMs });
        await sleep(delayMs, signal);
      }
    }
  }
}

function fenceLabels(author: number): LabelSet {
  const f = authorFence(author);
  return { labels: [{ name: f.name, value: f.value, prefix: false }] };
}

/** The journal register set fencing appends for `author` (upstream's Author.Fence). */
export function authorFenceLabels(author: number): LabelSet {
  return fenceLabels(author);
}

/**
 * Hands `log` off to `author` once played to its head (upstream's Player.InjectHandoff): appends
 * a no-op continuing `fsm` with `union_registers` = the author's fence. Returns the commit of the
 * no-op; whether it took (no other op got in first) is for the caller to check by reading the
 * log through the commit's end, see {@link handoffApplied}.
 */
export async function injectHandoff(
  client: RecorderAppendClient,
  log: string,
  fsm: FSM,
  author: number,
  opts: { signal?: AbortSignal; onRetry?: (info: RecorderRetryInfo) => void; delay?: (attempt: number) => number } = {},
): Promise<{ frame: RecordedFrame; begin: bigint; end: bigint }> {
  const w = new LogWriter({ log, author, fsm: fsm.clone() });
  const frame = w.noop();
  for (let attempt = 0; ; attempt++) {
    if (opts.signal?.aborted) throw abortError(opts.signal);
    const a = client.append(log, { union_registers: fenceLabels(author), signal: opts.signal });
    try {
      await a.write(frame.bytes);
      const res = await a.commit();
      return { frame, begin: res.commit?.begin ?? 0n, end: res.commit?.end ?? 0n };
    } catch (err) {
      a.abort();
      if (isFinalAppendError(err)) throw err;
      const delayMs = (opts.delay ?? backoff)(attempt);
      opts.onRetry?.({ log, attempt, error: err, delayMs });
      await sleep(delayMs, opts.signal);
    }
  }
}

export interface TakeOverOptions {
  /** Appends through (a routed JournalClient). */
  client: RecorderAppendClient;
  /** Reads the logs (journalLogSource over the same client). */
  source: LogSource;
  /** The hints to recover (the shard's primary hints, else its newest backup, else empty hints). */
  hints: FSMHints;
  /** The directory played into (removed first); the recorder records it. Absolute, normalized. */
  dir: string;
  /** The new author (randomAuthor()). */
  author: number;
  /** The log recorded to from here on (default hints.log). */
  log?: string;
  signal?: AbortSignal;
  onRetry?: (info: RecorderRetryInfo) => void;
  onEvent?: PlayOptions['onEvent'];
  /** Attempts when another writer's ops keep getting in before the hand-off (default 5). */
  attempts?: number;
}

export interface TakeOverResult {
  recorder: Recorder;
  /** The playback (files, counters; its hints are those at the log's head before the hand-off). */
  played: PlayResult;
  /** Hints of the recovered state, to rotate into the backups once the store opened (upstream: BuildHints of the played FSM). */
  recoveredHints: FSMHints;
}

/**
 * Recovers a shard's directory and takes its log over, as upstream's consumer does at
 * promotion: plays `hints` to the log's head into `dir`, hands the log off to `author` (a
 * no-op that also fences the author register), reads the log on through the hand-off to check
 * that no other writer's op got in first (else plays again), and opens a Recorder continuing
 * that state.
 */
export async function takeOverLog(o: TakeOverOptions): Promise<TakeOverResult> {
  const attempts = o.attempts ?? 5;
  for (let attempt = 0; ; attempt++) {
    const played = await playLog(o.source, o.hints, o.dir, { clearDir: true, signal: o.signal, onEvent: o.onEvent });
    const recoveredHints = played.fsm.buildHints(played.fsm.lastLog);
    const head = played.heads.get(o.hints.log)!;
    const fsm = played.fsm.clone();
    const h = await injectHandoff(o.client, o.hints.log, fsm, o.author, { signal: o.signal, onRetry: o.onRetry });
    if (await readThroughHandoff(o.source, o.hints.log, head, h.end, fsm, o.author, o.signal)) {
      const recorder = await Recorder.open({ client: o.client, log: o.log ?? o.hints.log, fsm, author: o.author, dir: o.dir, signal: o.signal, onRetry: o.onRetry });
      return { recorder, played, recoveredHints };
    }
    if (attempt + 1 >= attempts) throw new RecoveryLogError(`could not hand ${o.hints.log} off to author ${o.author} in ${attempts} attempts: other writers kept appending`);
  }
}

/**
 * Applies the ops of `log` in [from, to) to `fsm` (no local effects): true when the hand-off
 * no-op of `author` applied and nothing else moved the state on before it.
 */
async function readThroughHandoff(source: LogSource, log: string, from: bigint, to: bigint, fsm: FSM, author: number, signal?: AbortSignal): Promise<boolean> {
  await source.head(log); // read up to the current head, past the hand-off
  let others = false;
  let took = false;
  for await (const ev of decodeFrames(log, from, source.read(log, from, signal))) {
    if (ev.kind !== 'op') continue;
    if (ev.op.first_offset >= to) break;
    const outcome = fsm.apply(ev.op, ev.payload);
    if (outcome === 'applied' || outcome === 'untracked') {
      if (ev.op.author === author && !ev.op.create && !ev.op.link && !ev.op.unlink && !ev.op.write && !ev.op.property) {
        took = true;
        break;
      }
      others = true;
    }
  }
  return took && !others;
}
