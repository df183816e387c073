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
  type LabelSet,
} from '../../lib/protocol/gen/broker/protocol.js';
import { sumFromDigest } from '../../lib/protocol/fragment.js';
import { itemKey } from '../../lib/keyspace/keys.js';
import { matchesSelector } from '../../lib/protocol/selector.js';
import { subtractLabels, unionLabels } from '../../lib/protocol/labelsets.js';
import { journalWritable, type Broker } from './broker.js';
import { advertise, ensurePipeline, proposeAll } from './primary.js';
import type { Replica } from './replica.js';
import type { Resolution } from './resolver.js';

type Local = Extract<Resolution, { kind: 'local' }>;

/** A failure reported as a gRPC error (not a broker status). */
export class RpcError extends Error {
  constructor(
    readonly code: GrpcStatus,
    message: string,
  ) {
    super(message);
  }
}

function isCommitIntent(r: AppendRequest): boolean {
  return (
    !r.header &&
    r.journal === '' &&
    !r.do_not_proxy &&
    r.content.length === 0 &&
    r.offset === 0n &&
    !r.check_registers &&
    !r.union_registers &&
    !r.subtract_registers &&
    r.suspend === 0 &&
    r.min_etcd_revision === 0n
  );
}

function isContentOnly(r: AppendRequest): boolean {
  return isCommitIntent({ ...r, content: Buffer.alloc(0) }) && r.content.length > 0;
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
  const spec = res.spec;
  const route = res.entry.route;
  const want = Math.min(spec.replication, b.config.maxReplication);
  if (route.members.length < want) return response(res, Status.INSUFFICIENT_JOURNAL_BROKERS);

  const mode = first.suspend;
  const level = spec.suspend?.level ?? JournalSpec_Suspend_Level.NONE;
  const suspended = level !== JournalSpec_Suspend_Level.NONE;
  if (level === JournalSpec_Suspend_Level.FULL && mode === AppendRequest_Suspend.SUSPEND_NO_RESUME) {
    return response(res, Status.SUSPENDED);
  }

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
  if (first.offset !== 0n) {
    if (first.offset !== maxOffset) return response(res, Status.WRONG_APPEND_OFFSET);
    if (first.offset > head) rollTo = first.offset;
  } else if (writable && replica.indexEnd > head) {
    // The stores hold content beyond what the replicas agree on: consistency was lost, and only
    // an operator (reset-head) may decide to carry on from the index's end.
    return response(res, Status.INDEX_HAS_GREATER_OFFSET);
  }

  const fail = (e: unknown): never => {
    replica.spool.rollback();
    if (e instanceof RpcError) throw e;
    throw new RpcError(GrpcStatus.UNAVAILABLE, `replication of ${spec.name}: ${(e as Error).message}`);
  };

  if (rollTo !== undefined || replica.needsRoll()) {
    replica.roll(rollTo ?? head);
    await proposeAll(replica, pipeline, replica.spool.fragment, replica.spool.registers).catch(fail);
  }

  const begin = replica.spool.fragment.end;
  const hash = createHash('sha1');
  let n = 0;
  let intent = false;
  let refused: Status | undefined;
  let chunks = 0n;
  const started = Date.now();
  try {
    for (;;) {
      const next = await msgs.next();
      if (next.done) break;
      const m = next.value;
      if (intent) throw new RpcError(GrpcStatus.INVALID_ARGUMENT, 'append: a message followed the commit intent (the empty message)');
      if (isCommitIntent(m)) {
        intent = true;
        continue;
      }
      if (!isContentOnly(m)) throw new RpcError(GrpcStatus.INVALID_ARGUMENT, 'append: messages after the first may carry only content');
      if (refused !== undefined) continue;
      if (!writable) refused = Status.NOT_ALLOWED;
      else if (mode !== AppendRequest_Suspend.SUSPEND_RESUME && mode !== AppendRequest_Suspend.SUSPEND_NO_RESUME) refused = Status.NOT_ALLOWED;
      if (refused !== undefined) continue;
      pipeline.content(m.content, BigInt(replica.spool.pending));
      replica.spool.stage(m.content);
      hash.update(m.content);
      n += m.content.length;
      chunks++;
      const min = b.config.minAppendRate;
      const secs = (Date.now() - started) / 1000;
      if (min > 0 && secs > 2 && n / secs < min / 4) {
        throw new RpcError(GrpcStatus.DEADLINE_EXCEEDED, `append of ${spec.name}: client streams slower than the minimum rate of ${min} bytes/s`);
      }
    }
  } catch (e) {
    await proposeAll(replica, pipeline, replica.spool.fragment, replica.spool.registers).catch(() => undefined);
    return fail(e);
  }

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
  const proposal = n > 0 ? replica.spool.nextFragment() : replica.spool.fragment;
  await proposeAll(replica, pipeline, proposal, newRegisters).catch(fail);
  if (n > 0) replica.spool.commit();
  replica.spool.registers = newRegisters;
  replica.notify();
  b.metrics.appendBytes.inc(n);

  const commit: Fragment = {
    journal: spec.name,
    begin,
    end: begin + BigInt(n),
    sum: sumFromDigest(hash.digest()),
    compression_codec: replica.spool.fragment.compression_codec,
    backing_store: replica.spool.fragment.backing_store,
    mod_time: 0n,
    path_postfix: replica.spool.fragment.path_postfix,
  };

  await updateSuspension(b, res, replica, mode, n, suspended);
  const fresh = b.view.journals().get(spec.name);
  if (fresh) void advertise(b, fresh).catch(() => undefined);
  return response(res, Status.OK, { commit, registers: newRegisters, total_chunks: chunks });
}

/** Suspend or resume the journal in etcd as the append's suspend mode asks. */
async function updateSuspension(b: Broker, res: Local, replica: Replica, mode: AppendRequest_Suspend, n: number, suspended: boolean): Promise<void> {
  let next: JournalSpec | undefined;
  const spec = res.spec;
  if (suspended && n > 0 && mode === AppendRequest_Suspend.SUSPEND_RESUME) {
    next = { ...spec, suspend: undefined };
  } else if (n === 0 && (mode === AppendRequest_Suspend.SUSPEND_NOW || mode === AppendRequest_Suspend.SUSPEND_IF_FLUSHED)) {
    const flushed = replica.spool.contentLength === 0n && replica.listFragments().every((f) => !f.content);
    if (mode === AppendRequest_Suspend.SUSPEND_NOW || flushed) {
      next = { ...spec, suspend: { level: JournalSpec_Suspend_Level.FULL, offset: replica.spool.fragment.end } };
    }
  }
  if (!next) return;
  const key = itemKey(b.view.root, spec.name);
  const r = await b.ks.txn({
    compare: [{ key, target: 'modRevision', result: '=', value: res.entry.kv.modRevision }],
    success: [{ put: key, value: Buffer.from(JournalSpec.encode(next).finish()) }],
  });
  if (r.succeeded) await b.view.waitFor(r.revision);
}
