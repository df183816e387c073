// Record framings of `journals append` input: `lines` (each record ends in \n) and `fixed`
// (4 magic bytes 66 33 93 36, a little-endian uint32 payload length, the payload).
import { GazctlError } from '../protocol/errors.js';

export type Framing = 'none' | 'lines' | 'fixed';

export const FIXED_MAGIC = Buffer.from([0x66, 0x33, 0x93, 0x36]);
export const FIXED_HEADER_LEN = 8;

/**
 * Splits a byte stream into records. Records are subarrays of the input chunks where
 * possible (no copy); a record spanning chunks is copied once.
 */
export class RecordSplitter {
  private carry: Buffer = Buffer.alloc(0);
  private consumed = 0n;

  constructor(private readonly framing: 'lines' | 'fixed') {}

  /** Bytes of input fully consumed into records so far. */
  get offset(): bigint {
    return this.consumed;
  }

  /** Feeds a chunk; returns the complete records it finishes. */
  push(chunk: Buffer): Buffer[] {
    const ends: number[] = [];
    const buf = this.pushEnds(chunk, ends);
    const out: Buffer[] = [];
    let pos = 0;
    for (const e of ends) {
      out.push(buf.subarray(pos, e));
      pos = e;
    }
    return out;
  }

  /**
   * Feeds a chunk; returns the buffer holding the complete records it finishes, with `ends`
   * (cleared first) set to each record's end index in it (the first record begins at 0, each
   * next one where the previous ended). No view is made per record.
   */
  pushEnds(chunk: Buffer, ends: number[]): Buffer {
    ends.length = 0;
    const buf = this.carry.length ? Buffer.concat([this.carry, chunk]) : chunk;
    let pos = 0;
    if (this.framing === 'lines') {
      for (;;) {
        const nl = buf.indexOf(10, pos);
        if (nl < 0) break;
        pos = nl + 1;
        ends.push(pos);
      }
    } else {
      while (buf.length - pos >= FIXED_HEADER_LEN) {
        if (buf[pos] !== 0x66 || buf[pos + 1] !== 0x33 || buf[pos + 2] !== 0x93 || buf[pos + 3] !== 0x36) {
          throw new GazctlError(`fixed framing: expected the magic word 66 33 93 36 at input offset ${this.consumed + BigInt(pos)} (input is de-synchronised)`);
        }
        const len = buf.readUInt32LE(pos + 4);
        if (buf.length - pos < FIXED_HEADER_LEN + len) break;
        pos += FIXED_HEADER_LEN + len;
        ends.push(pos);
      }
    }
    this.consumed += BigInt(pos);
    // Copy a small remainder so the big input chunk can be released.
    this.carry = pos === buf.length ? Buffer.alloc(0) : Buffer.from(buf.subarray(pos));
    return buf;
  }

  /** Bytes of an unfinished record at end of input. */
  get pending(): number {
    return this.carry.length;
  }

  /**
   * For `lines`: the largest prefix of `chunk` (after any carried bytes) ending in a newline,
   * returned whole without splitting into records. Used when every record goes to the same
   * journal, to avoid per-record work.
   */
  pushBulk(chunk: Buffer): Buffer | undefined {
    const buf = this.carry.length ? Buffer.concat([this.carry, chunk]) : chunk;
    const last = buf.lastIndexOf(10);
    if (last < 0) {
      this.carry = Buffer.from(buf);
      return undefined;
    }
    this.consumed += BigInt(last + 1);
    this.carry = last + 1 === buf.length ? Buffer.alloc(0) : Buffer.from(buf.subarray(last + 1));
    return buf.subarray(0, last + 1);
  }

  /**
   * Like pushBulk, without copying the big chunk: the carried bytes plus `chunk`'s first line
   * (a small copy), then a view of `chunk`'s following whole lines. Either may be absent.
   */
  pushBulkParts(chunk: Buffer): Buffer[] {
    if (this.carry.length === 0) {
      const run = this.pushBulk(chunk);
      return run ? [run] : [];
    }
    const first = chunk.indexOf(10);
    if (first < 0) {
      this.carry = Buffer.concat([this.carry, chunk]);
      return [];
    }
    const head = Buffer.concat([this.carry, chunk.subarray(0, first + 1)]);
    this.consumed += BigInt(head.length);
    this.carry = Buffer.alloc(0);
    const rest = this.pushBulk(chunk.subarray(first + 1));
    return rest ? [head, rest] : [head];
  }
}

/** The partition key carried by a key record: a line without its line ending, or a frame's payload. */
export function keyOfRecord(record: Buffer, framing: 'lines' | 'fixed', base64: boolean): Buffer {
  if (framing === 'fixed') return record.subarray(FIXED_HEADER_LEN);
  let end = record.length;
  if (end > 0 && record[end - 1] === 10) end--;
  if (end > 0 && record[end - 1] === 13) end--;
  const key = record.subarray(0, end);
  if (!base64) return key;
  const text = key.toString('latin1');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 !== 0) {
    throw new GazctlError(`partition key ${JSON.stringify(text.slice(0, 64))} is not padded standard base64`);
  }
  return Buffer.from(text, 'base64');
}
