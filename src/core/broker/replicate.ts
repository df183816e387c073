// The Replicate RPC at a replica: the primary's stream of content and proposals for one
// journal. The first message names the route (in its header) the primary believes in; the
// replica waits until its own view has reached that revision and refuses with WRONG_ROUTE when
// the routes differ or it is not a replica in it. Then:
//   content  -> staged in the spool (content_delta must equal the bytes staged so far);
//   proposal -> equal to the spool's fragment: roll back the staged bytes; equal to it extended
//               by them: commit; empty at or past the spool's end: roll to a new fragment
//               there; anything else: PROPOSAL_MISMATCH with the replica's fragment.
// Every message with `acknowledge` gets one answer; the first answer carries the header.

import { status as GrpcStatus, type ServerDuplexStream } from '@grpc/grpc-js';
import { ReplicateResponse, Status, type LabelSelector, type ReplicateRequest } from '../../lib/protocol/gen/broker/protocol.js';
import { routeEquals } from '../../lib/protocol/route.js';
import type { Broker } from './broker.js';
import { SPOOL_WRITES_BEHIND_BYTES, type Replica } from './replica.js';

type Call = ServerDuplexStream<ReplicateRequest, ReplicateResponse>;

function fail(call: Call, code: GrpcStatus, details: string): void {
  call.emit('error', Object.assign(new Error(details), { code, details }));
}

export async function serveReplicate(b: Broker, call: Call, claims?: LabelSelector): Promise<void> {
  const it = call[Symbol.asyncIterator]() as AsyncIterator<ReplicateRequest>;
  const firstMsg = await it.next();
  if (firstMsg.done) return void call.end();
  const first = firstMsg.value;
  if (!first.header || !first.proposal) return fail(call, GrpcStatus.INVALID_ARGUMENT, 'replicate: the first message needs a header and a proposal');
  const name = first.proposal.journal;
  let res;
  try {
    res = await b.resolver.resolve({ journal: name, claims, requirePrimary: false, mayProxy: false, header: first.header });
  } catch (e) {
    return fail(call, GrpcStatus.FAILED_PRECONDITION, `replicate ${name}: ${(e as Error).message}`);
  }
  if (res.kind !== 'local' || !routeEquals(res.header.route, first.header.route) || res.localIndex === res.entry.route.primary) {
    call.write(ReplicateResponse.fromPartial({ status: Status.WRONG_ROUTE, header: res.header }));
    return void call.end();
  }
  const replica = b.replicas.ensure(res.spec);
  await replica.loaded;
  let header: typeof res.header | undefined = res.header;
  let msg: ReplicateRequest | undefined = first;
  try {
    while (msg) {
      if (msg.content.length > 0) {
        if (msg.content_delta !== BigInt(replica.spool.staged)) {
          return fail(call, GrpcStatus.INVALID_ARGUMENT, `replicate ${name}: content_delta ${msg.content_delta} but ${replica.spool.staged} bytes are staged`);
        }
        replica.spool.apply(msg.content, msg.content_delta);
        b.metrics.replicatedBytes.inc(msg.content.length);
        const behind = replica.spool.writesBehind(SPOOL_WRITES_BEHIND_BYTES);
        if (behind) await behind;
      }
      let status = Status.OK;
      if (msg.proposal && replica.spool.staged > 0) {
        // The staged content is written in deferred batches: it must be in the file before a
        // proposal may commit it (and before we acknowledge anything of it).
        try {
          await replica.spool.settled();
        } catch (e) {
          replica.spool.rollback();
          return fail(call, GrpcStatus.INTERNAL, `replicate ${name}: writing the spool: ${(e as Error).message}`);
        }
      }
      if (msg.proposal) {
        // A stream belongs to the route it was opened with: once our view has another route,
        // the sender may no longer be primary, and nothing more of it is committed.
        const now = b.view.journals().get(name);
        if (!now || !routeEquals(now.route, first.header.route) || !b.member.registered) {
          replica.spool.rollback();
          return fail(call, GrpcStatus.FAILED_PRECONDITION, `replicate ${name}: the journal's route changed since the stream opened`);
        }
        status = applyProposal(replica, msg);
      }
      if (msg.acknowledge) {
        const r: Partial<ReplicateResponse> = { status, header };
        if (status === Status.PROPOSAL_MISMATCH) {
          r.fragment = replica.spool.fragment;
          r.registers = replica.spool.registers;
        }
        call.write(ReplicateResponse.fromPartial(r));
        header = undefined;
      }
      const next = await it.next();
      msg = next.done ? undefined : next.value;
    }
  } catch (e) {
    replica.spool.rollback();
    b.log.debug('replicate stream ended', { journal: name, err: (e as Error).message });
    return;
  }
  replica.spool.rollback();
  call.end();
}

function applyProposal(replica: Replica, msg: ReplicateRequest): Status {
  const p = msg.proposal!;
  if (p.journal !== replica.name) return Status.PROPOSAL_MISMATCH;
  return replica.spool.applyProposal(p, msg.registers).status;
}
