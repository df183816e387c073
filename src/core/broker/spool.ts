// A minimal spool, private to the broker until the shared fragment layer lands: the journal's
// current fragment, its committed content in memory, and the uncommitted bytes of the append in
// progress (the "delta"), with the running SHA-1 of the committed content.
//
// Commit and roll-back follow the replication protocol: a proposal equal to the current fragment
// drops the delta; one equal to the fragment extended by the delta commits it; an empty proposal
// at or beyond the current end rolls to a new, empty fragment there.

import { createHash, type Hash } from 'node:crypto';
import { CompressionCodec, type Fragment, type LabelSet } from '../../lib/protocol/gen/broker/protocol.js';
import { sumEquals, sumFromDigest, zeroSum } from '../../lib/protocol/fragment.js';

export function emptyFragment(journal: string, at: bigint, codec: CompressionCodec, store: string, postfix = ''): Fragment {
  return { journal, begin: at, end: at, sum: zeroSum(), compression_codec: codec, backing_store: store, mod_time: 0n, path_postfix: postfix };
}

export function fragmentEquals(a: Fragment | undefined, b: Fragment | undefined): boolean {
  if (!a || !b) return a === b;
  return (
    a.journal === b.journal &&
    a.begin === b.begin &&
    a.end === b.end &&
    sumEquals(a.sum ?? zeroSum(), b.sum ?? zeroSum()) &&
    a.compression_codec === b.compression_codec &&
    a.backing_store === b.backing_store &&
    a.mod_time === b.mod_time &&
    a.path_postfix === b.path_postfix
  );
}

export class Spool {
  fragment: Fragment;
  registers: LabelSet = { labels: [] };
  private hash: Hash = createHash('sha1');
  private chunks: Buffer[] = [];
  private delta: Buffer[] = [];
  private deltaLen = 0;

  constructor(fragment: Fragment) {
    this.fragment = fragment;
  }

  get contentLength(): bigint {
    return this.fragment.end - this.fragment.begin;
  }

  get pending(): number {
    return this.deltaLen;
  }

  /** Stage bytes of the append in progress. */
  stage(b: Buffer): void {
    if (b.length === 0) return;
    this.delta.push(b);
    this.deltaLen += b.length;
  }

  /** The fragment the delta would commit to, with its SHA-1. */
  nextFragment(): Fragment {
    const h = this.hash.copy();
    for (const d of this.delta) h.update(d);
    return { ...this.fragment, end: this.fragment.end + BigInt(this.deltaLen), sum: sumFromDigest(h.digest()) };
  }

  commit(): Fragment {
    for (const d of this.delta) {
      this.hash.update(d);
      this.chunks.push(d);
    }
    this.fragment = { ...this.fragment, end: this.fragment.end + BigInt(this.deltaLen), sum: sumFromDigest(this.hash.copy().digest()) };
    this.delta = [];
    this.deltaLen = 0;
    return this.fragment;
  }

  rollback(): void {
    this.delta = [];
    this.deltaLen = 0;
  }

  /** The committed content, whole (for persisting a closed fragment). */
  content(): Buffer {
    if (this.chunks.length > 1) this.chunks = [Buffer.concat(this.chunks)];
    return this.chunks[0] ?? Buffer.alloc(0);
  }

  /** Up to `max` committed bytes from journal offset `offset` (within this fragment). */
  read(offset: bigint, max: number): Buffer {
    const start = Number(offset - this.fragment.begin);
    const all = this.content();
    return all.subarray(start, Math.min(all.length, start + max));
  }

  /** Whether `p` is this fragment as committed (a roll-back) or extended by the delta (a commit). */
  matches(p: Fragment): 'current' | 'next' | undefined {
    if (fragmentEquals(p, this.fragment)) return 'current';
    if (this.deltaLen > 0 && fragmentEquals(p, this.nextFragment())) return 'next';
    return undefined;
  }
}

export const SPOOL_NONE = CompressionCodec.NONE;
