// The few pieces of gRPC's HTTP/2 wire format that our hand-made calls share (the lean unary
// client, the broker's Replicate client and server): the 5-byte prefix of a message (a
// compressed flag, always 0 here, and the length, big-endian) and the percent-encoding of a
// status message in the grpc-message trailer.

/** The prefix of an uncompressed message of `length` bytes. */
export function messagePrefix(length: number): Buffer {
  const out = Buffer.allocUnsafe(5);
  out[0] = 0;
  out.writeUInt32BE(length, 1);
  return out;
}

/** A whole encoded message with its prefix, in one buffer. */
export function frameMessage(encoded: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + encoded.length);
  out[0] = 0;
  out.writeUInt32BE(encoded.length, 1);
  out.set(encoded, 5);
  return out;
}

/** gRPC's percent-encoding of a status message: bytes outside printable ASCII, and '%'. */
export function encodeGrpcMessage(s: string): string {
  let out = '';
  for (const b of Buffer.from(s, 'utf8')) out += b >= 0x20 && b <= 0x7e && b !== 0x25 ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  return out;
}

/** A grpc-message trailer decoded as grpc-js decodes it; one that is not valid percent-encoding is kept as it came. */
export function decodeGrpcMessage(s: string): string {
  try {
    return decodeURI(s);
  } catch {
    return s;
  }
}

/** Why {@link MessageDeframer.push} gave up on a stream: the compressed flag set, or a message over its bound. */
export type DeframeProblem = { kind: 'compressed' } | { kind: 'too-large'; length: number };

/**
 * Cuts length-prefixed messages out of an HTTP/2 stream's DATA chunks as they come. A message
 * that lies whole within one chunk is handed out as a view of that chunk (no copy); one spread
 * over several chunks is copied together once, into a buffer of its own. Messages are handed
 * out in order; the caller decodes them.
 */
export class MessageDeframer {
  private readonly head = Buffer.alloc(5);
  private headHave = 0;
  private msg: Buffer | undefined;
  private msgHave = 0;

  /** `maxMessageBytes`: a longer message is refused as soon as its prefix is read. */
  constructor(private readonly maxMessageBytes = Number.POSITIVE_INFINITY) {}

  /**
   * Feeds one chunk. `deliver` gets each message completed by it, and returns false to stop
   * (the rest of the chunk is then dropped: the caller is done with the stream). Returns the
   * problem that stopped it, if the framing was bad; the stream cannot be read further then.
   */
  push(chunk: Buffer, deliver: (message: Buffer) => boolean): DeframeProblem | undefined {
    let pos = 0;
    while (pos < chunk.length) {
      if (this.msg === undefined) {
        // The 5-byte prefix: compressed flag and length.
        if (this.headHave === 0 && chunk.length - pos >= 5) {
          chunk.copy(this.head, 0, pos, pos + 5);
          pos += 5;
        } else {
          const n = Math.min(5 - this.headHave, chunk.length - pos);
          chunk.copy(this.head, this.headHave, pos, pos + n);
          this.headHave += n;
          pos += n;
          if (this.headHave < 5) return undefined;
        }
        this.headHave = 0;
        if (this.head[0] !== 0) return { kind: 'compressed' };
        const len = this.head.readUInt32BE(1);
        if (len > this.maxMessageBytes) return { kind: 'too-large', length: len };
        if (chunk.length - pos >= len) {
          // The whole message is in this chunk: a view of it.
          const m = chunk.subarray(pos, pos + len);
          pos += len;
          if (!deliver(m)) return undefined;
          continue;
        }
        this.msg = Buffer.allocUnsafe(len);
        this.msgHave = 0;
      }
      const n = Math.min(this.msg.length - this.msgHave, chunk.length - pos);
      chunk.copy(this.msg, this.msgHave, pos, pos + n);
      this.msgHave += n;
      pos += n;
      if (this.msgHave === this.msg.length) {
        const m = this.msg;
        this.msg = undefined;
        if (!deliver(m)) return undefined;
      }
    }
    return undefined;
  }
}
