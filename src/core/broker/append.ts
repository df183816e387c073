// The Append RPC at the journal's primary, as a small state machine:
//   1. checks on the first message (writability, replication, registers, offset, suspension);
//   2. the spool rolls first when it is full, its codec or store changed, or its flush
//      interval passed;
//   3. content messages are staged in the spool and forwarded to every replica;
//   4. the empty message (commit intent) followed by the end of the stream commits: the
//      proposal goes to every replica and the append is acknowledged only when all accept;
//      the end of the stream without it rolls the staged bytes back everywhere.

import { createHash } from 'node:crypto';
import { status as GrpcStatus } from '@grpc/grpc-js';
import {
  AppendRequest_Suspend,
  JournalSpec,
  JournalSpec_Suspend_Level,
  Status,
  type AppendRequest,
  type AppendResponse,
  type Fragment,
  type JournalSpec_Suspend,
  type LabelSet,
} from '../../lib/protocol/gen/broker/protocol.js';
import { sumFromDigest } from '../../lib/protocol/fragment.js';
import { itemKey } from '../../lib/keyspace/keys.js';
import { matchesSelector } from '../../lib/protocol/selector.js';
import { subtractLabels, unionLabels } from '../../lib/protocol/labelsets.js';
import { journalWritable, type Broker } from './broker.js';
import { advertise, ensurePipeline, proposeAll, rollTo as rollToFragment } from './primary.js';
import { fragmentEquals } from '../fragment/spool.js';
import { SPOOL_WRITES_BEHIND_BYTES, type Replica } from './replica.js';
import { desiredReplication, type Resolution } from './resolver.js';
import { durationToNanos } from '../../lib/protocol/duration.js';
import { routeEquals } from '../../lib/protocol/route.js';
import { AppendFlowControl, FLOW_QUANTUM_MS, FLOW_UNDERFLOW_MESSAGE } from './flow-control.js';

type Local = Extract<Resolution, { kind: 'local' }>;

/**
 * Upstream's source rolls a spool holding the journal's first write on the next append, but the
 * reference brokers, observed through the parity suite, leave such spools open (their fragments
 * list as not persisted); we follow what they do. Kept as a switch, to be settled.
 */
const ROLL_FIRST_WRITE = false;

/** A failure reported as a gRPC error (not a broker status). */
export class RpcError extends Error {
  constructor(
    readonly code: GrpcStatus,
    message: string,
  ) {
    super(message);
  }
}

/** Whether `r` sets no field besides (maybe) content. */
function onlyContent(r: AppendRequest): boolean {
  return (
    !r.header &&
    r.journal === '' &&
    !r.do_not_proxy &&
    r.offset === 0n &&
    !r.check_registers &&
    !r.union_registers &&
    !r.subtract_registers &&
    r.suspend === 0 &&
    r.min_etcd_revision === 0n
  );
}

function isCommitIntent(r: AppendRequest): boolean {
  return r.content.length === 0 && onlyContent(r);
}

function isContentOnly(r: AppendRequest): boolean {
  return r.content.length > 0 && onlyContent(r);
}

/** Registers after an append: subtract first, then union (the union's values win per name), as upstream. */
export function applyRegisters(cur: LabelSet, union: LabelSet | undefined, subtract: LabelSet | undefined): LabelSet {
  let labels = cur.labels;
  if (subtract) labels = subtractLabels(labels, subtract.labels);
  if (union) labels = unionLabels(union.labels, labels);
  return { labels };
}

function response(res: Local, status: Status, extra: Partial<AppendResponse> = {}): AppendResponse {
  return {
    status,
    header: res.header,
    commit: undefined,
    registers: undefined,
    total_chunks: 0n,
    delayed_chunks: 0n,
    store_health_error: '',
    ...extra,
  };
}

/**
 * Serve one append of `first` + the rest of `msgs` at this primary. Resolves with the response;
 * rejects with an RpcError for protocol violations and pipeline failures.
 */
export async function serveAppend(b: Broker, res: Local, first: AppendRequest, msgs: AsyncIterator<AppendRequest>): Promise<AppendResponse> {
  const replica = b.replicas.ensure(res.spec);
  await replica.loaded;
  const out = await replica.exclusive(() => appendLocked(b, res, replica, first, msgs));
  b.metrics.appends.inc({ status: Status[out.status] ?? String(out.status) });
  return out;
}

