// The consumer.Shard gRPC service of a consumer process, with the semantics of upstream's
// consumer/shard_api.go:
//
//   * List: every shard whose labels (and meta-labels: `id`) match the selector, with its mod
//     and create revisions, route (endpoints attached) and the ReplicaStatus of each assignment,
//     read from the process's view of etcd; header unrouted (this process, no route).
//   * Apply: one etcd transaction of every upsert (ShardSpec at items/<id>, and the primary hints
//     at the spec's hint key when given, as Go's JSON) and delete, guarded by each change's
//     expected mod revision (-1: unguarded); a failed guard is ETCD_TRANSACTION_FAILED; on success
//     the answer waits until the view has the transaction's revision.
//   * Stat: resolved to the shard's primary: served here when this process is the primary (after
//     the shard's read-through reaches what was asked), proxied once to the primary otherwise
//     (the proxied request carries the header, and is never proxied again); SHARD_NOT_FOUND,
//     NO_SHARD_PRIMARY, NOT_SHARD_PRIMARY as upstream.
//   * GetHints: the primary hints and the hint_backups backups, read from etcd at the keys the
//     spec names (`<hint_prefix>/<id>.primary`, `.backup.<n>`; hints.ts), JSON or protobuf as
//     stored, each checked to be hints of the shard's recovery log.
//   * Unassign: deletes the primary assignment of each shard (or only FAILED assignments with
//     only_failed), guarded by their mod revisions; dry_run only reports.

import { status as GrpcStatus, type Metadata, type sendUnaryData, type ServerUnaryCall } from '@grpc/grpc-js';
import { Capability, claimsFor } from '../../lib/client/auth.js';
import type { KeyVerifier } from '../../lib/client/verify.js';
import { matchesSelector, shardMatchLabels } from '../../lib/protocol/selector.js';
import { notAuthorized, verifyCall, type CallClaims } from '../security.js';
import type { ConnectionPool } from '../../lib/client/dial.js';
import type { Keyspace, TxnOp, Compare } from '../../lib/keyspace/index.js';
import { ITEMS_PREFIX } from '../../lib/keyspace/keys.js';
import type { Header, ProcessSpec_ID } from '../../lib/protocol/gen/broker/protocol.js';
import {
  ReplicaStatus_Code,
  ShardSpec,
  Status,
  type ApplyRequest,
  type ApplyResponse,
  type GetHintsRequest,
  type GetHintsResponse,
  type ListRequest,
  type ListResponse,
  type ListResponse_Shard,
  type ShardServer,
  type StatRequest,
  type StatResponse,
  type UnassignRequest,
  type UnassignResponse,
} from '../../lib/protocol/gen/consumer/protocol.js';
import { selectorMatchesShard, validateLabelSelector } from '../../lib/protocol/selector.js';
import { validateShardApplyRequest } from '../../lib/protocol/validate/requests.js';
import { validateShardID } from '../../lib/protocol/validate/names.js';
import { rpcError, toServiceError } from '../broker/rpc-errors.js';
import type { Logger } from '../log.js';
import { fetchHints, hintsResponse, primaryHintsPut } from './hints.js';
import type { Replica } from './replica.js';
import type { ShardView } from './view.js';

const EMPTY = Buffer.alloc(0);

/** What the service needs of its process. */
export interface ShardServiceHost {
  readonly view: ShardView;
  readonly ks: Keyspace;
  readonly self: ProcessSpec_ID;
  readonly log: Logger;
  /** Connections to other consumers (Stat proxying). */
  readonly peers: ConnectionPool;
  /** Verifier of calls' authorization (--consumer.auth-keys); none: every call is allowed. */
  readonly verifier?: KeyVerifier | undefined;
  /** This process's replica of a shard, if it holds one. */
  replica(shard: string): Replica | undefined;
}

function unroutedHeader(host: ShardServiceHost): Header {
  return { process_id: { ...host.self }, route: { members: [], primary: -1, endpoints: [] }, etcd: host.view.etcdHeader() };
}

/** Whether a shard is within the caller's claims (labels and the `id` meta-label). */
function visible(claims: CallClaims, spec: Parameters<typeof shardMatchLabels>[0]): boolean {
  return !claims.sel || matchesSelector(claims.sel, shardMatchLabels(spec));
}

/** Whether the caller's claims cover the shard `id` by its id alone (Apply deletes, Unassign). */
function coversId(claims: CallClaims, id: string): boolean {
  return !claims.sel || matchesSelector(claims.sel, { labels: [{ name: 'id', value: id, prefix: false }] });
}

