// The byte format of a recovery log: a stream of fixed frames, each holding one RecordedOp.
//
//   [0x66 0x33 0x93 0x36][uint32 little-endian N][N bytes: RecordedOp protobuf]
//
// A Write op is followed, outside its frame, by exactly `write.length` raw bytes of file data.
// Writers never encode the op's meta-fields (first_offset, last_offset, log); a reader fills
// them in from where it found the frame.
import { RecordedOp } from '../protocol/gen/recoverylog/recorded_op.js';
import { GazctlError } from '../protocol/errors.js';

/** The magic word that starts every frame. */
export const FRAME_MAGIC = Uint8Array.of(0x66, 0x33, 0x93, 0x36);
/** Bytes of a frame header: the magic word and the length. */
export const FRAME_HEADER_BYTES = 8;

/** A recovery log could not be decoded (unexpected EOF, an undecodable op). */
export class RecoveryLogError extends GazctlError {}

/** Encodes one op as a frame (meta-fields dropped), followed by `data` for a Write op. */
export function encodeOpFrame(op: RecordedOp, data?: Uint8Array): Uint8Array {
  const clean: RecordedOp = { ...op, first_offset: 0n, last_offset: 0n, log: '' };
  const payload = RecordedOp.encode(clean).finish();
  const length = op.write ? op.write.length : 0n;
  if (data !== undefined && !op.write) throw new RecoveryLogError('only a write op carries data');
  if (op.write && BigInt(data?.length ?? 0) !== length) {
    throw new RecoveryLogError(`a write op of length ${length} needs exactly that many data bytes (got ${data?.length ?? 0})`);
  }
  const out = new Uint8Array(FRAME_HEADER_BYTES + payload.length + (data?.length ?? 0));
  out.set(FRAME_MAGIC, 0);
  new DataView(out.buffer).setUint32(4, payload.length, true);
  out.set(payload, FRAME_HEADER_BYTES);
  if (data) out.set(data, FRAME_HEADER_BYTES + payload.length);
  return out;
}

/** One step of decoding a log. */
export type FrameEvent =
  /**
   * An op, meta-fields set: first_offset = offset of its magic word, last_offset = end of its
   * frame plus its data, log = the journal read. `payload` is its protobuf bytes exactly as read
   * (the checksum runs over them); valid until the next event is pulled.
   */
  | { kind: 'op'; op: RecordedOp; payload: Uint8Array }
  /** A piece of the data of the last Write op (pieces follow it in order, `write.length` in all). */
  | { kind: 'data'; offset: bigint; bytes: Uint8Array }
  /** Bytes at [from, to) were not a frame (no magic word there): skipped to the next magic word. */
  | { kind: 'desync'; from: bigint; to: bigint }
  /** The source's content jumped from `from` to `to` (a range it no longer has). */
  | { kind: 'jump'; from: bigint; to: bigint };

/** A piece of journal content, as a LogSource yields it. */
export interface ContentChunk {
  offset: bigint;
  content: Uint8Array;
}

const EMPTY = new Uint8Array(0);

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === 0) return b;
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

function isMagicAt(b: Uint8Array, i: number): boolean {
  return b[i] === 0x66 && b[i + 1] === 0x33 && b[i + 2] === 0x93 && b[i + 3] === 0x36;
}

/**
 * Decodes the frames of `journal` from chunks starting at `offset`. A jump in the chunks'
 * offsets drops any partial frame and is reported; decoding resumes at the new offset.
 * Ends cleanly at a frame boundary (or on a lone trailing `\n`); ending inside a frame or its
 * data throws RecoveryLogError naming the journal and offset.
 */
export async function* decodeFrames(journal: string, offset: bigint, chunks: AsyncIterable<ContentChunk>): AsyncGenerator<FrameEvent, void, undefined> {
  let buf: Uint8Array = EMPTY; // unparsed bytes, starting at `at`
  let at = offset;
  let dataLeft = 0n; // data bytes of the current Write op still to come
  let dataAt = 0n;
  for await (const chunk of chunks) {
    if (chunk.content.length === 0) continue;
    const end = at + BigInt(buf.length);
    if (chunk.offset !== end) {
      if (chunk.offset < end) throw new RecoveryLogError(`${journal}: content at offset ${chunk.offset} overlaps what was read (expected ${end})`);
      yield { kind: 'jump', from: end, to: chunk.offset };
      buf = EMPTY;
      at = chunk.offset;
      dataLeft = 0n;
    }
    let b = concat(buf, chunk.content);
    let i = 0;
    for (;;) {
      if (dataLeft > 0n) {
        const n = Math.min(b.length - i, Number(dataLeft > 0x7fffffffn ? 0x7fffffffn : dataLeft));
        if (n === 0) break;
        yield { kind: 'data', offset: dataAt, bytes: b.subarray(i, i + n) };
        i += n;
        dataAt += BigInt(n);
        dataLeft -= BigInt(n);
        continue;
      }
      if (b.length - i < FRAME_HEADER_BYTES) break;
      if (!isMagicAt(b, i)) {
        // Not at a frame: skip to the next magic word within what we hold.
        let j = i + 1;
        const last = b.length - FRAME_MAGIC.length;
        while (j <= last && !isMagicAt(b, j)) j++;
        if (j > last) j = Math.max(i + 1, b.length - (FRAME_MAGIC.length - 1)); // keep a possible partial magic word
        const from = at + BigInt(i);
        yield { kind: 'desync', from, to: at + BigInt(j) };
        i = j;
        continue;
      }
      const n = new DataView(b.buffer, b.byteOffset + i + 4, 4).getUint32(0, true);
      if (b.length - i < FRAME_HEADER_BYTES + n) break;
      const payload = b.subarray(i + FRAME_HEADER_BYTES, i + FRAME_HEADER_BYTES + n);
      const first = at + BigInt(i);
      let op: RecordedOp;
      try {
        op = RecordedOp.decode(payload);
      } catch (err) {
        throw new RecoveryLogError(`${journal}: offset ${first}: cannot decode a recorded op: ${(err as Error).message}`, { cause: err });
      }
      op.first_offset = first;
      op.last_offset = first + BigInt(FRAME_HEADER_BYTES + n);
      op.log = journal;
      i += FRAME_HEADER_BYTES + n;
      if (op.write) {
        if (op.write.length < 0n) throw new RecoveryLogError(`${journal}: offset ${first}: write op with negative length ${op.write.length}`);
        op.last_offset += op.write.length;
        dataLeft = op.write.length;
        dataAt = at + BigInt(i);
      }
      yield { kind: 'op', op, payload };
    }
    // Keep the unparsed rest (copied: the chunk may be reused by its source).
    at += BigInt(i);
    buf = i >= b.length ? EMPTY : b === chunk.content ? b.slice(i) : b.subarray(i);
  }
  if (dataLeft > 0n) throw new RecoveryLogError(`${journal}: unexpected EOF at offset ${at}: ${dataLeft} bytes of write data missing`);
  if (buf.length > 0 && !(buf.length === 1 && buf[0] === 0x0a)) {
    throw new RecoveryLogError(`${journal}: unexpected EOF at offset ${at + BigInt(buf.length)} inside a frame that starts at ${at}`);
  }
}
