// The one Apply path of the library, for journals and shards alike: changes are cut into
// batches (each its own etcd transaction), sent in order with up to `parallel` of them in flight
// at once, and the first failure stops the run with an ApplyError saying which batch failed,
// exactly which batches were applied, and why.
import { BrokerStatusError, ConsumerStatusError, GazctlError, TransportError, ValidationError } from '../protocol/errors.js';
import { Status as BrokerStatus } from '../protocol/gen/broker/protocol.js';
import { Status as ConsumerStatus } from '../protocol/gen/consumer/protocol.js';
import { batchChanges } from './batch.js';
import { grpcCode, isAbortError } from './retry.js';

/**
 * Why an Apply batch failed:
 * - `too-many-operations`: etcd refused the transaction for having more operations than its
 *   per-transaction limit (128 by default); smaller batches would go through.
 * - `revision-mismatch`: the transaction's revision checks failed (status ETCD_TRANSACTION_FAILED):
 *   an item changed or was deleted since it was listed, or a create names an existing one.
 * - `other`: anything else (unreachable service, authorization, another status).
 */
export type ApplyFailureReason = 'too-many-operations' | 'revision-mismatch' | 'other';

/** Progress of a run, passed to `onBatch` as each batch succeeds. */
export interface ApplyBatchInfo {
  /**
   * 0-based index of the batch just applied. With `parallel` > 1 batches may answer out of
   * order, so this is not always one more than the index of the call before.
   */
  index: number;
  /** Number of batches in the run. */
  batches: number;
  /** Changes in this batch. */
  size: number;
  /** Changes applied so far, this batch included (whichever batches those are). */
  applied: number;
  /** Batches applied so far, this one included. */
  done: number;
  /** Changes in the whole run. */
  total: number;
  /** Etcd revision of this batch's transaction. */
  revision: bigint;
}

export interface ApplyResult<R> {
  /** Highest etcd revision of the run's transactions (0 when the responses carried none). */
  revision: bigint;
  /** Number of transactions sent. */
  batches: number;
  /** Number of changes applied (all of them). */
  applied: number;
  /** The last batch's response (the batch with the highest index). */
  response: R;
}

export interface ApplyOptions {
  /** Most changes per transaction; 0 or absent: all in one. */
  maxTxnSize?: number;
  /**
   * Most batches in flight at once (a positive integer; default 1: each batch is sent once the
   * one before it has answered). Batches are still cut and sent in order: a batch is sent when
   * one of those in flight has answered. Each transaction waits mostly on etcd (consensus and
   * its disk sync), so a few in flight at once take about as long as one.
   */
  parallel?: number;
  /** Called as each batch succeeds (see ApplyBatchInfo.index for the order). */
  onBatch?: (info: ApplyBatchInfo) => void;
}

/**
 * An Apply run stopped at a failing batch. Every batch before it was applied; with `parallel`
 * > 1, some after it may have been too (those in flight when it failed), which
 * `appliedBatches` lists exactly.
 */
export class ApplyError extends GazctlError {
  /** 0-based indexes of the batches that were applied, ascending. */
  readonly appliedBatches: readonly number[];
  /** 0-based indexes of the batches that answered with a failure, ascending (`batchIndex` first). */
  readonly failedBatches: readonly number[];

  constructor(
    message: string,
    /** Machine-readable cause of the failure. */
    readonly reason: ApplyFailureReason,
    /** 0-based index of the failed batch (the lowest, when more than one failed). */
    readonly batchIndex: number,
    /** Number of batches in the run. */
    readonly batches: number,
    /** Changes in the failed batch. */
    readonly batchSize: number,
    /** Changes applied, by all the batches of `appliedBatches`. */
    readonly applied: number,
    /** Changes in the whole run. */
    readonly total: number,
    /** The broker's or consumer's status when it answered with one (see `cause` for which). */
    readonly status: number | undefined,
    /** That status's name. */
    readonly statusName: string | undefined,
    /** The failure itself, without the batch context (the message of a one-batch run). */
    readonly detail: string,
    /** BrokerStatusError / ConsumerStatusError for a status, else the transport (or other) error. */
    cause: unknown,
    /** Default: the batches before `batchIndex`, as in a run that sends one batch at a time. */
    appliedBatches?: readonly number[],
    /** Default: `batchIndex` alone. */
    failedBatches?: readonly number[],
  ) {
    super(message, { cause });
    this.appliedBatches = appliedBatches ?? Array.from({ length: batchIndex }, (_, i) => i);
    this.failedBatches = failedBatches ?? [batchIndex];
  }