function unary<Req, Res>(host: ShardServiceHost, what: string, require: number, fn: (req: Req, signal: AbortSignal, claims: CallClaims) => Promise<Res>) {
  return (call: ServerUnaryCall<Req, Res>, cb: sendUnaryData<Res>): void => {
    let claims: CallClaims;
    try {
      claims = verifyCall(host.verifier, call.metadata as Pick<Metadata, 'get'>, require);
    } catch (e) {
      cb(e as Parameters<sendUnaryData<Res>>[0]);
      return;
    }
    const ac = new AbortController();
    call.on('cancelled', () => ac.abort(new Error('cancelled')));
    fn(call.request, ac.signal, claims).then(
      (r) => cb(null, r),
      (e: unknown) => {
        host.log.debug(`${what} failed`, { err: (e as Error).message });
        cb(toServiceError(e));
      },
    );
  };
}

export function shardService(host: ShardServiceHost): ShardServer {
  return {
    list: unary(host, 'List', Capability.LIST, async (req: ListRequest, _signal, claims): Promise<ListResponse> => {
      if (req.selector) {
        try {
          validateLabelSelector(req.selector);
        } catch (e) {
          throw rpcError(GrpcStatus.UNKNOWN, `Selector.${(e as Error).message}`);
        }
      }
      const shards: ListResponse_Shard[] = [];
      for (const s of host.view.shards().values()) {
        if (!selectorMatchesShard(req.selector, s.spec) || !visible(claims, s.spec)) continue;
        shards.push({
          spec: s.spec,
          mod_revision: s.kv.modRevision,
          create_revision: s.kv.createRevision,
          route: s.route,
          status: s.assignments.map((a) => a.status),
        });
      }
      return { status: Status.OK, header: unroutedHeader(host), shards, extension: EMPTY };
    }),

    apply: unary(host, 'Apply', Capability.APPLY, async (req: ApplyRequest, _signal, claims): Promise<ApplyResponse> => {
      validateShardApplyRequest(req);
      // An upsert is authorized by the shard's labels (and id), a delete by its id alone.
      for (const ch of req.changes) {
        if (ch.upsert ? !visible(claims, ch.upsert) : !coversId(claims, ch.delete)) throw notAuthorized(ch.upsert ? ch.upsert.id : ch.delete);
      }
      const compare: Compare[] = [];
      const ops: TxnOp[] = [];
      for (const ch of req.changes) {
        let key: string;
        if (ch.upsert) {
          key = host.view.root + ITEMS_PREFIX + ch.upsert.id;
          ops.push({ put: key, value: Buffer.from(ShardSpec.encode(ch.upsert).finish()) });
          if (ch.primary_hints) ops.push(primaryHintsPut(ch.upsert, ch.primary_hints));
        } else {
          key = host.view.root + ITEMS_PREFIX + ch.delete;
          ops.push({ delete: key });
        }
        if (ch.expect_mod_revision !== -1n) compare.push({ key, target: 'modRevision', value: ch.expect_mod_revision });
      }
      const header = unroutedHeader(host);
      const r = await host.ks.txn({ compare, success: ops });
      if (!r.succeeded) return { status: Status.ETCD_TRANSACTION_FAILED, header: { ...header, etcd: { ...header.etcd!, revision: r.revision } }, extension: EMPTY };
      if (ops.length > 0) await host.view.waitFor(r.revision);
      return { status: Status.OK, header: { ...header, etcd: { ...header.etcd!, revision: r.revision } }, extension: EMPTY };
    }),

    stat: unary(host, 'Stat', Capability.READ, (req: StatRequest, signal, claims) => stat(host, req, signal, claims)),

    getHints: unary(host, 'GetHints', Capability.READ, async (req: GetHintsRequest, _signal, claims): Promise<GetHintsResponse> => {
      validateShardID(req.shard);
      const header = unroutedHeader(host);
      const found = host.view.shards().get(req.shard);
      const entry = found && visible(claims, found.spec) ? found : undefined;
      if (!entry) return { status: Status.SHARD_NOT_FOUND, header, primary_hints: undefined, backup_hints: [], extension: EMPTY };
      // Read from etcd and validated (of the shard's recovery log) as upstream's fetchHints.
      return { status: Status.OK, header, ...hintsResponse(await fetchHints(host.ks, entry.spec)), extension: EMPTY };
    }),

    unassign: unary(host, 'Unassign', Capability.APPLY, async (req: UnassignRequest, _signal, claims): Promise<UnassignResponse> => {
      if (req.shards.length === 0) throw rpcError(GrpcStatus.UNKNOWN, 'expected at least one Shard');
      for (const s of req.shards) {
        try {
          validateShardID(s);
        } catch (e) {
          throw rpcError(GrpcStatus.UNKNOWN, `Shards[${s}]: ${(e as Error).message}`);
        }
      }
      const out: string[] = [];
      const compare: Compare[] = [];
      const ops: TxnOp[] = [];
      const shards = host.view.shards();
      for (const id of req.shards) {
        // Authorized by the shard's id alone, as Apply's deletes.
        if (!coversId(claims, id)) throw notAuthorized(id);
        for (const a of shards.get(id)?.assignments ?? []) {
          const failed = a.status.code === ReplicaStatus_Code.FAILED;
          if (!failed && (req.only_failed || a.slot !== 0)) continue;
          compare.push({ key: a.key, target: 'modRevision', value: a.kv.modRevision });
          ops.push({ delete: a.key });
          if (out[out.length - 1] !== id) out.push(id);
        }
      }
      if (req.dry_run) return { status: Status.OK, shards: out };
      const r = await host.ks.txn({ compare, success: ops });
      if (!r.succeeded) return { status: Status.ETCD_TRANSACTION_FAILED, shards: out };
      if (ops.length > 0) await host.view.waitFor(r.revision);
      return { status: Status.OK, shards: out };
    }),
  };
}

