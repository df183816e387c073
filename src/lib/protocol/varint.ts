// Protobuf base-128 varints of non-negative integers below 2^53, for the hand-written encoders
// (the broker's content messages). Plain numbers: no BigInt on the hot path.

/** Bytes `v` takes as a varint. */
export function varintSize(v: number): number {
  let n = 1;
  while (v >= 0x80) {
    v = Math.floor(v / 128);
    n++;
  }
  return n;
}

/** Writes `v` as a varint into `buf` at `pos`; the position after it. */
export function putVarint(buf: Buffer, pos: number, v: number): number {
  while (v >= 0x80) {
    buf[pos++] = (v % 128) | 0x80;
    v = Math.floor(v / 128);
  }
  buf[pos++] = v;
  return pos;
}
