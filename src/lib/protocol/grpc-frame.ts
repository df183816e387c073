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
