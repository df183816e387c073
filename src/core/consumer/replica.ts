// A shard replica of this consumer process: the seam between the process (membership,
// allocation, the Shard service: cons) and the replica lifecycle (recovery, standby, primary,
// transactions: this file and transaction.ts). See /work/briefs/27-seam.md for the seam's history.
//
// The lifecycle follows upstream's consumer/shard.go and recovery.go:
//   assigned → BACKFILL: fetch hints, play the recovery log into a fresh directory
//            → STANDBY once played to the log's head;
//   slot 0   → complete recovery: take the log over with a fenced hand-off no-op (a new random
//              author), play it through that no-op, open the store, restore its checkpoint,
//              rotate the recovered hints into the backups → PRIMARY, run transactions, storing
//              the recorder's hints under the primary key every `hintsIntervalMs`;
//   failure  → FAILED with the error, unless the failure is transient (UNAVAILABLE, a broker
//              restarting, a route changing, etcd briefly gone): those are retried with backoff
//              and never fail the shard.
// A shard without a recovery log is STANDBY at once and goes straight to its store at slot 0.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { AppendMetrics } from '../../lib/client/append-metrics.js';
import type { JournalClient } from '../../lib/client/journal-client.js';
import { backoff, isAbortError, sleep } from '../../lib/client/retry.js';
import { isTransientFailure } from './transient.js';
import type { Keyspace } from '../../lib/keyspace/client.js';
import { Publisher } from '../../lib/client/publisher.js';
import { label, labelSet } from '../../lib/protocol/labels.js';
import { durationToNanos } from '../../lib/protocol/duration.js';
import type { JournalSpec, Route } from '../../lib/protocol/gen/broker/protocol.js';
import {
  ReplicaStatus_Code,
  Status as ConsumerStatus,
  type ConsumerSpec,
  type GetHintsResponse,
  type ReplicaStatus,
  type ShardSpec,
} from '../../lib/protocol/gen/consumer/protocol.js';
import type { FSMHints } from '../../lib/protocol/gen/recoverylog/recorded_op.js';
import { journalLogSource, playLog, type PlayResult } from '../../lib/recoverylog/player.js';
import { decodeFrames, type ContentChunk } from '../../lib/recoverylog/framing.js';
import type { FSM } from '../../lib/recoverylog/fsm.js';
import { randomAuthor } from '../../lib/recoverylog/record.js';
import { takeOverLog, type Recorder } from '../../lib/recoverylog/recorder.js';
import { fetchHints, hintsResponse, pickFirstHints, shardRecoveryLog, storeRecordedHints, storeRecoveredHints, type HintsAssignment } from './hints.js';
import type { Application, Shard, ShardAssignment, Store } from './app.js';
import { Progress, runTransactions } from './transaction.js';

export { isTransientFailure };

/** The logging a replica does (the process's Logger has this shape). */
export interface ReplicaLogger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

/** What the process gives a replica. */
export interface ReplicaHost {
  readonly ks: Keyspace;
  /** The process's routed broker client. */
  readonly journals: JournalClient;
  readonly app: Application;
  readonly log: ReplicaLogger;
  /** This process's spec (id, endpoint). */
  readonly memberSpec: ConsumerSpec;
  /** The application's etcd prefix (`--etcd.prefix`): items, members and assignments live under it. */
  readonly etcdPrefix: string;
  /** Where the shards' publishers report their append buffers (the process's /metrics). */
  readonly appendMetrics?: AppendMetrics;
  /** Counts the shards' completed transactions (the process's /metrics). */
  transactionCompleted?(shard: string, messages: number, bytes: number): void;
  /**
   * Writes `status` to this replica's assignment key, reduced with the status there (as upstream's
   * ReplicaStatus.Reduce) and guarded by the assignment's mod revision as upstream; resolves once
   * written and observed. Throws when it could not (etcd away, or `assignment` is not current):
   * the replica retries with its then current assignment until written or closed.
   * `assignment` names the assignment the replica serves (its key and create revision): a status
   * is never written to another one, such as this member's new assignment of the shard after the
   * one the replica served was deleted.
   */
  setStatus(shard: string, status: ReplicaStatus, assignment: { key: string; createRevision: bigint }): Promise<void>;
}

/** One keyspace change touching the replica's shard. */
export interface ReplicaUpdate {
  spec: ShardSpec;
  specRevision: bigint;
  /** This member's assignment: its key, slot (0 = primary) and revisions. */
  assignmentKey: string;
  slot: number;
  assignmentRevision: bigint;
  assignmentCreateRevision: bigint;
  route: Route;
}

