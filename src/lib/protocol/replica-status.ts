// A shard's status as one value: the "largest" replica status over its route members
// (IDLE < BACKFILL < STANDBY < PRIMARY < FAILED), carrying every member's errors, as consumers'
// own status reduction folds them. A shard without members is IDLE.
import { ReplicaStatus_Code, type ListResponse_Shard, type ReplicaStatus } from './gen/consumer/protocol.js';

/** Folds the statuses of a listed shard's route members into one. */
export function reduceShardStatus(shard: Pick<ListResponse_Shard, 'route' | 'status'>): ReplicaStatus {
  const out: ReplicaStatus = { code: ReplicaStatus_Code.IDLE, errors: [] };
  const members = shard.route?.members.length ?? 0;
  for (let i = 0; i < members; i++) {
    // A listing with fewer statuses than members is malformed; a missing one counts as IDLE.
    const s = shard.status[i];
    if (!s) continue;
    if (s.code > out.code) out.code = s.code;
    out.errors.push(...s.errors);
  }
  return out;
}

/** The name of a replica status code (its number when unknown), as upstream prints it. */
export function replicaStatusName(code: ReplicaStatus_Code): string {
  const name = ReplicaStatus_Code[code] as string | undefined;
  return name === undefined || name === 'UNRECOGNIZED' ? String(code) : name;
}