async function stat(host: ShardServiceHost, req: StatRequest, signal: AbortSignal, claims: CallClaims): Promise<StatResponse> {
  validateShardID(req.shard);
  const view = host.view;
  const proxied = req.header !== undefined;
  if (req.header) {
    const h = req.header;
    const ours = view.etcdHeader();
    if (h.etcd && ours.cluster_id !== 0n && h.etcd.cluster_id !== ours.cluster_id) {
      throw new Error(`request Etcd ClusterId doesn't match our own (${h.etcd.cluster_id} vs ${ours.cluster_id})`);
    }
    const pid = h.process_id;
    if (pid && (pid.zone !== '' || pid.suffix !== '') && (pid.zone !== host.self.zone || pid.suffix !== host.self.suffix)) {
      throw new Error(`request ProcessId doesn't match our own (${pid.zone}#${pid.suffix} vs ${host.self.zone}#${host.self.suffix})`);
    }
    if (h.etcd && h.etcd.revision > view.revision) await view.waitFor(h.etcd.revision, signal);
  }
  const found = view.shards().get(req.shard);
  // A shard outside the caller's claims is treated as if it did not exist, as upstream.
  const entry = found && visible(claims, found.spec) ? found : undefined;
  const route = entry ? entry.route : { members: [], primary: -1, endpoints: [] };
  const header: Header = { process_id: { ...host.self }, route, etcd: view.etcdHeader() };
  const empty = { read_through: {}, publish_at: {}, extension: EMPTY };
  if (!entry) return { status: Status.SHARD_NOT_FOUND, header, ...empty };
  if (route.primary === -1) return { status: Status.NO_SHARD_PRIMARY, header, ...empty };
  const primary = route.members[route.primary]!;
  const local = primary.zone === host.self.zone && primary.suffix === host.self.suffix;
  if (!local && proxied) return { status: Status.NOT_SHARD_PRIMARY, header, ...empty };
  if (!local) {
    const endpoint = route.endpoints[route.primary] ?? '';
    if (endpoint === '') return { status: Status.NO_SHARD_PRIMARY, header, ...empty };
    const fwd: StatRequest = { ...req, header: { ...header, process_id: { ...primary } } };
    return new Promise<StatResponse>((resolve, reject) => {
      // Signed by this process (its first --consumer.auth-keys key) for the one shard.
      const c = host.peers.shard(endpoint).stat(fwd, host.peers.metadata(claimsFor.shardStat(req.shard)), (err, res) => (err ? reject(err) : resolve(res)));
      signal.addEventListener('abort', () => c.cancel(), { once: true });
    });
  }
  const replica = host.replica(req.shard);
  if (!replica) return { status: Status.SHARD_STOPPED, header, ...empty };
  // Only offsets of the shard's own sources are waited for, as upstream.
  const want = new Map<string, bigint>();
  for (const src of entry.spec.sources) {
    const o = req.read_through[src.journal];
    if (o !== undefined && o !== 0n) want.set(src.journal, o);
  }
  await replica.waitForReadThrough(want, signal);
  const readThrough: Record<string, bigint> = {};
  for (const [j, o] of replica.readThrough()) readThrough[j] = o;
  const publishAt: Record<string, bigint> = {};
  for (const [j, o] of replica.publishAt()) publishAt[j] = o;
  return { status: Status.OK, header: { ...header, process_id: { ...host.self } }, read_through: readThrough, publish_at: publishAt, extension: EMPTY };
}

