// XXH64 (seed 0), the checksum a Zstandard frame may end with (its low 32 bits). 64-bit words
// are kept as two unsigned 32-bit halves (products built from 16-bit pieces and Math.imul),
// which runs many times faster than BigInt arithmetic.

// Results of the 64-bit helpers below land in these two registers (high, low half).
let RH = 0;
let RL = 0;

/** (ah:al) * (bh:bl) mod 2^64 into RH:RL. */
function mul(ah: number, al: number, bh: number, bl: number): void {
  // al * bl in full from 16-bit pieces; the cross terms only reach the high word.
  const a0 = al & 0xffff, a1 = al >>> 16;
  const b0 = bl & 0xffff, b1 = bl >>> 16;
  const p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0;
  const mid = (p00 >>> 16) + (p01 & 0xffff) + (p10 & 0xffff);
  RL = (((mid & 0xffff) << 16) | (p00 & 0xffff)) >>> 0;
  const hi = a1 * b1 + (p01 >>> 16) + (p10 >>> 16) + (mid >>> 16);
  RH = (hi + Math.imul(ah, bl) + Math.imul(al, bh)) >>> 0;
}

/** (ah:al) + (bh:bl) mod 2^64 into RH:RL. */
function add(ah: number, al: number, bh: number, bl: number): void {
  const lo = al + bl;
  RL = lo >>> 0;
  RH = (ah + bh + (lo > 0xffffffff ? 1 : 0)) >>> 0;
}

/** rotate-left of (h:l) by r (0 < r < 64) into RH:RL. */
function rotl(h: number, l: number, r: number): void {
  if (r === 32) {
    RH = l;
    RL = h;
    return;
  }
  if (r > 32) {
    const t = h;
    h = l;
    l = t;
    r -= 32;
  }
  RH = ((h << r) | (l >>> (32 - r))) >>> 0;
  RL = ((l << r) | (h >>> (32 - r))) >>> 0;
}

const P1H = 0x9e3779b1, P1L = 0x85ebca87;
const P2H = 0xc2b2ae3d, P2L = 0x27d4eb4f;
const P3H = 0x165667b1, P3L = 0x9e3779f9;
const P4H = 0x85ebca77, P4L = 0xc2b2ae63;
const P5H = 0x27d4eb2f, P5L = 0x165667c5;

/** round(acc, lane) = rotl(acc + lane * P2, 31) * P1, into RH:RL. */
function round(ah: number, al: number, lh: number, ll: number): void {
  mul(lh, ll, P2H, P2L);
  add(ah, al, RH, RL);
  rotl(RH, RL, 31);
  mul(RH, RL, P1H, P1L);
}

/** Streaming XXH64 with seed 0. */
export class Xxh64 {
  // Four accumulators as (high, low) halves: v1 = P1 + P2, v2 = P2, v3 = 0, v4 = -P1.
  private readonly v = new Uint32Array([0, 0, P2H, P2L, 0, 0, 0, 0]);
  private totalLength = 0;
  private readonly tail = Buffer.alloc(32);
  private tailLength = 0;

  constructor() {
    add(P1H, P1L, P2H, P2L);
    this.v[0] = RH;
    this.v[1] = RL;
    // -P1 = ~P1 + 1
    add(~P1H >>> 0, ~P1L >>> 0, 0, 1);
    this.v[6] = RH;
    this.v[7] = RL;
  }

  update(data: Uint8Array): this {
    this.totalLength += data.length;
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
    for (; i + 32 <= data.length; i += 32) this.stripe(data, i);
    if (i < data.length) {
      this.tail.set(data.subarray(i), 0);
      this.tailLength = data.length - i;
    }
    return this;
  }

  private stripe(b: Uint8Array, i: number): void {
    const v = this.v;
    for (let k = 0; k < 4; k++, i += 8) {
      const ll = (b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16) | (b[i + 3]! << 24)) >>> 0;
      const lh = (b[i + 4]! | (b[i + 5]! << 8) | (b[i + 6]! << 16) | (b[i + 7]! << 24)) >>> 0;
      round(v[2 * k]!, v[2 * k + 1]!, lh, ll);
      v[2 * k] = RH;
      v[2 * k + 1] = RL;
    }
  }

  /** The 64-bit digest of everything updated so far. */
  digest(): bigint {
    const v = this.v;
    let hh: number, hl: number;
    if (this.totalLength >= 32) {
      rotl(v[0]!, v[1]!, 1);
      let sh = RH, sl = RL;
      rotl(v[2]!, v[3]!, 7);
      add(sh, sl, RH, RL);
      sh = RH;
      sl = RL;
      rotl(v[4]!, v[5]!, 12);
      add(sh, sl, RH, RL);
      sh = RH;
      sl = RL;
      rotl(v[6]!, v[7]!, 18);
      add(sh, sl, RH, RL);
      hh = RH;
      hl = RL;
      for (let k = 0; k < 4; k++) {
        // merge: h = (h ^ round(0, v)) * P1 + P4
        round(0, 0, v[2 * k]!, v[2 * k + 1]!);
        mul((hh ^ RH) >>> 0, (hl ^ RL) >>> 0, P1H, P1L);
        add(RH, RL, P4H, P4L);
        hh = RH;
        hl = RL;
      }
    } else {
      hh = P5H;
      hl = P5L;
    }
    // + total length (below 2^53)
    add(hh, hl, Math.floor(this.totalLength / 0x100000000) >>> 0, this.totalLength >>> 0);
    hh = RH;
    hl = RL;
    const t = this.tail;
    let i = 0;
    for (; i + 8 <= this.tailLength; i += 8) {
      round(0, 0, t.readUInt32LE(i + 4), t.readUInt32LE(i));
      rotl((hh ^ RH) >>> 0, (hl ^ RL) >>> 0, 27);
      mul(RH, RL, P1H, P1L);
      add(RH, RL, P4H, P4L);
      hh = RH;
      hl = RL;
    }
    if (i + 4 <= this.tailLength) {
      mul(0, t.readUInt32LE(i), P1H, P1L);
      rotl((hh ^ RH) >>> 0, (hl ^ RL) >>> 0, 23);
      mul(RH, RL, P2H, P2L);
      add(RH, RL, P3H, P3L);
      hh = RH;
      hl = RL;
      i += 4;
    }
    for (; i < this.tailLength; i++) {
      mul(0, t[i]!, P5H, P5L);
      rotl((hh ^ RH) >>> 0, (hl ^ RL) >>> 0, 11);
      mul(RH, RL, P1H, P1L);
      hh = RH;
      hl = RL;
    }
    // avalanche: h ^= h >> 33; h *= P2; h ^= h >> 29; h *= P3; h ^= h >> 32
    hl = (hl ^ (hh >>> 1)) >>> 0;
    mul(hh, hl, P2H, P2L);
    hh = RH;
    hl = RL;
    hl = (hl ^ ((hl >>> 29) | (hh << 3))) >>> 0;
    hh = (hh ^ (hh >>> 29)) >>> 0;
    mul(hh, hl, P3H, P3L);
    hh = RH;
    hl = (RL ^ RH) >>> 0;
    return (BigInt(hh) << 32n) | BigInt(hl);
  }
}

/** XXH64 (seed 0) of `data`. */
export function xxh64(data: Uint8Array): bigint {
  return new Xxh64().update(data).digest();
}