  /** Whether the applied batches are exactly those before the failed one (always so with parallel 1). */
  get appliedInOrder(): boolean {
    return this.appliedBatches.length === this.batchIndex && this.appliedBatches.every((b, i) => b === i);
  }
}

/** What distinguishes the two services' Apply for {@link applyInBatches}. */
export interface ApplyService<R, C = unknown> {
  /** Describes the operation in messages, e.g. "applying journal specs". */
  what: string;
  /** The status error of a non-OK response (BrokerStatusError or ConsumerStatusError). */
  statusError: (status: number, context: string) => BrokerStatusError | ConsumerStatusError;
  /**
   * The item a change is about (journal name, shard ID). With `parallel` > 1, two batches that
   * name the same item are never in flight at once: the later one waits until the earlier one
   * has answered, so the item's changes reach etcd in input order. Absent: the changes are taken
   * to name distinct items.
   */
  itemName?: (change: C) => string;
}

// Etcd's error text for a transaction over its --max-txn-ops limit, as the broker or consumer
// passes it on in the gRPC status details.
const TOO_MANY_OPS = 'too many operations in txn request';

/** Whether `err` (or an error it wraps) is etcd's too-many-operations refusal. */
function isTooManyOperations(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (grpcCode(e) !== undefined && !(e instanceof TransportError)) {
      const details = (e as { details?: unknown }).details;
      if (typeof details === 'string' && details.toLowerCase().includes(TOO_MANY_OPS)) return true;
    }
  }
  return false;
}

function isRevisionMismatch(e: BrokerStatusError | ConsumerStatusError): boolean {
  return e instanceof BrokerStatusError ? e.status === BrokerStatus.ETCD_TRANSACTION_FAILED : e.status === ConsumerStatus.ETCD_TRANSACTION_FAILED;
}

/** A batch's failure, kept until the run has settled and the ApplyError can say what was applied. */
interface Failure {
  index: number;
  detail: string;
  reason: ApplyFailureReason;
  cause: unknown;
  status?: BrokerStatusError | ConsumerStatusError;
}

/**
 * For each batch, the earlier batch it must wait for: the latest one before it that names one of
 * its items (undefined where there is none). Waiting for the latest is enough, since that one in
 * turn waited for any earlier batch naming the same item. Undefined when no batches overlap.
 */
function overlaps<C>(batches: readonly C[][], itemName: (c: C) => string): (number | undefined)[] | undefined {
  const lastIn = new Map<string, number>();
  let out: (number | undefined)[] | undefined;
  for (let b = 0; b < batches.length; b++) {
    let wait: number | undefined;
    for (const c of batches[b]!) {
      const name = itemName(c);
      const prev = lastIn.get(name);
      if (prev !== undefined && prev !== b && (wait === undefined || prev > wait)) wait = prev;
      lastIn.set(name, b);
    }
    if (wait !== undefined) (out ??= [])[b] = wait;
  }
  return out;
}

/**
 * Sends `changes` through `send` in batches of at most `opts.maxTxnSize` (0 or absent: one
 * request; an empty list is still sent once), in order, with at most `opts.parallel` (default 1)
 * in flight at once. The first failure stops the sending of further batches; once the batches in
 * flight have answered, it is thrown as an {@link ApplyError} naming the lowest failed batch and
 * exactly the batches that were applied. An abort stops the run the same way and is rethrown as
 * is.
 *
 * With `prepare`, each batch is prepared (e.g. encoded) before it is sent, and `send` gets the
 * result with it: once the window of batches in flight is full, the next batch is prepared while
 * they are, so the wait for the service and the work for the next request overlap. A `prepare`
 * that throws is not a failure of its own: `send` then gets undefined for that batch and handles
 * it unprepared (so any error comes from sending it, as without `prepare`).
 */
