// XXH64 (seed 0), the checksum a Zstandard frame may end with (its low 32 bits). Written with
// BigInt arithmetic: correct and simple, though far slower than a native hash (tens of MB/s).
const M64 = (1n << 64n) - 1n;
const P1 = 0x9e3779b185ebca87n;
const P2 = 0xc2b2ae3d27d4eb4fn;
const P3 = 0x165667b19e3779f9n;
const P4 = 0x85ebca77c2b2ae63n;
const P5 = 0x27d4eb2f165667c5n;

function rotl(x: bigint, r: bigint): bigint {
  return ((x << r) | (x >> (64n - r))) & M64;
}

function round(acc: bigint, lane: bigint): bigint {
  acc = (acc + lane * P2) & M64;
  acc = rotl(acc, 31n);
  return (acc * P1) & M64;
}

function merge(acc: bigint, v: bigint): bigint {
  acc ^= round(0n, v);
  return (acc * P1 + P4) & M64;
}

/** Streaming XXH64 with seed 0. */
export class Xxh64 {
  private v1 = (P1 + P2) & M64;
  private v2 = P2;
  private v3 = 0n;
  private v4 = (0n - P1) & M64;
  private total = 0;
  /** Up to 31 bytes not yet folded into a stripe. */
  private tail = Buffer.alloc(32);
  private tailLength = 0;

  update(data: Uint8Array): this {
    this.total += data.length;
    let i = 0;
    if (this.tailLength > 0) {
      const take = Math.min(32 - this.tailLength, data.length);
      this.tail.set(data.subarray(0, take), this.tailLength);
      this.tailLength += take;
      i = take;
      if (this.tailLength < 32) return this;
      this.stripe(this.tail, 0);
      this.tailLength = 0;
    }
    const view = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    for (; i + 32 <= data.length; i += 32) this.stripe(view, i);
    if (i < data.length) {
      this.tail.set(data.subarray(i), 0);
      this.tailLength = data.length - i;
    }
    return this;
  }

  private stripe(b: Buffer, i: number): void {
    this.v1 = round(this.v1, b.readBigUInt64LE(i));
    this.v2 = round(this.v2, b.readBigUInt64LE(i + 8));
    this.v3 = round(this.v3, b.readBigUInt64LE(i + 16));
    this.v4 = round(this.v4, b.readBigUInt64LE(i + 24));
  }

  /** The 64-bit digest of everything updated so far. */
  digest(): bigint {
    let h: bigint;
    if (this.total >= 32) {
      h = (rotl(this.v1, 1n) + rotl(this.v2, 7n) + rotl(this.v3, 12n) + rotl(this.v4, 18n)) & M64;
      h = merge(h, this.v1);
      h = merge(h, this.v2);
      h = merge(h, this.v3);
      h = merge(h, this.v4);
    } else {
      h = P5;
    }
    h = (h + BigInt(this.total)) & M64;
    const t = this.tail;
    let i = 0;
    for (; i + 8 <= this.tailLength; i += 8) {
      h ^= round(0n, t.readBigUInt64LE(i));
      h = (rotl(h, 27n) * P1 + P4) & M64;
    }
    if (i + 4 <= this.tailLength) {
      h ^= (BigInt(t.readUInt32LE(i)) * P1) & M64;
      h = (rotl(h, 23n) * P2 + P3) & M64;
      i += 4;
    }
    for (; i < this.tailLength; i++) {
      h ^= (BigInt(t[i]!) * P5) & M64;
      h = (rotl(h, 11n) * P1) & M64;
    }
    h ^= h >> 33n;
    h = (h * P2) & M64;
    h ^= h >> 29n;
    h = (h * P3) & M64;
    h ^= h >> 32n;
    return h;
  }
}

/** XXH64 (seed 0) of `data`. */
export function xxh64(data: Uint8Array): bigint {
  return new Xxh64().update(data).digest();
}