async function appendLocked(b: Broker, res: Local, replica: Replica, first: AppendRequest, msgs: AsyncIterator<AppendRequest>): Promise<AppendResponse> {
  let spec = res.spec;
  const route = res.entry.route;
  const want = desiredReplication(spec, b.config.maxReplication);
  if (route.members.length < want) return response(res, Status.INSUFFICIENT_JOURNAL_BROKERS);
  const mode = first.suspend;

  const pipeline = await ensurePipeline(b, replica, res).catch((e: Error) => {
    throw new RpcError(GrpcStatus.UNAVAILABLE, `replication pipeline of ${spec.name}: ${e.message}`);
  });

  const registers = replica.spool.registers;
  if (first.check_registers && registers.labels.length > 0 && !matchesSelector(first.check_registers, registers)) {
    return response(res, Status.REGISTER_MISMATCH, { registers });
  }

  const writable = journalWritable(spec.flags);
  const head = replica.spool.fragment.end;
  const maxOffset = replica.indexEnd > head ? replica.indexEnd : head;
  let rollTo: bigint | undefined;
  const resumeAt = spec.suspend?.offset ?? 0n;
  if (head < resumeAt) {
    // A journal resumed after a suspension carries on from where it was suspended.
    rollTo = resumeAt;
  } else if (first.offset !== 0n) {
    if (first.offset !== maxOffset) return response(res, Status.WRONG_APPEND_OFFSET);
    if (first.offset > head) rollTo = first.offset;
  } else if (writable && replica.indexEnd > head) {
    // The stores hold content beyond what the replicas agree on: consistency was lost, and only
    // an operator (reset-head) may decide to carry on from the index's end.
    b.log.debug('append refused: the stores hold content beyond the spool', { journal: spec.name, spool: `${replica.spool.fragment.begin}-${head}`, indexEnd: replica.indexEnd });
    return response(res, Status.INDEX_HAS_GREATER_OFFSET);
  }

  // Suspension, as upstream: RESUME lifts a partial suspension; NO_RESUME refuses a suspended
  // journal; IF_FLUSHED and NOW suspend fully when the journal has no content at all, else
  // partially (down to one replica) when its content is persisted (IF_FLUSHED) or regardless
  // (NOW), rolling the spool so it persists.
  const level = spec.suspend?.level ?? JournalSpec_Suspend_Level.NONE;
  let suspendStatus: Status | undefined;
  if (mode === AppendRequest_Suspend.SUSPEND_RESUME && level !== JournalSpec_Suspend_Level.NONE) {
    spec = await updateSuspend(b, res, { level: JournalSpec_Suspend_Level.NONE, offset: head });
    // Resumed, the journal wants its full replication again, which the route does not have yet.
    if (route.members.length < desiredReplication(spec, b.config.maxReplication)) return response(res, Status.INSUFFICIENT_JOURNAL_BROKERS);
  } else if (mode === AppendRequest_Suspend.SUSPEND_NO_RESUME && level !== JournalSpec_Suspend_Level.NONE) {
    return response(res, Status.SUSPENDED);
  } else if (mode === AppendRequest_Suspend.SUSPEND_IF_FLUSHED || mode === AppendRequest_Suspend.SUSPEND_NOW) {
    const flushSec = durationToNanos(spec.fragment?.flush_interval) / 1_000_000_000n || 24n * 3600n;
    if (level !== JournalSpec_Suspend_Level.FULL && replica.indexBegin === replica.indexEnd) {
      spec = await updateSuspend(b, res, { level: JournalSpec_Suspend_Level.FULL, offset: head });
    } else if (level === JournalSpec_Suspend_Level.NONE && (!replica.indexDirty(flushSec) || mode === AppendRequest_Suspend.SUSPEND_NOW)) {
      spec = await updateSuspend(b, res, { level: JournalSpec_Suspend_Level.PARTIAL, offset: head });
      rollTo = head;
    } else if (level === JournalSpec_Suspend_Level.PARTIAL) suspendStatus = Status.SUSPENDED;
  }
  // Rolling a spool that holds the journal's first write would persist it at once, so a broker
  // recovering later sees the journal was written to (off: see ROLL_FIRST_WRITE).
  if (ROLL_FIRST_WRITE && replica.spool.fragment.begin === replica.indexBegin && replica.spool.contentLength > 0n) rollTo ??= head;

  const fail = (e: unknown): never => {
    replica.spool.rollback();
    if (e instanceof RpcError) throw e;
    throw new RpcError(GrpcStatus.UNAVAILABLE, `replication of ${spec.name}: ${(e as Error).message}`);
  };

  replica.updateSpec(spec);
  const proposal0 = rollTo !== undefined ? rollToFragment(replica, rollTo) : replica.proposal();
  if (!fragmentEquals(proposal0, replica.spool.fragment)) {
    // Roll (length, codec, flush interval, an explicit offset): locally, then on every replica.
    replica.spool.applyProposal(proposal0, replica.spool.registers);
    await proposeAll(replica, pipeline, proposal0, replica.spool.registers).catch(fail);
  }

  const begin = replica.spool.fragment.end;
  const hash = createHash('sha1');
  let n = 0;
  let intent = false;
  let refused: Status | undefined;
  const flow = startFlowControl(b, replica, spec.name, route, Number(spec.max_append_rate));
  try {
    for (;;) {
      const next = await flow.next(msgs);
      if (next.done) break;
      const m = next.value;
      if (intent) throw new RpcError(GrpcStatus.INVALID_ARGUMENT, 'append: a message followed the commit intent (the empty message)');
      const held = flow.admit(m.content.length);
      if (held) await held;
      if (isCommitIntent(m)) {
        intent = true;
        continue;
      }
      if (!isContentOnly(m)) throw new RpcError(GrpcStatus.INVALID_ARGUMENT, 'append: messages after the first may carry only content');
      if (refused !== undefined) continue;
      if (!writable) refused = Status.NOT_ALLOWED;
      else if (mode === AppendRequest_Suspend.SUSPEND_IF_FLUSHED || mode === AppendRequest_Suspend.SUSPEND_NOW) refused = Status.NOT_ALLOWED;
      if (refused !== undefined) continue;
      pipeline.content(m.content, replica.spool.staged);
      replica.spool.apply(m.content);
      hash.update(m.content);
      n += m.content.length;
      // Spool writes are deferred to the loop's check phase; when this much is queued, read no
      // more until it is written, so their buffers do not pile up.
      const behind = replica.spool.writesBehind(SPOOL_WRITES_BEHIND_BYTES);
      if (behind) await behind;
    }
  } catch (e) {
    flow.stop();
    await proposeAll(replica, pipeline, replica.spool.fragment, replica.spool.registers).catch(() => undefined);
    return fail(e);
  }

  flow.stop();
  if (!intent || refused !== undefined) {
    // Roll back what was staged, on the replicas too.
    replica.spool.rollback();
    await proposeAll(replica, pipeline, replica.spool.fragment, replica.spool.registers).catch(fail);
    if (refused !== undefined) return response(res, refused);
    throw new RpcError(GrpcStatus.CANCELLED, 'append: the stream ended without a commit (rolled back)');
  }
  if (n === 0 && (first.union_registers !== undefined || first.subtract_registers !== undefined)) {
    throw new RpcError(GrpcStatus.INVALID_ARGUMENT, 'append: register union or subtract needs appended content');
  }

  const newRegisters = n > 0 ? applyRegisters(registers, first.union_registers, first.subtract_registers) : registers;
  // Our own copy of the content is written in batches while the messages come in; it
  // must be in the spool file before the commit goes out (a failed write fails the append,
  // rolled back everywhere, as a failure while staging would).
  if (n > 0) {
    try {
      await replica.spool.settled();
    } catch (e) {
      await proposeAll(replica, pipeline, replica.spool.fragment, replica.spool.registers).catch(() => undefined);
      return fail(new Error(`writing the spool: ${(e as Error).message}`));
    }
  }
  const proposal = n > 0 ? replica.spool.next() : replica.spool.fragment;
  await proposeAll(replica, pipeline, proposal, newRegisters).catch(fail);
  const applied = replica.spool.applyProposal(proposal, newRegisters);
  if (applied.status !== Status.OK) fail(new Error(`the primary's own spool refused its commit proposal`));
  b.metrics.appendBytes.inc(n);

  const commit: Fragment = {
    journal: spec.name,
    begin,
    end: begin + BigInt(n),
    sum: sumFromDigest(hash.digest()),
    compression_codec: replica.spool.fragment.compression_codec,
    backing_store: '',
    mod_time: 0n,
    path_postfix: '',
  };

  const fresh = b.view.journals().get(spec.name);
  if (fresh) void advertise(b, fresh).catch(() => undefined);
  return response(res, suspendStatus ?? Status.OK, { commit, registers: newRegisters, total_chunks: BigInt(flow.control.totalChunks), delayed_chunks: BigInt(flow.control.delayedChunks) });
}