export async function applyInBatches<C, R extends { status: number; header?: { etcd?: { revision: bigint } } }, P = never>(
  changes: readonly C[],
  send: (batch: C[], prepared?: P) => Promise<R>,
  service: ApplyService<R, C>,
  opts: ApplyOptions = {},
  prepare?: (batch: C[]) => P,
): Promise<ApplyResult<R>> {
  const parallel = opts.parallel ?? 1;
  if (!Number.isSafeInteger(parallel) || parallel < 1) throw new ValidationError(`must be a positive integer (got ${parallel})`, 'parallel');
  const batches = batchChanges(changes, opts.maxTxnSize ?? 0);
  const n = batches.length;
  const total = changes.length;
  const width = Math.min(parallel, n);
  const waitFor = width > 1 && service.itemName ? overlaps(batches, service.itemName) : undefined;
  const answered = new Uint8Array(n);
  const appliedBatches: number[] = [];
  const failures: Failure[] = [];
  let aborted: { err: unknown } | undefined;
  let applied = 0;
  let revision = 0n;
  let lastIndex = -1;
  let last: R | undefined;
  const inFlight = new Set<Promise<void>>();
  const ahead = prepare ? new Prepared(batches, prepare) : undefined;
  const stopped = () => aborted !== undefined || failures.length > 0;
  const mayStart = (b: number) => {
    const w = waitFor?.[b];
    return inFlight.size < width && (w === undefined || answered[w] === 1);
  };
  try {
    for (let b = 0; b < n && !stopped(); b++) {
      // Something is in flight whenever b may not start yet: a batch waited for is an earlier,
      // unanswered one.
      while (!stopped() && !mayStart(b) && inFlight.size > 0) await Promise.race(inFlight);
      if (stopped()) break;
      const p: Promise<void> = sendBatch(b).finally(() => inFlight.delete(p));
      inFlight.add(p);
    }
    await Promise.all(inFlight);
  } finally {
    ahead?.cancel();
  }
  if (aborted) throw aborted.err;
  if (failures.length > 0) throw failureError();
  return { revision, batches: n, applied, response: last! };

  // Never rejects: the outcome is recorded for the loop above.
  async function sendBatch(b: number): Promise<void> {
    const batch = batches[b]!;
    let res: R;
    try {
      if (ahead) {
        const pending = send(batch, ahead.take(b));
        // The next batch is prepared once this request is on its way (after the I/O of this
        // turn), unless the window has room for it now, which then prepares it at once.
        if (b + 1 < n) ahead.schedule(b + 1);
        res = await pending;
      } else res = await send(batch);
    } catch (err) {
      answered[b] = 1;
      if (isAbortError(err)) aborted ??= { err };
      else failures.push({ index: b, detail: err instanceof Error ? err.message : String(err), reason: isTooManyOperations(err) ? 'too-many-operations' : 'other', cause: err });
      return;
    }
    answered[b] = 1;
    if (res.status !== 0) {
      const se = service.statusError(res.status, service.what);
      failures.push({ index: b, detail: se.message, reason: isRevisionMismatch(se) ? 'revision-mismatch' : 'other', cause: se, status: se });
      return;
    }
    applied += batch.length;
    appliedBatches.push(b);
    const rev = res.header?.etcd?.revision ?? 0n;
    if (rev > revision) revision = rev;
    if (b > lastIndex) {
      lastIndex = b;
      last = res;
    }
    opts.onBatch?.({ index: b, batches: n, size: batch.length, applied, done: appliedBatches.length, total, revision: rev });
  }

  function failureError(): ApplyError {
    const f = failures.reduce((a, x) => (x.index < a.index ? x : a));
    const b = f.index;
    // The message of a one-batch run is the plain status or transport error, as from any RPC.
    const context = `${service.what}: batch ${b + 1} of ${n} failed (${applied} of ${total} changes already applied)`;
    return new ApplyError(
      n > 1 ? `${context}: ${f.status ? f.status.statusName : f.detail}` : f.detail,
      f.reason,
      b,
      n,
      batches[b]!.length,
      applied,
      total,
      f.status?.status,
      f.status?.statusName,
      f.detail,
      f.cause,
      appliedBatches.sort((x, y) => x - y),
      failures.map((x) => x.index).sort((x, y) => x - y),
    );
  }
}

/** The one batch prepared ahead of its turn (see applyInBatches). */
class Prepared<C, P> {
  private index = -1;
  private value: P | undefined;
  private timer: NodeJS.Immediate | undefined;

  constructor(
    private readonly batches: readonly C[][],
    private readonly prepare: (batch: C[]) => P,
  ) {}

  /** Prepares batch `i` on a later turn of the event loop. */
  schedule(i: number): void {
    this.cancel();
    this.timer = setImmediate(() => {
      this.timer = undefined;
      this.run(i);
    });
  }

  /** Batch `i` prepared: ahead of time when that is done, else now; undefined when prepare threw. */
  take(i: number): P | undefined {
    if (this.index !== i) {
      this.cancel();
      this.run(i);
    }
    const v = this.value;
    this.index = -1;
    this.value = undefined;
    return v;
  }

  cancel(): void {
    if (this.timer !== undefined) clearImmediate(this.timer);
    this.timer = undefined;
  }

  private run(i: number): void {
    this.index = i;
    try {
      this.value = this.prepare(this.batches[i]!);
    } catch {
      this.value = undefined;
    }
  }
}