/** Tunables (tests shorten them). */
export interface ReplicaOptions {
  /** Interval of storing the primary's recorded hints (upstream: 5 minutes). */
  hintsIntervalMs?: number;
  /** Parent of the directories logs are played into (default: the OS temp dir). */
  workDir?: string;
}

/** Upstream caps an error written to etcd at 2048 characters. */
const MAX_ETCD_ERR_LEN = 2048;
const RECOVERY_LOG_CONTENT_TYPE = 'application/x-gazette-recoverylog';
const DEFAULT_HINTS_INTERVAL_MS = 5 * 60_000;

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function withMessage(prefix: string, err: unknown): Error {
  return new Error(`${prefix}: ${describe(err)}`, { cause: err });
}

export class Replica {
  private current: ReplicaUpdate | undefined;
  private readonly abort = new AbortController();
  private st: ReplicaStatus = { code: ReplicaStatus_Code.IDLE, errors: [] };
  private run: Promise<void> | undefined;
  private promote!: () => void;
  private readonly promoted = new Promise<void>((resolve) => (this.promote = resolve));
  private readonly progress = new Progress();
  private primaryReady = false;
  private recovered: GetHintsResponse | undefined;
  private dirs = new Set<string>();
  private recorder: Recorder | undefined;
  /** The state machine of a standby's tail of the log (undefined before or when tailing failed). */
  private tailed: FSM | undefined;
  private store: Store | undefined;
  private readonly shard: Shard;
  private closed = false;

  constructor(
    readonly host: ReplicaHost,
    readonly id: string,
    private readonly opts: ReplicaOptions = {},
  ) {
    const self = this;
    this.shard = {
      id,
      get fqn() {
        return `${host.etcdPrefix}/items/${id}`;
      },
      spec: () => self.spec,
      assignment: (): ShardAssignment => {
        const u = self.current!;
        return { key: u.assignmentKey, slot: u.slot, modRevision: u.assignmentRevision, createRevision: u.assignmentCreateRevision };
      },
      signal: this.abort.signal,
      journals: host.journals,
      recoveredHints: () => self.recovered,
      progress: () => ({ readThrough: new Map(self.progress.readThrough), publishAt: new Map(self.progress.publishAt) }),
    };
  }

  private get spec(): ShardSpec {
    return this.current!.spec;
  }

  private get signal(): AbortSignal {
    return this.abort.signal;
  }

  /**
   * Whether `u` is a new assignment of this member that replaces the one the replica serves
   * (upstream's resolver): not a promotion to a lower slot and not the same assignment updated,
   * but a different assignment (another create revision) at the same or a higher slot, as when a
   * primary is unassigned and the allocator at once gives this member a standby slot. Such a
   * replica is closed and a new one started: a primary must not go on as a standby.
   */
  supersededBy(u: ReplicaUpdate): boolean {
    const p = this.current;
    return p !== undefined && u.slot >= p.slot && u.assignmentCreateRevision !== p.assignmentCreateRevision;
  }

  /** Each keyspace change that touches this shard. Idempotent. */
  update(u: ReplicaUpdate): void {
    if (this.closed) return;
    this.current = u;
    if (u.slot === 0) this.promote();
    this.run ??= this.lifecycle();
  }

  /** The replica's own status (as last written by it). */
  status(): ReplicaStatus {
    return { code: this.st.code, errors: [...this.st.errors] };
  }

  /** Primary only: the read-through offsets of completed transactions (Stat). */
  readThrough(): Map<string, bigint> {
    return new Map(this.progress.readThrough);
  }

  /**
   * Primary only: the end offsets of the acknowledgements its last transactions wrote, by
   * journal (Stat's publish_at: a reader that waits for them sees the shard's output committed).
   */
  publishAt(): Map<string, bigint> {
    return new Map(this.progress.publishAt);
  }

  /** Whether the replica serves as primary (its store restored): Stat may wait on it. */
  get isPrimaryReady(): boolean {
    return this.primaryReady;
  }

  /**
   * Primary only: resolves once read-through reaches `offsets` (each journal at least). Rejects
   * when `signal` aborts or the replica closes first.
   */
  async waitForReadThrough(offsets: Map<string, bigint>, signal: AbortSignal): Promise<void> {
    for (;;) {
      if (this.primaryReady && this.progress.reached(offsets)) return;
      if (signal.aborted) throw new Error(`shard ${this.id}: waiting for read-through cancelled`, { cause: signal.reason });
      if (this.closed) throw new Error(`shard ${this.id}: the replica closed`);
      const changed = this.progress.changed();
      await new Promise<void>((resolve) => {
        const done = () => {
          signal.removeEventListener('abort', done);
          resolve();
        };
        signal.addEventListener('abort', done, { once: true });
        void changed.then(done);
      });
    }
  }