/** Write the journal's new suspension to etcd (guarded by its mod revision); the updated spec. */
export async function updateSuspend(b: Broker, res: { entry: { kv: { modRevision: bigint } }; spec: JournalSpec }, suspend: JournalSpec_Suspend): Promise<JournalSpec> {
  const next: JournalSpec = { ...res.spec, suspend };
  const key = itemKey(b.view.root, res.spec.name);
  const r = await b.ks.txn({
    compare: [{ key, target: 'modRevision', result: '=', value: res.entry.kv.modRevision }],
    success: [{ put: key, value: Buffer.from(JournalSpec.encode(next).finish()) }],
  });
  if (!r.succeeded) throw new RpcError(GrpcStatus.ABORTED, `append: the spec of ${res.spec.name} changed while updating its suspension; retry`);
  await b.view.waitFor(r.revision);
  b.log.info('journal suspension updated', { journal: res.spec.name, level: JournalSpec_Suspend_Level[suspend.level], offset: suspend.offset });
  return next;
}

interface FlowSession {
  readonly control: AppendFlowControl;
  /** The next client message, or a rejection once the client fell below the minimum rate. */
  next(msgs: AsyncIterator<AppendRequest>): Promise<IteratorResult<AppendRequest>>;
  /**
   * Account a message of `length` content bytes: undefined when it may pass now, else a promise
   * that resolves once the journal's max rate lets it pass.
   */
  admit(length: number): Promise<void> | undefined;
  stop(): void;
}

