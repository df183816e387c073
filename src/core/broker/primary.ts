// The primary's duties besides appends: keeping the replication pipeline in step with the
// route, synchronising the replicas' spools when a pipeline is built, and advertising the route
// in the journal's assignment values once a round through the pipeline succeeded.

import { CompressionCodec, Route, Status, type Fragment } from '../../lib/protocol/gen/broker/protocol.js';
import { zeroSum } from '../../lib/protocol/fragment.js';
import { routeEquals } from '../../lib/protocol/route.js';
import type { Broker } from './broker.js';
import { allOk, Pipeline, PipelineError } from './pipeline.js';
import type { Replica } from './replica.js';
import type { Resolution } from './resolver.js';
import type { JournalEntry } from './view.js';

type Local = Extract<Resolution, { kind: 'local' }>;

function routeKey(r: Route): string {
  return `${r.primary}|${r.members.map((m, i) => `${m.zone}#${m.suffix}@${r.endpoints[i] ?? ''}`).join(',')}`;
}

/**
 * The pipeline for the resolved route, built (and the replicas' spools synchronised with ours)
 * when there is none or the route changed. Call with the replica's lock held.
 */
export async function ensurePipeline(b: Broker, replica: Replica, res: Local): Promise<Pipeline> {
  const key = routeKey(res.entry.route);
  const cur = replica.pipeline;
  if (cur && cur.routeKey === key && !cur.broken) return cur;
  cur?.close();
  replica.pipeline = undefined;
  const p = new Pipeline(key, res.header, res.entry.route, res.localIndex, b.peers, res.spec.name);
  try {
    if (p.size > 0) {
      const acks = await p.propose(replica.spool.fragment, replica.spool.registers);
      if (b.log.enabled('debug')) {
        const answers = acks.map((a) => `${a.endpoint}:${Status[a.response.status] ?? a.response.status}${a.response.fragment ? `:${a.response.fragment.begin}-${a.response.fragment.end}` : ''}`);
        b.log.debug('pipeline sync', { journal: replica.name, spool: `${replica.spool.fragment.begin}-${replica.spool.fragment.end}`, answers: answers.join(' ') });
      }
      if (!allOk(acks)) {
        let maxEnd = replica.spool.fragment.end;
        let registers = replica.spool.registers;
        for (const a of acks) {
          const r = a.response;
          if (r.status === Status.PROPOSAL_MISMATCH && r.fragment) {
            if (r.fragment.end > maxEnd) {
              maxEnd = r.fragment.end;
              registers = r.registers ?? registers;
            }
          } else if (r.status !== Status.OK) {
            throw new PipelineError(`replica ${a.endpoint} answered ${Status[r.status] ?? r.status}`);
          }
        }
        // Start every spool afresh at the furthest offset any of them reached.
        const ours = replica.spool.fragment.end;
        const roll = rollTo(replica, maxEnd);
        replica.spool.applyProposal(roll, registers);
        const again = await p.propose(roll, registers);
        if (!allOk(again)) throw new PipelineError(`replicas did not accept the resynchronised spool at ${maxEnd}`);
        if (maxEnd > ours) {
          // A replica had committed [ours, maxEnd) and we had not: an append whose commit reached
          // it but whose pipeline failed here (a replica cut off for longer than the proposal
          // timeout). Those bytes are in their spools, persisted now that they rolled, and in no
          // fragment we know of: readers here block at `ours` until we list the stores. Do that
          // now instead of at the next refresh interval.
          b.log.info('rolled forward over content only the replicas committed; listing the stores for it', { journal: replica.name, from: ours.toString(), to: maxEnd.toString() });
          void replica.refreshUntilCovered(ours).then((ok) => {
            if (!ok) b.log.warn('content the replicas committed is not in the stores yet; readers wait for the next refresh', { journal: replica.name, from: ours.toString(), to: maxEnd.toString() });
          });
        }
      }
    }
  } catch (e) {
    p.close();
    throw e;
  }
  replica.pipeline = p;
  return p;
}

/** An empty fragment at `at` with the spec's codec: the proposal that rolls every spool there. */
export function rollTo(replica: Replica, at: bigint): Fragment {
  return {
    journal: replica.name,
    begin: at,
    end: at,
    sum: zeroSum(),
    compression_codec: replica.spec.fragment?.compression_codec ?? CompressionCodec.NONE,
    backing_store: '',
    mod_time: 0n,
    path_postfix: '',
  };
}

/** Send `proposal` through the pipeline; the pipeline is dropped when a replica refuses. */
export async function proposeAll(replica: Replica, p: Pipeline, proposal: Fragment, registers: Replica['spool']['registers']): Promise<void> {
  if (p.size === 0) return;
  try {
    const acks = await p.propose(proposal, registers);
    if (!allOk(acks)) {
      const bad = acks.find((a) => a.response.status !== Status.OK)!;
      throw new PipelineError(`replica ${bad.endpoint} answered ${Status[bad.response.status] ?? bad.response.status}`);
    }
  } catch (e) {
    p.close();
    if (replica.pipeline === p) replica.pipeline = undefined;
    throw e;
  }
}

/** Whether every assignment of the journal advertises the route its keys describe. */
export function advertised(j: JournalEntry): boolean {
  return j.assignments.length > 0 && j.assignments.every((a) => routeEquals(a.value, j.route));
}

/**
 * Write the route into every assignment of the journal that does not carry it yet, each guarded
 * by its mod revision and kept under its own lease.
 */
export async function advertise(b: Broker, j: JournalEntry): Promise<void> {
  if (advertised(j)) return;
  const value = Buffer.from(Route.encode({ members: j.route.members, primary: j.route.primary, endpoints: [] }).finish());
  const r = await b.ks.txn({
    compare: j.assignments.map((a) => ({ key: a.key, target: 'modRevision' as const, result: '=' as const, value: a.kv.modRevision })),
    success: j.assignments.map((a) => (a.kv.lease !== 0n ? { put: a.key, value, lease: a.kv.lease } : { put: a.key, value })),
  });
  if (r.succeeded) {
    b.log.debug('advertised route', { journal: j.name, revision: r.revision });
    await b.view.waitFor(r.revision);
  }
}

/** An empty round through the pipeline of a journal this broker is primary of, then advertise. */
export async function pulse(b: Broker, name: string): Promise<void> {
  const res = await b.resolver.resolve({ journal: name, requirePrimary: true, mayProxy: false });
  if (res.kind !== 'local') return;
  const replica = b.replicas.ensure(res.spec);
  await replica.exclusive(async () => {
    const p = await ensurePipeline(b, replica, res);
    await proposeAll(replica, p, replica.spool.fragment, replica.spool.registers);
  });
  const fresh = b.view.journals().get(name);
  if (fresh && routeKey(fresh.route) === routeKey(res.entry.route)) await advertise(b, fresh);
}