  /** Hints the shard was recovered from (GetHints answers from etcd; this is for the app). */
  recoveredHints(): GetHintsResponse | undefined {
    return this.recovered;
  }

  /** Stops the replica (unassigned, or the process exits) and releases what it holds. */
  async close(): Promise<void> {
    if (this.closed) return this.run?.catch(() => undefined);
    this.closed = true;
    this.abort.abort(new Error(`shard ${this.id}: replica closed`));
    this.promote(); // a standby waiting for promotion wakes and sees the abort
    this.progress.wakeAll();
    await this.run?.catch(() => undefined);
    await this.recorder?.barrier().catch(() => undefined);
    if (this.store) {
      try {
        await this.store.destroy();
      } catch (err) {
        this.host.log.warn('store destroy failed', { shard: this.id, err: describe(err) });
      }
    }
    for (const d of this.dirs) await rm(d, { recursive: true, force: true }).catch(() => undefined);
  }

  // ---- lifecycle ---------------------------------------------------------------------------

  private async lifecycle(): Promise<void> {
    let phase = 'serveStandby';
    try {
      await this.serveStandby();
      if (this.signal.aborted) return;
      phase = 'servePrimary';
      await this.servePrimary();
    } catch (err) {
      if (this.signal.aborted) return;
      let msg = describe(withMessage(phase === 'serveStandby' ? 'beginRecovery' : 'servePrimary', err));
      if ([...msg].length > MAX_ETCD_ERR_LEN) msg = [...msg].slice(0, MAX_ETCD_ERR_LEN).join('') + ' ...[truncated]';
      this.host.log.error(`${phase} failed`, { shard: this.id, err: msg });
      await this.writeStatus({ code: ReplicaStatus_Code.FAILED, errors: [msg] });
    }
  }

  /** Writes a status, retrying with backoff until written or the replica closes (upstream's updateStatusWithRetry). */
  private async writeStatus(status: ReplicaStatus): Promise<void> {
    this.st = status;
    for (let attempt = 0; !this.signal.aborted; attempt++) {
      try {
        const u = this.current!;
        await this.host.setStatus(this.id, status, { key: u.assignmentKey, createRevision: u.assignmentCreateRevision });
        return;
      } catch (err) {
        if (attempt > 0) this.host.log.warn('failed to advertise shard status (will retry)', { shard: this.id, err: describe(err), attempt });
        await sleep(backoff(attempt), this.signal).catch(() => undefined);
      }
    }
  }

