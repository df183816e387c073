// The Store of a consumer shard: where an application keeps its state, committed together with
// the shard's checkpoint (read-through offsets and producer states of its sources, and the
// ACK intents of its transaction), as upstream's consumer.Store.
import type { Checkpoint } from '../../lib/protocol/gen/consumer/protocol.js';

/**
 * A shard's store. `Sh` is the shard context the runtime passes (the store may ignore it).
 *
 * A store that records into a recovery log (JsonFileStore) relies on the log's author fence for
 * its write fence: after another process took the log over, its commits fail. A store on an
 * external transactional system must install its own fence in restoreCheckpoint and verify it in
 * every commit, so that a store that restored an older checkpoint can never commit.
 */
export interface Store<Sh = unknown> {
  /** The checkpoint last committed (an empty checkpoint for a new store). */
  restoreCheckpoint(shard: Sh): Promise<Checkpoint>;
  /**
   * Starts committing the state with `checkpoint`; nothing of it may become durable before every
   * promise of `waitFor` resolved (the transaction's writes, whose ACKs the checkpoint's intents
   * hold), and a rejection of one of them fails the commit. Resolves when the commit is durable.
   * Not called again before the previous commit settled, though consume may run meanwhile.
   */
  startCommit(shard: Sh, checkpoint: Checkpoint, waitFor: Promise<unknown>[]): Promise<void>;
  /** Releases everything the store holds (its local files). The store is unused from then on. */
  destroy(): Promise<void> | void;
}

/** An empty checkpoint (a store that never committed). */
export function emptyCheckpoint(): Checkpoint {
  return { sources: {}, ack_intents: {} };
}