/**
 * The flow control of one Append RPC (see flow-control.ts): a 50 ms ticker advances the
 * journal's accounting, fails the RPC when the client stalls below the minimum rate, releases a
 * chunk held for max-rate credit, and lifts the max rate when the journal's route changes.
 */
function startFlowControl(b: Broker, replica: Replica, journal: string, route: Local['entry']['route'], specMaxRate: number): FlowSession {
  const control = replica.flow;
  control.reset(specMaxRate, b.config.maxAppendRate, b.config.minAppendRate, Date.now());
  let underflow: RpcError | undefined;
  let rejectStalled: ((e: RpcError) => void) | undefined;
  const stalled = new Promise<never>((_, reject) => {
    rejectStalled = reject;
  });
  stalled.catch(() => undefined);
  let release: (() => void) | undefined;
  let routeChecked = control.maxRate === 0;
  const timer = setInterval(() => {
    if (!routeChecked) {
      const now = b.view.journals().get(journal);
      if (!now || !routeEquals(now.route, route)) {
        control.onInvalidate();
        routeChecked = true;
      }
    }
    if (!control.onTick(Date.now())) {
      // Same code and words as the reference broker (an untyped error there: UNKNOWN).
      underflow = new RpcError(GrpcStatus.UNKNOWN, `append stream: ${FLOW_UNDERFLOW_MESSAGE}`);
      clearInterval(timer);
      rejectStalled!(underflow);
      return;
    }
    if (release && control.charge === 0) {
      const r = release;
      release = undefined;
      r();
    }
  }, FLOW_QUANTUM_MS);
  return {
    control,
    next(msgs) {
      if (underflow) return Promise.reject(underflow);
      return Promise.race([msgs.next(), stalled]);
    },
    admit(length) {
      control.onChunk(length);
      if (control.charge === 0) return undefined;
      return Promise.race([
        new Promise<void>((resolve) => {
          release = resolve;
        }),
        stalled,
      ]);
    },
    stop() {
      clearInterval(timer);
    },
  };
}
