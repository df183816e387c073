// The on-demand flush service (gazctl.flush.Flush, our addition beside protocol.Journal): the
// journal's primary closes its spool now and answers once the closed fragment is stored.
//
// The roll goes through the replication pipeline like any other roll, with the journal's append
// lock held: appends in flight commit (or roll back) first, the primary's spool and every
// replica's roll to an empty spool at the same offset, and appends after it start a new
// fragment. The lock is released before waiting on the store, so appends are not held up by
// the upload. Other brokers proxy the request to the primary, or, with do_not_proxy, answer
// NOT_JOURNAL_PRIMARY_BROKER with the route, as for Append.

import { status as GrpcStatus, type sendUnaryData, type ServerUnaryCall, type ServiceError } from '@grpc/grpc-js';
import { Status } from '../../lib/protocol/gen/broker/protocol.js';
import { FlushResponse, type FlushRequest, type FlushServer } from '../../lib/protocol/gen/gazctl/flush.js';
import { fragmentEquals, type LocalFragment } from '../fragment/spool.js';
import type { Broker } from './broker.js';
import { ensurePipeline, proposeAll } from './primary.js';
import type { Resolution } from './resolver.js';
import { RpcError } from './append.js';
import { Capability, claimsFor } from '../../lib/client/auth.js';
import { verifyCall } from '../security.js';
import { rpcError, toServiceError } from './rpc-errors.js';

type Local = Extract<Resolution, { kind: 'local' }>;

/** Flush the journal of `res` at this broker, its primary. */
export async function serveFlush(b: Broker, res: Local): Promise<FlushResponse> {
  const replica = b.replicas.ensure(res.spec);
  await replica.loaded;
  const rolled = await replica.exclusive(async () => {
    const pipeline = await ensurePipeline(b, replica, res).catch((e: Error) => {
      throw new RpcError(GrpcStatus.UNAVAILABLE, `replication pipeline of ${res.spec.name}: ${e.message}`);
    });
    const registers = replica.spool.registers;
    const proposal = replica.flushProposal();
    let completed: LocalFragment | undefined;
    if (!fragmentEquals(proposal, replica.spool.fragment)) {
      // Locally first, then on every replica, as the roll before an append does. A replica that
      // misses it is brought to the same offset when the next pipeline is built.
      completed = replica.spool.applyProposal(proposal, registers).completed;
      await proposeAll(replica, pipeline, proposal, registers).catch((e: Error) => {
        throw new RpcError(GrpcStatus.UNAVAILABLE, `replication of ${res.spec.name}: ${e.message}`);
      });
    }
    return { completed, head: replica.spool.end };
  });

  if (!rolled.completed) {
    await replica.allPersisted();
    const last = replica.lastPersisted();
    return FlushResponse.fromPartial({ status: Status.OK, header: res.header, rolled: false, write_head: rolled.head, ...(last ? { fragment: last } : {}) });
  }
  // Resolves once the fragment is in the store and in our index (persisting retries until then),
  // and so are the spools closed before it (rolled on length or interval, still uploading), so
  // that everything before the write head is stored when we answer.
  const stored = await replica.persisted(rolled.completed);
  await replica.allPersisted();
  b.log.debug('flushed spool', { journal: res.spec.name, begin: rolled.completed.fragment.begin, end: rolled.completed.fragment.end, store: stored?.backing_store ?? '' });
  return FlushResponse.fromPartial({
    status: Status.OK,
    header: res.header,
    rolled: true,
    // A journal without stores keeps nothing: the closed fragment is reported as it was.
    fragment: stored ?? rolled.completed.fragment,
    write_head: rolled.head,
  });
}

export function flushService(b: Broker): FlushServer {
  return {
    async flush(call: ServerUnaryCall<FlushRequest, FlushResponse>, cb: sendUnaryData<FlushResponse>) {
      // A flush rolls the journal's fragment: it needs what an append needs.
      let claims;
      try {
        claims = verifyCall(b.security?.verifier, call.metadata, Capability.APPEND).sel;
      } catch (e) {
        return cb(e as ServiceError);
      }
      const req = call.request;
      if (req.journal === '') return cb(rpcError(GrpcStatus.INVALID_ARGUMENT, 'flush: the request must name the journal'));
      try {
        const res = await b.resolver.resolve({
          journal: req.journal,
          claims,
          requirePrimary: true,
          mayProxy: !req.do_not_proxy,
          header: req.header,
          minEtcdRevision: req.min_etcd_revision,
        });
        if (res.kind === 'status') return cb(null, FlushResponse.fromPartial({ status: res.status, header: res.header }));
        if (res.kind === 'proxy') {
          const up = await new Promise<FlushResponse>((resolve, reject) => {
            const md = b.peers.metadata(claimsFor.journalAppend(req.journal));
            const c = b.peers.flush(res.endpoint).flush({ ...req, header: res.header }, md, (err, r) => (err ? reject(err) : resolve(r)));
            call.on('cancelled', () => c.cancel());
          });
          return cb(null, up);
        }
        cb(null, await serveFlush(b, res));
      } catch (e) {
        cb(toServiceError(e, { code: GrpcStatus.UNAVAILABLE, prefix: 'flush: ' }));
      }
    },
  };
}
