// Fragment helpers: SHA1 sums, codec extensions, content names and paths, store-listing parsing
// and the CoverSet index.
import { posix } from 'node:path';

import { ValidationError } from './errors.js';
import { CompressionCodec, type Fragment, type SHA1Sum } from './gen/broker/protocol.js';
import { validateFragment } from './validate/index.js';

/** Splits a 20-byte SHA1 digest into its three big-endian parts. */
export function sumFromDigest(buf: Uint8Array): SHA1Sum {
  if (buf.length !== 20) {
    throw new ValidationError(`SHA1 digest must be 20 bytes, got ${buf.length}`);
  }
  const v = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  return { part1: v.getBigUint64(0), part2: v.getBigUint64(8), part3: v.getUint32(16) };
}

/** The 20 digest bytes of a sum (all zero when absent). */
export function sumToDigest(sum: SHA1Sum | undefined): Uint8Array {
  const out = new Uint8Array(20);
  if (!sum) return out;
  const v = new DataView(out.buffer);
  v.setBigUint64(0, BigInt.asUintN(64, sum.part1));
  v.setBigUint64(8, BigInt.asUintN(64, sum.part2));
  v.setUint32(16, sum.part3 >>> 0);
  return out;
}

/** 40 lowercase hex digits: part1 ‖ part2 ‖ part3, big-endian. */
export function sumToHex(sum: SHA1Sum | undefined): string {
  return Buffer.from(sumToDigest(sum)).toString('hex');
}

/** Parses 40 hex digits into a sum. */
export function sumFromHex(hex: string): SHA1Sum {
  if (!/^[0-9a-fA-F]{40}$/.test(hex)) {
    throw new ValidationError(`SHA1 sum ${JSON.stringify(hex)} must be 40 hex digits`);
  }
  return sumFromDigest(Buffer.from(hex, 'hex'));
}

export function zeroSum(): SHA1Sum {
  return { part1: 0n, part2: 0n, part3: 0 };
}

export function isZeroSum(sum: SHA1Sum | undefined): boolean {
  return !sum || (sum.part1 === 0n && sum.part2 === 0n && sum.part3 === 0);
}

export function sumEquals(a: SHA1Sum | undefined, b: SHA1Sum | undefined): boolean {
  return sumToHex(a) === sumToHex(b);
}

const CODEC_EXTENSIONS: ReadonlyMap<CompressionCodec, string> = new Map([
  [CompressionCodec.NONE, '.raw'],
  [CompressionCodec.GZIP, '.gz'],
  [CompressionCodec.ZSTANDARD, '.zst'],
  [CompressionCodec.SNAPPY, '.sz'],
  [CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION, ''],
]);

const EXTENSION_CODECS: ReadonlyMap<string, CompressionCodec> = new Map([
  ['.raw', CompressionCodec.NONE],
  ['.gz', CompressionCodec.GZIP],
  ['.gzip', CompressionCodec.GZIP],
  ['.zst', CompressionCodec.ZSTANDARD],
  ['.zstandard', CompressionCodec.ZSTANDARD],
  ['.sz', CompressionCodec.SNAPPY],
  ['.snappy', CompressionCodec.SNAPPY],
  ['', CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION],
  ['.gzod', CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION],
]);

function codecName(codec: CompressionCodec): string {
  return CompressionCodec[codec] ?? String(codec);
}

/** File extension written for a codec (`.gz`; empty for GZIP_OFFLOAD_DECOMPRESSION). */
export function codecExtension(codec: CompressionCodec): string {
  const ext = CODEC_EXTENSIONS.get(codec);
  if (ext === undefined) throw new ValidationError(`compression codec ${codecName(codec)} has no file extension`);
  return ext;
}

/** Codec of a file extension (with its dot, case-insensitive; "" is GZIP_OFFLOAD_DECOMPRESSION). */
export function codecFromExtension(ext: string): CompressionCodec {
  const codec = EXTENSION_CODECS.get(ext.toLowerCase());
  if (codec === undefined) throw new ValidationError(`unknown compression extension ${JSON.stringify(ext)}`);
  return codec;
}

function hex16(v: bigint): string {
  return BigInt.asUintN(64, v).toString(16).padStart(16, '0');
}

/** `hex16(begin)-hex16(end)-hex40(sum)<ext>` */
export function fragmentContentName(f: Fragment): string {
  return `${hex16(f.begin)}-${hex16(f.end)}-${sumToHex(f.sum)}${codecExtension(f.compression_codec)}`;
}

/** `journal/path_postfix/name`, cleaned (an empty postfix disappears). */
export function fragmentContentPath(f: Fragment): string {
  return posix.join(f.journal, f.path_postfix, fragmentContentName(f));
}

/** Uncompressed length of the fragment, end - begin. */
export function fragmentLength(f: Fragment): bigint {
  return f.end - f.begin;
}

