// GZIP objects of many shapes, and a way to inflate one and collect what comes out: shared by the
// tests of the whole-object inflate of direct reads, by libdeflate (native-inflate.test.ts) and by
// zlib (gzip-object.test.ts), which must both give what zlib.gunzipSync gives.
import assert from 'node:assert/strict';
import { createGunzip, crc32 as zlibCrc32, gzipSync } from 'node:zlib';
import type { ObjectInflate } from '../../../../../src/lib/client/direct/gzip-object.js';
import { PIECE_SIZE, pieces } from '../../../../../src/lib/client/direct/piece-pool.js';
import { bytes } from '../helpers.js';

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

/** A gzip member of `content` with the given header fields (flags FEXTRA 4, FNAME 8, FCOMMENT 16, FHCRC 2). */
export function gzipMember(content: Buffer, f: { extra?: Buffer; name?: string; comment?: string; hcrc?: boolean }): Buffer {
  const plain = gzipSync(content);
  let flags = 0;
  const parts: Buffer[] = [];
  if (f.extra) {
    flags |= 4;
    const len = Buffer.alloc(2);
    len.writeUInt16LE(f.extra.length);
    parts.push(len, f.extra);
  }
  if (f.name !== undefined) {
    flags |= 8;
    parts.push(Buffer.from(`${f.name}\0`, 'latin1'));
  }
  if (f.comment !== undefined) {
    flags |= 16;
    parts.push(Buffer.from(`${f.comment}\0`, 'latin1'));
  }
  const head = Buffer.from(plain.subarray(0, 10));
  if (f.hcrc) flags |= 2;
  head[3] = flags;
  const header = Buffer.concat([head, ...parts]);
  const hcrc = Buffer.alloc(f.hcrc ? 2 : 0);
  if (f.hcrc) hcrc.writeUInt16LE(zlibCrc32(header) & 0xffff);
  return Buffer.concat([header, hcrc, plain.subarray(10)]);
}

/** Members with every kind of header field (a header CRC: left to zlib by the native inflate). */
export function headerShapes(): [string, Buffer][] {
  const member = gzipMember;
  return [
    ['a file name', member(textLines(400_000, 12), { name: '0000-0400.raw' })],
    ['a comment and a name', member(textLines(400_000, 13), { name: 'n', comment: 'a comment' })],
    ['an extra field', member(textLines(400_000, 14), { extra: Buffer.from('AB\x04\x00wxyz', 'latin1') })],
    ['an empty extra field, then a plain member', Buffer.concat([member(textLines(10_000, 15), { extra: Buffer.alloc(0) }), gzipSync(textLines(20_000, 16))])],
    ['a header CRC (left to zlib), after a plain member', Buffer.concat([gzipSync(textLines(30_000, 17)), member(textLines(400_000, 18), { hcrc: true, name: 'x' })])],
    ['zero padding after the last member', Buffer.concat([gzipSync(textLines(100_000, 19)), Buffer.alloc(1000)])],
    ['a zero byte, then anything', Buffer.concat([gzipSync(textLines(100_000, 20)), Buffer.from([0, 0x1f, 0x8b, 1, 2, 3])])],
  ];
}

/** The shared corrupt objects, and more cases around headers and trailers. */
export function corruptObjects(): [string, Buffer][] {
  const member = gzipMember;
  const { a, good, flip, cases } = corruptGzip();
  const badHcrc = member(textLines(1000, 23), { hcrc: true });
  badHcrc[10] = badHcrc[10]! ^ 1;
  return [
    ...cases,
    ['empty', Buffer.alloc(0)],
    ['truncated inside the first header', good.subarray(0, 6)],
    ['truncated right after the first deflate data', good.subarray(0, a.length - 8)],
    ['truncated inside the first trailer', good.subarray(0, a.length - 3)],
    ['truncated inside the second header', good.subarray(0, a.length + 5)],
    ['a corrupt second header', flip(a.length + 2)],
    ['reserved flags in the first header', flip(3)],
    ['a bad header CRC', badHcrc],
  ];
}

/**
 * Inflates the corrupt object `stored` with `inflate` and with a plain gunzip stream, and checks
 * that both fail with the same error (message, code, errno), each after content of the object only
 * (one output is a start of the other: how much comes out first depends on where zlib's calls were
 * cut). The pieces that came out are released.
 */
export async function assertFailsAsGunzip(inflate: Inflating, stored: Buffer): Promise<void> {
  const plain = await inflateAll(createGunzip({ chunkSize: PIECE_SIZE }), stored);
  assert.ok(plain.error, 'the case is corrupt');
  const got = await inflateAll(inflate, stored);
  const e = got.error as NodeJS.ErrnoException | undefined;
  const p = plain.error as NodeJS.ErrnoException;
  assert.equal(e?.message, p.message);
  assert.equal(e?.code, p.code);
  assert.equal(e?.errno, p.errno);
  const g = Buffer.concat(got.chunks);
  const q = Buffer.concat(plain.chunks);
  const short = g.length <= q.length ? g : q;
  const long = g.length <= q.length ? q : g;
  assert.ok(long.subarray(0, short.length).equals(short), `${g.length} bytes before the failure, a plain gunzip ${q.length}`);
  for (const c of got.chunks) pieces.release(c);
}
