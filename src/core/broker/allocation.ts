// What makes the shared allocation loop (src/core/allocator/loop.ts) a broker's: items are
// JournalSpecs (replication capped by --broker.max-replication, suspension as upstream), members
// BrokerSpecs, assignment values the Routes replicas advertise, and the journal consistency rule.

import { BrokerSpec, JournalSpec, Route } from '../../lib/protocol/gen/broker/protocol.js';
import { journalIsConsistent, type RouteLike } from '../allocator/index.js';
import type { AllocationRules } from '../allocator/loop.js';
import { desiredReplication } from './resolver.js';

export type BrokerItem = { desiredReplication: number };
export type BrokerMember = { itemLimit: number; exiting: boolean };
export type BrokerAllocationRules = AllocationRules<BrokerItem, BrokerMember, RouteLike | undefined>;

export function brokerAllocationRules(maxReplication: number): BrokerAllocationRules {
  return {
    decoders: {
      item: (_id, kv) => ({ desiredReplication: desiredReplication(JournalSpec.decode(kv.value), maxReplication) }),
      member: (_z, _s, kv) => {
        const s = BrokerSpec.decode(kv.value);
        return { itemLimit: s.journal_limit, exiting: s.exiting };
      },
      assignment: (_n, kv) => (kv.value.length === 0 ? undefined : (Route.decode(kv.value) as RouteLike)),
    },
    isConsistent: journalIsConsistent,
  };
}

/** Encodes a broker's member key value. */
export function encodeBrokerSpec(s: { id: { zone: string; suffix: string }; endpoint: string; limit: number; exiting: boolean }): Uint8Array {
  return BrokerSpec.encode({ process_spec: { id: s.id, endpoint: s.endpoint }, journal_limit: s.limit, exiting: s.exiting }).finish();
}