function parseHexOffset(s: string, what: string, rel: string): bigint {
  if (!/^[0-9a-fA-F]+$/.test(s)) {
    throw new ValidationError(`${what} ${JSON.stringify(s)} is not a hex offset`, `fragment path ${JSON.stringify(rel)}`);
  }
  const v = BigInt('0x' + s);
  if (v > (1n << 63n) - 1n) {
    throw new ValidationError(`${what} ${JSON.stringify(s)} overflows int64`, `fragment path ${JSON.stringify(rel)}`);
  }
  return v;
}

/**
 * Parses a store-listing path relative to `<journal>/` into a Fragment. mod_time
 * and backing_store are left zero for the caller to fill in.
 */
export function parseFragmentPath(journal: string, rel: string): Fragment {
  const at = `fragment path ${JSON.stringify(rel)}`;
  const dir = posix.dirname(rel);
  const postfix = dir === '.' ? '' : dir;
  const name = posix.basename(rel);
  const dot = name.lastIndexOf('.');
  const ext = dot === -1 ? '' : name.slice(dot);
  const stem = dot === -1 ? name : name.slice(0, dot);
  let codec: CompressionCodec;
  try {
    codec = codecFromExtension(ext);
  } catch {
    throw new ValidationError(`unknown compression extension ${JSON.stringify(ext)}`, at);
  }
  const parts = stem.split('-');
  if (parts.length !== 3) {
    throw new ValidationError(`name ${JSON.stringify(name)} must have the form <begin>-<end>-<sha1>`, at);
  }
  const begin = parseHexOffset(parts[0]!, 'begin', rel);
  const end = parseHexOffset(parts[1]!, 'end', rel);
  if (!/^[0-9a-fA-F]{40}$/.test(parts[2]!)) {
    throw new ValidationError(`sum ${JSON.stringify(parts[2])} must be 40 hex digits`, at);
  }
  const f: Fragment = {
    journal,
    begin,
    end,
    sum: sumFromHex(parts[2]!),
    compression_codec: codec,
    backing_store: '',
    mod_time: 0n,
    path_postfix: postfix,
  };
  try {
    validateFragment(f);
  } catch (e) {
    if (e instanceof ValidationError) throw new ValidationError(e.message, at);
    throw e;
  }
  return f;
}

/**
 * The set of fragments that cover a journal's offsets, as a broker's index keeps it:
 * ordered by begin with strictly increasing begins and ends; no member contains another.
 */
export class CoverSet {
  private items: Fragment[] = [];

  constructor(fragments: Iterable<Fragment> = []) {
    for (const f of fragments) this.add(f);
  }

  get size(): number {
    return this.items.length;
  }

  /** Adds `f`; returns false when it is empty or redundant (strictly contained by a member). */
  add(f: Fragment): boolean {
    if (f.begin === f.end) return false;
    const items = this.items;
    if (items.length === 0) {
      items.push(f);
      return true;
    }
    // Fast path against the last member only.
    const last = items[items.length - 1]!;
    if (last.end < f.end) {
      if (last.begin >= f.begin) items[items.length - 1] = f;
      else items.push(f);
      return true;
    }
    for (const m of items) {
      if ((m.begin <= f.begin && m.end > f.end) || (m.begin < f.begin && m.end >= f.end)) return false;
    }
    // Insert, dropping every member contained in f (an identical range included).
    const kept = items.filter((m) => !(f.begin <= m.begin && m.end <= f.end));
    let i = 0;
    while (i < kept.length && kept[i]!.begin < f.begin) i++;
    kept.splice(i, 0, f);
    this.items = kept;
    return true;
  }

  /** Members in ascending offset order. */
  members(): Fragment[] {
    return [...this.items];
  }

  [Symbol.iterator](): Iterator<Fragment> {
    return this.items[Symbol.iterator]();
  }

  /** Begin of the first member (0 when empty). */
  beginOffset(): bigint {
    return this.items[0]?.begin ?? 0n;
  }

  /** End of the last member (0 when empty). */
  endOffset(): bigint {
    return this.items[this.items.length - 1]?.end ?? 0n;
  }

  /**
   * Index of the member covering `offset` with the greatest end, or, when none covers it, the index
   * of the first member beginning after it (or `size`). `found` says whether it covers.
   */
  longestOverlappingIndex(offset: bigint): { index: number; found: boolean } {
    const items = this.items;
    let i = 0;
    while (i < items.length && items[i]!.end <= offset) i++;
    if (i === items.length) return { index: i, found: false };
    if (items[i]!.begin > offset) return { index: i, found: false };
    while (i + 1 < items.length && items[i + 1]!.begin <= offset) i++;
    return { index: i, found: true };
  }

  /** The member covering `offset` that reaches furthest, or undefined. */
  longestOverlapping(offset: bigint): Fragment | undefined {
    const r = this.longestOverlappingIndex(offset);
    return r.found ? this.items[r.index] : undefined;
  }
}
