// A consumer shard's Checkpoint (consumer.Checkpoint of the protocol) as the message layer sees it:
// per source journal the offset read through and the states of its producers, and per journal the
// ACK intent the shard's transaction must write there once it has committed. The conversions are
// those of Gazette's consumer/protocol checkpoint extensions, so that checkpoints written by Go
// members and ours hold the same thing.
import type { Checkpoint, Checkpoint_Source } from '../protocol/gen/consumer/protocol.js';
import type { ProducerState } from './sequencer.js';

/** An acknowledgement to append to `journal` (framed, ready to write) once a transaction commits. */
export interface AckIntent {
  journal: string;
  intent: Buffer;
}

export interface BuildCheckpointArgs {
  readThrough: Map<string, bigint>;
  producerStates: Iterable<ProducerState>;
  ackIntents?: Iterable<AckIntent>;
}

/** The Checkpoint of read-through offsets, producer states and ACK intents. */
export function buildCheckpoint(args: BuildCheckpointArgs): Checkpoint {
  const sources: Record<string, Checkpoint_Source> = {};
  for (const [journal, offset] of args.readThrough) sources[journal] = { read_through: offset, producers: [] };
  for (const p of args.producerStates) {
    // A producer of a journal without a read-through offset gets a source at offset 0.
    const source = (sources[p.journal] ??= { read_through: 0n, producers: [] });
    source.producers.push({ id: Buffer.from(p.producer), state: { last_ack: p.lastAck, begin: p.begin } });
  }
  const ack_intents: Record<string, Buffer> = {};
  for (const a of args.ackIntents ?? []) ack_intents[a.journal] = a.intent;
  return { sources, ack_intents };
}

/** The producer states recorded in a Checkpoint (a missing state reads as zeros, as in Go). */
export function flattenProducerStates(cp: Checkpoint): ProducerState[] {
  const out: ProducerState[] = [];
  for (const [journal, source] of Object.entries(cp.sources)) {
    for (const p of source.producers) {
      // Go copies the id into a 6-byte array: shorter ids are zero-padded, longer ones cut.
      const producer = new Uint8Array(6);
      producer.set(p.id.subarray(0, 6));
      out.push({ journal, producer, lastAck: p.state?.last_ack ?? 0n, begin: p.state?.begin ?? 0n });
    }
  }
  return out;
}

/** The read-through offset of every source of a Checkpoint. */
export function flattenReadThrough(cp: Checkpoint): Map<string, bigint> {
  const out = new Map<string, bigint>();
  for (const [journal, source] of Object.entries(cp.sources)) out.set(journal, source.read_through);
  return out;
}

/** The ACK intents of a Checkpoint, to (re-)write at recovery before anything else. */
export function flattenAckIntents(cp: Checkpoint): AckIntent[] {
  return Object.entries(cp.ack_intents).map(([journal, intent]) => ({ journal, intent }));
}
