// Which failures of a replica clear up by themselves (retried with backoff, never failing the
// shard), after issue #27's field report: a Go consumer failed its shard on "fetching log spec:
// rpc error: code = Unavailable ... connection reset by peer" while its broker restarted.
import { status as GrpcStatus } from '@grpc/grpc-js';
import { grpcCode, isTransient } from '../../lib/client/retry.js';
import { KeyspaceError } from '../../lib/keyspace/client.js';
import { RecoveryLogError } from '../../lib/recoverylog/framing.js';

/**
 * gRPC codes of a peer going away or restarting: a Go broker that is shutting down answers
 * UNKNOWN ("resolver has stopped serving local replicas"), a reset stream is INTERNAL or
 * CANCELLED, an overloaded one RESOURCE_EXHAUSTED.
 */
const TRANSIENT_GRPC_CODES = new Set<number>([
  GrpcStatus.UNKNOWN,
  GrpcStatus.UNAVAILABLE,
  GrpcStatus.DEADLINE_EXCEEDED,
  GrpcStatus.CANCELLED,
  GrpcStatus.RESOURCE_EXHAUSTED,
  GrpcStatus.ABORTED,
  GrpcStatus.INTERNAL,
]);

/**
 * Whether a failure clears up by itself: UNAVAILABLE and transient broker/consumer statuses
 * anywhere in the cause chain, an etcd call that failed, or a broker that answered a read or
 * append with a routing status.
 */
export function isTransientFailure(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && depth < 8; depth++) {
    if (isTransient(e)) return true;
    const grpc = grpcCode(e);
    if (grpc !== undefined && TRANSIENT_GRPC_CODES.has(grpc)) return true;
    if (e instanceof KeyspaceError) return true;
    // The player read a log to less than the head it asked for: a broker that joined the log's
    // route after the content was written (and before it was persisted) cannot serve it yet.
    // Upstream's player blocks until it can; ours plays again after a backoff.
    if (e instanceof RecoveryLogError && /: content ends at offset \d+, before the head \d+$/.test(e.message)) return true;
    const code = (e as { code?: unknown }).code;
    if (code === 'ECONNRESET' || code === 'ECONNREFUSED' || code === 'EPIPE') return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}
