// A shard replica of this consumer process: the seam between the process (membership,
// allocation, the Shard service: cons) and the replica lifecycle (recovery, standby, primary,
// transactions: replica). See /docs/consumer.md.
import type { JournalClient } from '../../lib/client/journal-client.js';
import type { Keyspace } from '../../lib/keyspace/client.js';
import type { Route } from '../../lib/protocol/gen/broker/protocol.js';
import { ReplicaStatus_Code, type ConsumerSpec, type GetHintsResponse, type ReplicaStatus, type ShardSpec } from '../../lib/protocol/gen/consumer/protocol.js';
import type { Application } from './app.js';

/** The logging a replica does (the process's Logger has this shape). */
export interface ReplicaLogger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

/** What the process gives a replica. */
export interface ReplicaHost {
  readonly ks: Keyspace;
  /** The process's routed broker client. */
  readonly journals: JournalClient;
  readonly app: Application;
  readonly log: ReplicaLogger;
  /** This process's spec (id, endpoint). */
  readonly memberSpec: ConsumerSpec;
  /** The application's etcd prefix (`--etcd.prefix`): items, members and assignments live under it. */
  readonly etcdPrefix: string;
  /**
   * Writes `status` to this replica's assignment key, reduced with the status there (as upstream's
   * ReplicaStatus.Reduce) and guarded by the assignment's mod revision as upstream; resolves once
   * written and observed, or once the assignment is gone. Throws only on a failure to retry later.
   */
  setStatus(shard: string, status: ReplicaStatus): Promise<void>;
}

/** One keyspace change touching the replica's shard. */
export interface ReplicaUpdate {
  spec: ShardSpec;
  specRevision: bigint;
  /** This member's assignment: its key, slot (0 = primary) and revisions. */
  assignmentKey: string;
  slot: number;
  assignmentRevision: bigint;
  assignmentCreateRevision: bigint;
  route: Route;
}

export class Replica {
  private current: ReplicaUpdate | undefined;
  private readonly abort = new AbortController();
  private st: ReplicaStatus = { code: ReplicaStatus_Code.IDLE, errors: [] };

  constructor(
    readonly host: ReplicaHost,
    readonly id: string,
  ) {}

  /** Each keyspace change that touches this shard. Idempotent. */
  update(u: ReplicaUpdate): void {
    this.current = u;
  }

  /** The replica's own status (as last written by it). */
  status(): ReplicaStatus {
    return this.st;
  }

  /** Primary only: the read-through offsets of completed transactions (Stat). */
  readThrough(): Map<string, bigint> {
    return new Map();
  }

  /** Primary only: resolves once read-through reaches `offsets` (each journal at least). */
  async waitForReadThrough(_offsets: Map<string, bigint>, _signal: AbortSignal): Promise<void> {
    throw new Error(`shard ${this.id}: the replica lifecycle is not implemented yet`);
  }

  /** Hints the shard was recovered from (GetHints answers from etcd; this is for the app). */
  recoveredHints(): GetHintsResponse | undefined {
    return undefined;
  }

  /** Stops the replica (unassigned, or the process exits) and releases what it holds. */
  async close(): Promise<void> {
    this.abort.abort();
    void this.current;
  }
}
