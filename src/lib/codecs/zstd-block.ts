// Compressed Zstandard blocks from a greedy LZ77 match finder: literals are stored raw and the
// sequences (literal length, match length, offset) are entropy coded with the format's
// predefined FSE distributions, so no tables are transmitted. Much simpler than libzstd (no
// Huffman literals, no repeat offsets, matches only within the block) but valid for every
// decoder; text typically shrinks to 30-50%.
//
// Format facts used (RFC 8878): a block is a literals section then a sequences section; a raw
// literals header takes 1, 2 or 3 bytes by size; the sequences section is the sequence count,
// one byte of compression modes (0 = predefined for all three), then a bitstream read backwards
// from its final 1 bit. Offsets are written as offset + 3, which never means a repeat offset.

const LL_DIST = [4, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 2, 1, 1, 1, 1, 1, -1, -1, -1, -1];
const ML_DIST = [
  1, 4, 3, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
  1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1,
];
const OF_DIST = [1, 1, 1, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1];

const LL_BITS = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16];
const ML_BITS = [
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3, 4, 4,
  5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
];
function baselines(bits: number[], start: number): number[] {
  const out: number[] = [];
  let b = start;
  for (const n of bits) {
    out.push(b);
    b += 1 << n;
  }
  return out;
}
const LL_BASE = baselines(LL_BITS, 0);
const ML_BASE = baselines(ML_BITS, 3);

const highbit = (v: number) => 31 - Math.clz32(v);

