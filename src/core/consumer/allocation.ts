// What makes the shared allocation loop (src/core/allocator/loop.ts) a consumer's: items are
// ShardSpecs wanting 1 + hot_standbys replicas (hot standbys capped by
// --consumer.max-hot-standbys; none while disabled), members ConsumerSpecs (shard_limit), and an
// assignment's value is its replica's ReplicaStatus, judged by shardIsConsistent.

import { ConsumerSpec, ReplicaStatus, ShardSpec } from '../../lib/protocol/gen/consumer/protocol.js';
import { shardIsConsistent } from '../allocator/index.js';
import type { AllocationRules } from '../allocator/loop.js';

export type ShardItem = { desiredReplication: number };
export type ConsumerMember = { itemLimit: number; exiting: boolean };
export type ShardStatusValue = { code: number } | undefined;

/** Replicas a shard wants, as upstream's ShardSpec.DesiredReplication. */
export function shardDesiredReplication(spec: ShardSpec, maxHotStandbys: number): number {
  if (spec.disable) return 0;
  return 1 + Math.min(spec.hot_standbys, maxHotStandbys);
}

export function consumerAllocationRules(maxHotStandbys: number): AllocationRules<ShardItem, ConsumerMember, ShardStatusValue> {
  return {
    decoders: {
      item: (_id, kv) => ({ desiredReplication: shardDesiredReplication(ShardSpec.decode(kv.value), maxHotStandbys) }),
      member: (_z, _s, kv) => {
        const s = ConsumerSpec.decode(kv.value);
        return { itemLimit: s.shard_limit, exiting: s.exiting };
      },
      assignment: (_n, kv) => (kv.value.length === 0 ? undefined : { code: ReplicaStatus.decode(kv.value).code }),
    },
    isConsistent: shardIsConsistent,
  };
}

/** Encodes a consumer's member key value. */
export function encodeConsumerSpec(s: { id: { zone: string; suffix: string }; endpoint: string; limit: number; exiting: boolean }): Uint8Array {
  return ConsumerSpec.encode({ process_spec: { id: s.id, endpoint: s.endpoint }, shard_limit: s.limit, exiting: s.exiting }).finish();
}
