// The application interface of our consumer runtime: what a user of `runConsumer(app)` writes.
//
// It follows upstream's consumer.Application (NewStore, NewMessage, ConsumeMessage, FinalizeTxn,
// and the optional BeginTxn/FinishedTxn pair) in TypeScript's idiom: methods may return promises,
// a message is decoded from one framed record of a source journal, and the Shard context is a
// plain object holding an AbortSignal in place of a Go context.
import type { JournalClient } from '../../lib/client/journal-client.js';
import type { GetHintsResponse, ShardSpec } from '../../lib/protocol/gen/consumer/protocol.js';
import type { JournalSpec } from '../../lib/protocol/gen/broker/protocol.js';
import type { UUID } from '../../lib/message/uuid.js';
import type { Publisher } from '../../lib/client/publisher.js';
import type { Recorder } from '../../lib/recoverylog/recorder.js';
import type { Store as BaseStore } from './store.js';

/** This member's assignment of a shard (slot 0 is the primary). */
export interface ShardAssignment {
  /** The etcd key of the assignment. */
  key: string;
  slot: number;
  modRevision: bigint;
  createRevision: bigint;
}

/** What an application sees of a shard it serves. */
export interface Shard {
  /** The shard id. */
  readonly id: string;
  /** The shard's fully qualified etcd key (`<prefix>/items/<id>`). */
  readonly fqn: string;
  /** The current spec (it may change while the shard runs). */
  spec(): ShardSpec;
  assignment(): ShardAssignment;
  /** Aborted when this member loses the assignment or the process exits. */
  readonly signal: AbortSignal;
  /** The process's routed journal client. */
  readonly journals: JournalClient;
  /** Hints the shard was recovered from (undefined for a shard without a recovery log). */
  recoveredHints(): GetHintsResponse | undefined;
  /** Offsets read through by completed transactions, and offsets ACKs were written to. */
  progress(): { readThrough: Map<string, bigint>; publishAt: Map<string, bigint> };
}

/** A shard's state, committed with its checkpoint (the Store of store.ts, given this Shard context). */
export type Store = BaseStore<Shard>;

/** One decoded message and where it was read. */
export interface Envelope<M = unknown> {
  journal: string;
  /** Offsets of the record in the journal: [begin, end). */
  begin: bigint;
  end: bigint;
  message: M;
  /** The message's UUID (all zero bytes for a message without one). */
  uuid: UUID;
}

/** How a source journal's records are framed and decoded into messages. */
export interface MessageDecoder<M = unknown> {
  /** `lines`: each record ends in a newline (JSON framing); `fixed`: Gazette's fixed framing. */
  framing: 'lines' | 'fixed';
  /** Decodes one record (framing included) into a message. Throwing fails the shard. */
  decode(record: Buffer): M;
  /**
   * Optional: decodes the record `buf[begin, end)` (framing included) without a view of it made
   * first; must give what decode(buf.subarray(begin, end)) gives. `buf` may be reused after the
   * call returns, so the message must not keep it.
   */
  decodeRange?(buf: Buffer, begin: number, end: number): M;
  /** The record's UUID (a zero UUID when it has none). */
  uuid(message: M): UUID;
}

/** A consumer application. `S` is its Store type. */
export interface Application<S extends Store = Store, M = unknown> {
  /**
   * Opens the shard's store. `recorder` records the store's files into the shard's recovery log
   * (undefined when the shard has no recovery log); the directory it records is its `dir`, played
   * back from the log (JsonFileStore.open(recorder, …) is the store of a recorded JSON file).
   */
  newStore(shard: Shard, recorder: Recorder | undefined): Promise<S> | S;
  /** The decoder of messages of a source journal (upstream: NewMessage). */
  newMessage(journal: JournalSpec): MessageDecoder<M>;
  /** Applies one committed message to the store. */
  consume(shard: Shard, store: S, envelope: Envelope<M>, publisher: Publisher): Promise<void> | void;
  /** Called once per transaction, before its commit starts. */
  finalizeTxn(shard: Shard, store: S, publisher: Publisher): Promise<void> | void;
  /** Optional: called before the first message of a transaction. */
  beginTxn?(shard: Shard, store: S): Promise<void> | void;
  /** Optional: called when a transaction ends, with its commit (rejected on failure). */
  finishedTxn?(shard: Shard, store: S, committed: Promise<void>): void;
}

/** The publisher an application is given (an earlier name of this seam; prefer Publisher). */
export type TxnPublisher = Publisher;
/** The recorder a store records through (an earlier name of this seam; prefer Recorder). */
export type ShardRecorder = Recorder;