function codeOf(base: number[], value: number): number {
  // Largest code whose baseline is <= value.
  let lo = 0;
  let hi = base.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (base[mid]! <= value) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

const LL_SMALL = Array.from({ length: 64 }, (_, v) => codeOf(LL_BASE, v));
const ML_SMALL = Array.from({ length: 128 }, (_, v) => codeOf(ML_BASE, v + 3));
/** Literal length code (as libzstd computes it). */
const llCode = (ll: number) => (ll < 64 ? LL_SMALL[ll]! : highbit(ll) + 19);
/** Match length code, for a match of `ml` >= 3 bytes. */
const mlCode = (ml: number) => (ml - 3 < 128 ? ML_SMALL[ml - 3]! : highbit(ml - 3) + 36);

/** An FSE encoding table built from a normalized distribution (as libzstd's FSE_buildCTable). */
interface CTable {
  log: number;
  stateTable: Uint16Array;
  deltaNbBits: Int32Array;
  deltaFindState: Int32Array;
}

function buildCTable(dist: number[], log: number): CTable {
  const size = 1 << log;
  const symbols = new Int32Array(size);
  let high = size - 1;
  const cumul = new Int32Array(dist.length + 1);
  for (let s = 0; s < dist.length; s++) {
    const n = dist[s]!;
    if (n === -1) symbols[high--] = s;
    cumul[s + 1] = cumul[s]! + (n === -1 ? 1 : n);
  }
  const step = (size >> 1) + (size >> 3) + 3;
  let pos = 0;
  for (let s = 0; s < dist.length; s++) {
    for (let i = 0; i < dist[s]!; i++) {
      symbols[pos] = s;
      do pos = (pos + step) & (size - 1);
      while (pos > high);
    }
  }
  const stateTable = new Uint16Array(size);
  const next = cumul.slice();
  for (let u = 0; u < size; u++) stateTable[next[symbols[u]!]!++] = size + u;
  const deltaNbBits = new Int32Array(dist.length);
  const deltaFindState = new Int32Array(dist.length);
  let total = 0;
  for (let s = 0; s < dist.length; s++) {
    const n = dist[s]!;
    if (n === 0) continue;
    if (n === -1 || n === 1) {
      deltaNbBits[s] = (log << 16) - (1 << log);
      deltaFindState[s] = total - 1;
      total++;
    } else {
      const maxBitsOut = log - highbit(n - 1);
      const minStatePlus = n << maxBitsOut;
      deltaNbBits[s] = (maxBitsOut << 16) - minStatePlus;
      deltaFindState[s] = total - n;
      total += n;
    }
  }
  return { log, stateTable, deltaNbBits, deltaFindState };
}

const LL_TABLE = buildCTable(LL_DIST, 6);
const ML_TABLE = buildCTable(ML_DIST, 6);
const OF_TABLE = buildCTable(OF_DIST, 5);

/** Little-endian bit writer (first bit written = lowest bit of the first byte). */
class BitWriter {
  private out: Uint8Array;
  private len = 0;
  private acc = 0;
  private n = 0;

  constructor(capacity: number) {
    this.out = new Uint8Array(Math.max(16, capacity));
  }

  /** Appends the low `bits` (at most 24) bits of `value`. */
  add(value: number, bits: number): void {
    if (bits === 0) return;
    this.acc = (this.acc | ((value & ((1 << bits) - 1)) << this.n)) >>> 0;
    this.n += bits;
    if (this.len + 4 > this.out.length) {
      const grown = new Uint8Array(this.out.length * 2);
      grown.set(this.out);
      this.out = grown;
    }
    while (this.n >= 8) {
      this.out[this.len++] = this.acc & 0xff;
      this.acc >>>= 8;
      this.n -= 8;
    }
  }

  /** Adds the end mark and returns the bytes. */
  close(): Uint8Array {
    this.add(1, 1);
    if (this.n > 0) this.out[this.len++] = this.acc & 0xff;
    return this.out.subarray(0, this.len);
  }
}

function initState(t: CTable, s: number): number {
  const nbBitsOut = (t.deltaNbBits[s]! + (1 << 15)) >> 16;
  const value = (nbBitsOut << 16) - t.deltaNbBits[s]!;
  return t.stateTable[(value >> nbBitsOut) + t.deltaFindState[s]!]!;
}

function encodeSymbol(w: BitWriter, t: CTable, state: number, s: number): number {
  const nbBitsOut = (state + t.deltaNbBits[s]!) >> 16;
  w.add(state & ((1 << nbBitsOut) - 1), nbBitsOut);
  return t.stateTable[(state >> nbBitsOut) + t.deltaFindState[s]!]!;
}

const HASH_BITS = 15;
const MIN_MATCH = 4;
/** Most sequences a 128 KiB block can hold with 4-byte matches. */
const MAX_SEQS = (128 * 1024) / MIN_MATCH;

// Scratch space reused by every block (encoding is synchronous).
const seqLL = new Int32Array(MAX_SEQS);
const seqML = new Int32Array(MAX_SEQS);
/** offset + 3 */
const seqOF = new Int32Array(MAX_SEQS);
const codeLL = new Uint8Array(MAX_SEQS);
const codeML = new Uint8Array(MAX_SEQS);
const codeOF = new Uint8Array(MAX_SEQS);
const hashTable = new Int32Array(1 << HASH_BITS);
let literalBuf = new Uint8Array(128 * 1024);

/** Fills the seq* arrays and `literalBuf`; returns the counts. */
function findSequences(src: Uint8Array): { ns: number; nl: number } {
  if (literalBuf.length < src.length) literalBuf = new Uint8Array(src.length);
  const lits = literalBuf;
  let nl = 0;
  let ns = 0;
  const table = hashTable.fill(-1);
  const end = src.length;
  const load = (i: number) => (src[i]! | (src[i + 1]! << 8) | (src[i + 2]! << 16) | (src[i + 3]! << 24)) >>> 0;
  const hash = (v: number) => Math.imul(v, 0x9e3779b1) >>> (32 - HASH_BITS);
  let anchor = 0;
  let i = 0;
  while (i + MIN_MATCH <= end) {
    const v = load(i);
    const h = hash(v);
    const cand = table[h]!;
    table[h] = i;
    if (cand >= 0 && load(cand) === v) {
      let len = MIN_MATCH;
      while (i + len < end && src[cand + len] === src[i + len]) len++;
      for (let k = anchor; k < i; k++) lits[nl++] = src[k]!;
      seqLL[ns] = i - anchor;
      seqML[ns] = len;
      seqOF[ns] = i - cand + 3;
      ns++;
      const stop = Math.min(i + len, end - MIN_MATCH + 1);
      for (let k = i + 1; k < stop; k += 2) table[hash(load(k))] = k;
      i += len;
      anchor = i;
    } else {
      i++;
    }
  }
  for (let k = anchor; k < end; k++) lits[nl++] = src[k]!;
  return { ns, nl };
}

/**
 * The body of a compressed block for `src` (at most 128 KiB), or undefined when it would not be
 * smaller than `src` (the caller then writes a raw or RLE block).
 */
export function encodeZstdBlock(src: Uint8Array): Buffer | undefined {
  if (src.length > 128 * 1024) throw new RangeError('a zstd block holds at most 128 KiB');
  const { ns, nl: n } = findSequences(src);
  if (ns === 0) return undefined;
  const parts: Uint8Array[] = [];
  // Literals section, raw.
  if (n < 32) parts.push(Uint8Array.of(n << 3));
  else if (n < 4096) parts.push(Uint8Array.of(0x04 | ((n & 0x0f) << 4), n >>> 4));
  else parts.push(Uint8Array.of(0x0c | ((n & 0x0f) << 4), (n >>> 4) & 0xff, n >>> 12));
  parts.push(literalBuf.subarray(0, n));
  // Sequences section header.
  if (ns < 128) parts.push(Uint8Array.of(ns));
  else if (ns < 0x7f00) parts.push(Uint8Array.of((ns >>> 8) + 128, ns & 0xff));
  else parts.push(Uint8Array.of(255, (ns - 0x7f00) & 0xff, (ns - 0x7f00) >>> 8));
  parts.push(Uint8Array.of(0)); // predefined modes
  // The bitstream, written from the last sequence to the first.
  const w = new BitWriter(ns * 6 + 8);
  for (let k = 0; k < ns; k++) {
    codeLL[k] = llCode(seqLL[k]!);
    codeML[k] = mlCode(seqML[k]!);
    codeOF[k] = highbit(seqOF[k]!);
  }
  const extras = (k: number) => {
    const lc = codeLL[k]!, mc = codeML[k]!, oc = codeOF[k]!;
    w.add(seqLL[k]! - LL_BASE[lc]!, LL_BITS[lc]!);
    w.add(seqML[k]! - ML_BASE[mc]!, ML_BITS[mc]!);
    w.add(seqOF[k]! - (1 << oc), oc);
  };
  const last = ns - 1;
  let sML = initState(ML_TABLE, codeML[last]!);
  let sOF = initState(OF_TABLE, codeOF[last]!);
  let sLL = initState(LL_TABLE, codeLL[last]!);
  extras(last);
  for (let k = ns - 2; k >= 0; k--) {
    sOF = encodeSymbol(w, OF_TABLE, sOF, codeOF[k]!);
    sML = encodeSymbol(w, ML_TABLE, sML, codeML[k]!);
    sLL = encodeSymbol(w, LL_TABLE, sLL, codeLL[k]!);
    extras(k);
  }
  w.add(sML & 63, 6);
  w.add(sOF & 31, 5);
  w.add(sLL & 63, 6);
  parts.push(w.close());
  const out = Buffer.concat(parts);
  return out.length < src.length ? out : undefined;
}
