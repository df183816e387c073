// How a publisher writes a message: its framed record once it has a UUID, its acknowledgement,
// and the journal it goes to. The JSON encoder writes records as Go's JSON framing does.
import { encodeJsonMessage } from './json.js';
import type { UUID } from './uuid.js';

/** How a message is written: its framed record given its UUID, and its acknowledgement. */
export interface MessageEncoder<M> {
  /** The record of `message` carrying `uuid`, framing included (a JSON line ends in \n). */
  encode(message: M, uuid: UUID): Buffer;
  /** A new acknowledgement message for `journal` (encode() then gives it its ACK_TXN UUID). */
  newAcknowledgement(journal: string): M;
}

/**
 * JSON lines messages (objects) whose UUID is the first field, `UUID`, as a Go struct with an
 * untagged `UUID message.UUID` first field encodes them. `newAck` builds the acknowledgement
 * (Go: the message type's NewAcknowledgement; sum-consumer's is a zero record, whose line is
 * `{"UUID":"…","key":"","value":0}`).
 */
export function jsonEncoder<M extends Record<string, unknown>>(newAck: (journal: string) => M): MessageEncoder<M> {
  return { encode: (m, uuid) => encodeJsonMessage(m, uuid), newAcknowledgement: newAck };
}

/** Picks the journal of a message (it may throw: nothing is published then). */
export type MappingFunc<M> = (message: M) => string;
