// GZIP objects of many shapes, and a way to inflate one and collect what comes out: shared by the
// tests of the pooled gunzip stream (pooled-gunzip.test.ts) and of the whole-object inflate of
// direct reads (gzip-object.test.ts), which must both give what zlib.gunzipSync gives.
import { gzipSync } from 'node:zlib';
import type { ObjectInflate } from '../../../../src/lib/client/gzip-object.js';
import { PIECE_SIZE } from '../../../../src/lib/client/piece-pool.js';
import { bytes } from './helpers.js';

export interface Outcome {
  chunks: Buffer[];
  error?: Error;
}

/** A zlib stream, or the whole-object inflate of direct reads (the same events and end()). */
export type Inflating = NodeJS.ReadWriteStream | ObjectInflate;

/** Feeds `stored` in one go (as the direct reads do) and collects what comes out, in order. */
export function inflateAll(stream: Inflating, stored: Buffer): Promise<Outcome> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const s = stream as ObjectInflate;
    s.on('data', (c: Buffer) => chunks.push(c));
    s.on('error', (error: Error) => resolve({ chunks, error }));
    s.on('end', () => resolve({ chunks }));
    s.end(stored);
  });
}

/** Text-like content that compresses well, as journal content does. */
export function textLines(n: number, seed: number): Buffer {
  const out = Buffer.allocUnsafe(n);
  let at = 0;
  for (let i = 0; at < n; i++) at += out.write(`${String(i + seed).padStart(8, '0')} the quick brown fox jumps over the lazy dog ${(i * seed) % 97}\n`, at);
  return out;
}

/** Plain gzip objects: sizes around piece boundaries, stored blocks, several members. */
export function gzipShapes(): [string, Buffer][] {
  return [
    ['empty content', gzipSync(Buffer.alloc(0))],
    ['one byte', gzipSync(Buffer.from('x'))],
    ['a few bytes under a piece', gzipSync(bytes(PIECE_SIZE - 3, 1))],
    ['exactly one piece', gzipSync(bytes(PIECE_SIZE, 2))],
    ['exactly three pieces', gzipSync(textLines(3 * PIECE_SIZE, 3).subarray(0, 3 * PIECE_SIZE))],
    ['one byte over a piece', gzipSync(bytes(PIECE_SIZE + 1, 4))],
    ['7.5 MiB of lines, highly compressible', gzipSync(textLines(7.5 * PIECE_SIZE, 5))],
    ['incompressible bytes, stored blocks', gzipSync(Buffer.from(Array.from({ length: 300_000 }, (_, i) => (i * 2654435761) >>> 24)), { level: 0 })],
    ['two members', Buffer.concat([gzipSync(bytes(PIECE_SIZE + 300_000, 6)), gzipSync(bytes(200_000, 7))])],
    ['three members, one of them empty', Buffer.concat([gzipSync(textLines(900_000, 8)), gzipSync(Buffer.alloc(0)), gzipSync(textLines(2 * PIECE_SIZE + 5, 9))])],
    ['members that end exactly on piece boundaries', Buffer.concat([gzipSync(bytes(PIECE_SIZE, 10)), gzipSync(bytes(PIECE_SIZE, 11))])],
    ['many small members', Buffer.concat(Array.from({ length: 40 }, (_, i) => gzipSync(textLines(50_000 + i, i))))],
  ];
}

/** Corrupt versions of `good`, a two-member object (`a` then `b`) of a few pieces; `flip(at)` is `good` with the byte at `at` inverted. */
export function corruptGzip(): { a: Buffer; b: Buffer; good: Buffer; flip: (at: number) => Buffer; cases: [string, Buffer][] } {
  const a = gzipSync(textLines(2 * PIECE_SIZE + 12_345, 21));
  const b = gzipSync(textLines(PIECE_SIZE + 7, 22));
  const good = Buffer.concat([a, b]);
  const flip = (at: number) => {
    const c = Buffer.from(good);
    c[at] = c[at]! ^ 0xff;
    return c;
  };
  return {
    a,
    b,
    good,
    flip,
    cases: [
      ['not gzip at all', Buffer.from('not gzip at all')],
      ['truncated inside the first member', good.subarray(0, Math.floor(a.length / 2))],
      ['truncated inside the second member', good.subarray(0, a.length + Math.floor(b.length / 2))],
      ['a bad checksum at the end of the first member', flip(a.length - 6)],
      ['a bad length at the end of the second member', flip(good.length - 2)],
      ['a corrupt byte inside the deflate data', flip(Math.floor(a.length / 3))],
      ['garbage after the last member', Buffer.concat([good, Buffer.from('garbage!')])],
    ],
  };
}