  /** Runs `fn` until it succeeds, retrying transient failures with backoff (never failing on them). */
  private async retrying<T>(what: string, fn: () => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await fn();
      } catch (err) {
        if (this.signal.aborted) throw err;
        if (!isTransientFailure(err)) throw withMessage(what, err);
        this.host.log.warn(`${what} failed (will retry)`, { shard: this.id, err: describe(err), attempt });
        await sleep(backoff(attempt), this.signal);
      }
    }
  }

  private async newDir(): Promise<string> {
    const parent = this.opts.workDir ?? tmpdir();
    const dir = await mkdtemp(path.join(parent, this.id.replaceAll('/', '_') + '-'));
    this.dirs.add(dir);
    return dir;
  }

  private async dropDir(dir: string): Promise<void> {
    this.dirs.delete(dir);
    await rm(dir, { recursive: true, force: true });
  }

  /** BACKFILL → STANDBY; returns once promoted (or aborted). */
  private async serveStandby(): Promise<void> {
    const log = shardRecoveryLog(this.spec);
    if (!log) {
      await this.writeStatus({ code: ReplicaStatus_Code.STANDBY, errors: [] });
      await this.promoted;
      return;
    }
    await this.writeStatus({ code: ReplicaStatus_Code.BACKFILL, errors: [] });
    // Already primary: completing recovery plays the log anyway; playing it first as a standby
    // would only delay the shard.
    if (this.current!.slot === 0) return;
    const picked = await this.retrying('GetHints', async () => pickFirstHints(await fetchHints(this.host.ks, this.spec), log));
    await this.retrying('fetching log spec', () => this.checkLogSpec(picked.log));
    const dir = await this.newDir();
    let played: PlayResult;
    try {
      // The head comes from a barrier (an empty append, committed by the log's primary): the
      // write head a broker reports can be behind the log's when that broker restarted and lost
      // its unpersisted content, and playing hints against it reads as data loss.
      played = await this.retrying(`playing log ${picked.log}`, () =>
        playLog(journalLogSource(this.host.journals, { head: 'barrier', block: true, signal: this.signal }), picked, dir, { signal: this.signal, clearDir: true }),
      );
    } finally {
      // The files are not kept: completion at promotion plays the live files again through the
      // hand-off, from the hints of the tailed state (below), which name only the live files'
      // latest segments.
      await this.dropDir(dir);
    }
    if (this.signal.aborted) return;
    this.host.log.info('now tailing live log', { shard: this.id, log });
    await this.writeStatus({ code: ReplicaStatus_Code.STANDBY, errors: [] });
    const tail = new AbortController();
    const tailing = this.tailLog(picked.log, played.fsm, played.heads.get(picked.log) ?? 0n, AbortSignal.any([this.signal, tail.signal]));
    await this.promoted;
    tail.abort();
    await tailing;
  }

  /**
   * Tails the log as a hot standby: a blocking read from the played head whose ops go through
   * the played state machine (no files are written), so that at promotion the hand-off plays
   * from hints of the latest state rather than from the hints in etcd (the primary stores them
   * every few minutes). A failure only ends the tail: promotion then uses etcd's hints.
   */
  private async tailLog(log: string, fsm: FSM, from: bigint, signal: AbortSignal): Promise<void> {
    const journals = this.host.journals;
    async function* content(): AsyncGenerator<ContentChunk> {
      for (let attempt = 0; !signal.aborted; attempt++) {
        const r = journals.read({ journal: log, offset: from, block: true }, { signal });
        try {
          for await (const c of r) {
            if (c.content.length === 0) continue;
            const bytes = Uint8Array.prototype.slice.call(c.content);
            c.release?.();
            from = c.offset + BigInt(bytes.length);
            yield { offset: c.offset, content: bytes };
            attempt = 0;
          }
        } catch (err) {
          if (signal.aborted || !isTransientFailure(err)) throw err;
          await sleep(backoff(attempt), signal);
        }
      }
    }
    this.tailed = fsm;
    try {
      for await (const ev of decodeFrames(log, from, content())) {
        if (ev.kind === 'op') fsm.apply(ev.op, ev.payload);
      }
    } catch (err) {
      if (signal.aborted) return;
      this.host.log.warn('tailing the recovery log stopped', { shard: this.id, log, err: describe(err) });
      this.tailed = undefined;
    }
  }

  /** Completes recovery, then runs transactions as PRIMARY until closed or failed. */
  private async servePrimary(): Promise<void> {
    this.host.log.info('promoted to primary', { shard: this.id, log: shardRecoveryLog(this.spec) });
    const log = shardRecoveryLog(this.spec);
    let recoveredHints: FSMHints | undefined;
    if (log) {
      const fetched = await this.retrying('GetHints', () => fetchHints(this.host.ks, this.spec));
      this.recovered = { status: ConsumerStatus.OK, header: undefined, extension: Buffer.alloc(0), ...hintsResponse(fetched) };
      // A standby that tailed the log plays from hints of the state it reached; else etcd's.
      const tailed = this.tailed?.lastLog === log ? this.tailed.buildHints(log) : undefined;
      let picked = tailed ?? pickFirstHints(fetched, log);
      this.host.log.info('completing recovery', { shard: this.id, log, from: tailed ? 'tailed state' : 'stored hints', nextSeqNo: this.tailed?.nextSeqNo });
      await this.retrying('fetching log spec', () => this.checkLogSpec(picked.log));
      const author = randomAuthor();
      const dir = await this.newDir();
      // Plays the log to a barrier, hands it off to `author` with a no-op fencing the author
      // register, checks nothing else got in first, and opens a Recorder continuing that state.
      const takeOver = () =>
        takeOverLog({
          client: this.host.journals,
          source: journalLogSource(this.host.journals, { head: 'barrier', block: true, signal: this.signal }),
          hints: picked,
          dir,
          author,
          signal: this.signal,
          onRetry: (r) => this.host.log.warn('recovery log append failed (will retry)', { shard: this.id, log: r.log, attempt: r.attempt, err: describe(r.error) }),
        });
      let taken: Awaited<ReturnType<typeof takeOverLog>>;
      try {
        taken = await this.retrying(`recovering log ${picked.log}`, takeOver);
      } catch (err) {
        if (!tailed || this.signal.aborted) throw err;
        // The tailed state did not play (it should): recover from etcd's hints instead.
        this.host.log.warn('recovery from the tailed state failed, recovering from the stored hints', { shard: this.id, err: describe(err) });
        picked = pickFirstHints(fetched, log);
        taken = await this.retrying(`recovering log ${picked.log}`, takeOver);
      }
      recoveredHints = taken.recoveredHints;
      this.recorder = taken.recorder;
    }

    const app = this.host.app;
    let store: Store;
    try {
      store = await app.newStore(this.shard, this.recorder);
    } catch (err) {
      throw withMessage('completeRecovery: app.newStore', err);
    }
    this.store = store;
    const cp = await store.restoreCheckpoint(this.shard).catch((err: unknown) => {
      throw withMessage('completeRecovery: store.restoreCheckpoint', err);
    });

    // Rotate the recovered hints into the backups only after the store opened and restored its
    // checkpoint, so a broken recovery does not overwrite good backups (as upstream).
    if (recoveredHints && recoveredHints.log === log) {
      for (let attempt = 0; ; attempt++) {
        try {
          await storeRecoveredHints(this.host.ks, this.spec, this.hintsAssignment(), recoveredHints);
          break;
        } catch (err) {
          if (this.signal.aborted) return;
          this.host.log.warn('failed to store recovered hints (will retry)', { shard: this.id, err: describe(err), attempt });
          await sleep(backoff(attempt), this.signal);
        }
      }
    }

    for (const src of this.spec.sources) this.progress.readThrough.set(src.journal, 0n);
    this.progress.signal((rt) => {
      for (const [j, s] of Object.entries(cp.sources)) rt.set(j, s.read_through);
    });
    this.primaryReady = true;
    await this.writeStatus({ code: ReplicaStatus_Code.PRIMARY, errors: [] });
    if (this.signal.aborted) return;

    const spec = this.spec;
    const publisher = new Publisher(this.host.journals, {
      append: {
        signal: this.signal,
        metrics: this.host.appendMetrics,
        onRetry: (r) => this.host.log.warn('publish append failed (will retry)', { shard: this.id, journal: r.journal, attempt: r.attempt }),
      },
    });
    const recorder = this.recorder;
    await runTransactions({
      shard: this.shard,
      app,
      store,
      journals: this.host.journals,
      sources: spec.sources,
      checkpoint: cp,
      minTxnMs: Number(durationToNanos(spec.min_txn_duration) / 1_000_000n),
      maxTxnMs: Number(durationToNanos(spec.max_txn_duration) / 1_000_000n),
      readQueueSize: spec.read_channel_size,
      progress: this.progress,
      publisher,
      storeHints: recorder ? () => this.storeRecordedHints(recorder) : undefined,
      hintsIntervalMs: this.opts.hintsIntervalMs ?? DEFAULT_HINTS_INTERVAL_MS,
      journalSpec: (j) => this.journalSpec(j),
      waitForAck: !spec.disable_wait_for_ack,
      ringSize: spec.ring_buffer_size,
      completed: (messages, bytes) => this.host.transactionCompleted?.(this.shard.fqn, messages, bytes),
      signal: this.signal,
      log: this.host.log,
    }).catch((err: unknown) => {
      if (this.signal.aborted && isAbortError(err)) return;
      throw withMessage('runTransactions', err);
    });
  }

  private hintsAssignment(): HintsAssignment {
    return { key: this.current!.assignmentKey, createRevision: this.current!.assignmentCreateRevision };
  }

  /** Stores the recorder's hints as the primary's; etcd being unavailable only skips this round (as upstream). */
  private async storeRecordedHints(recorder: Recorder): Promise<void> {
    const hints = await recorder.buildHints();
    try {
      await storeRecordedHints(this.host.ks, this.spec, this.hintsAssignment(), hints);
    } catch (err) {
      if (!isTransientFailure(err)) throw withMessage('storeRecordedHints', err);
      this.host.log.warn('failed to store recorded hints (will retry)', { shard: this.id, err: describe(err) });
    }
  }

  // ---- journals ------------------------------------------------------------------------------

  private async journalSpec(journal: string): Promise<JournalSpec> {
    const res = await this.host.journals.list({ include: labelSet(label('name', journal)), exclude: undefined }, { signal: this.signal });
    const spec = res.journals.find((j) => j.spec?.name === journal)?.spec;
    if (!spec) throw new Error(`journal ${journal} does not exist`);
    return spec;
  }

  /** The log must exist and be labelled as a recovery log (upstream's beginRecovery check). */
  private async checkLogSpec(log: string): Promise<void> {
    const spec = await this.journalSpec(log);
    const ct = spec.labels?.labels.filter((l) => l.name === 'content-type').map((l) => l.value) ?? [];
    if (ct[0] !== RECOVERY_LOG_CONTENT_TYPE) {
      throw new Error(`expected label content-type value ${RECOVERY_LOG_CONTENT_TYPE} (got ${ct[0] ?? ''})`);
    }
  }
}
