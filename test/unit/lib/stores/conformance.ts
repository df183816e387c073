// One table of FragmentStore cases that every backend must pass. The file backend runs it in
// test/unit/lib/stores/file-conformance.test.ts, the s3 backend against the test S3 server in
// test/integration/s3-store.test.ts. A backend supplies a StoreFixture: a way to open a store
// on a fresh prefix (with optional extra query arguments) and to look at the raw objects.
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { it } from 'node:test';

import { CompressionCodec } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import { sumToHex } from '../../../../src/lib/protocol/fragment.js';
import { StoreError, StoreHealthError, StoreNotFoundError, type FragmentListing, type FragmentStore } from '../../../../src/lib/stores/index.js';

export interface StoreFixture {
  /**
   * A store on a fresh, empty prefix `<name>/`. `query` (without `?`) is appended to the URL's
   * query arguments.
   */
  open(name: string, query?: string): Promise<FragmentStore>;
  /** The raw bytes at `key`, relative to the store root of `open` (i.e. `<name>/…`), if any. */
  raw(key: string): Promise<Buffer | undefined>;
  /** The content a URL from `signGet` reads. */
  readSigned(url: string): Promise<Buffer>;
}

export const SUM = '0102030405060708090a0b0c0d0e0f1011121314';
const hex16 = (n: number) => n.toString(16).padStart(16, '0');
export const fragName = (b: number, e: number, ext = '.raw') => `${hex16(b)}-${hex16(e)}-${SUM}${ext}`;

export async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

const byPath = <T extends { path: string }>(a: T, b: T) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0);

/** Register the conformance cases (as `it` tests) for a backend. */
export function storeConformance(fx: () => StoreFixture): void {
  it('puts bytes, strings and streams, and reads them back whole and by range', async () => {
    const s = await fx().open('roundtrip');
    const data = Buffer.from('0123456789abcdefghij');
    await s.put('j/bytes.bin', data);
    await s.put('j/string.txt', 'hello, store');
    await s.put('j/stream-known.bin', Readable.from([data.subarray(0, 7), data.subarray(7)]), { contentLength: data.length });
    await s.put('j/stream-unknown.bin', Readable.from([data.subarray(0, 3), data.subarray(3)]));
    const big = Buffer.alloc(3 << 20, 7);
    await s.put('j/big.bin', (async function* () {
      for (let i = 0; i < 3; i++) yield big.subarray(i << 20, (i + 1) << 20);
    })());

    assert.deepEqual(await s.get('j/bytes.bin'), data);
    assert.equal((await s.get('j/string.txt')).toString(), 'hello, store');
    assert.deepEqual(await s.get('j/stream-known.bin'), data);
    assert.deepEqual(await s.get('j/stream-unknown.bin'), data);
    assert.ok((await s.get('j/big.bin')).equals(big));

    assert.equal((await s.get('j/bytes.bin', { start: 5, end: 9 })).toString(), '5678');
    assert.equal((await s.get('j/bytes.bin', { start: 15 })).toString(), 'fghij');
    assert.equal((await s.get('j/bytes.bin', { end: 3 })).toString(), '012');
    assert.equal((await s.get('j/bytes.bin', { start: 4, end: 4 })).length, 0);
    assert.equal((await s.get('j/bytes.bin', { start: 20 })).length, 0, 'a range at the end reads nothing');
    assert.equal((await s.get('j/bytes.bin', { start: 18, end: 100 })).toString(), 'ij', 'a range past the end is cut');
    const stream = await s.open('j/bytes.bin', { start: 10 });
    const parts: Buffer[] = [];
    for await (const c of stream) parts.push(c as Buffer);
    assert.equal(Buffer.concat(parts).toString(), 'abcdefghij');

    // Replacing an object replaces it whole.
    await s.put('j/bytes.bin', 'short');
    assert.equal((await s.get('j/bytes.bin')).toString(), 'short');
    assert.equal((await fx().raw('roundtrip/j/bytes.bin'))?.toString(), 'short', 'the object sits at <prefix><path>');
  });

  it('honours an abort signal while reading', async () => {
    const s = await fx().open('abort');
    await s.put('j/big.bin', Buffer.alloc(8 << 20, 1));
    const ac = new AbortController();
    const stream = await s.open('j/big.bin', { signal: ac.signal });
    let n = 0;
    await assert.rejects(
      (async () => {
        for await (const c of stream) {
          n += (c as Buffer).length;
          ac.abort(new Error('stop reading'));
        }
      })(),
    );
    assert.ok(n > 0 && n < 8 << 20, `read ${n} bytes before the abort took`);
    const pre = new AbortController();
    pre.abort(new Error('already'));
    await assert.rejects(s.open('j/big.bin', { signal: pre.signal }));
  });

  it('reports missing objects as StoreNotFoundError', async () => {
    const s = await fx().open('missing');
    assert.equal(await s.exists('j/none'), false);
    await s.put('j/one', 'x');
    assert.equal(await s.exists('j/one'), true);
    await assert.rejects(s.get('j/none'), StoreNotFoundError);
    await assert.rejects(s.open('j/none', { start: 2, end: 2 }), StoreNotFoundError);
    await assert.rejects(s.remove('j/none'), StoreNotFoundError);
  });

  it('fails a put whose stream differs from its declared length, leaving no object', async () => {
    const s = await fx().open('badlen');
    await assert.rejects(
      s.put('j/short.bin', Readable.from([Buffer.from('abc')]), { contentLength: 10 }),
      (e: Error) => e instanceof StoreError && /put j\/short\.bin/.test(e.message) && !e.message.includes('\n'),
    );
    await assert.rejects(
      s.put('j/long.bin', Readable.from([Buffer.from('abcdefghijkl')]), { contentLength: 4 }),
      (e: Error) => e instanceof StoreError && /put j\/long\.bin/.test(e.message),
    );
    assert.equal(await s.exists('j/short.bin'), false);
    assert.equal(await s.exists('j/long.bin'), false);
    assert.deepEqual(await collect(s.list('j/')), []);
  });

  it('fails a put whose content fails partway with that failure, promptly, leaving no object', async () => {
    const s = await fx().open('srcfail');
    const failing = () =>
      (async function* () {
        yield Buffer.from('abc');
        await new Promise((r) => setTimeout(r, 5));
        throw new Error('the source broke');
      })();
    for (const [name, opts] of [
      ['known.bin', { contentLength: 10 }],
      ['unknown.bin', {}],
    ] as const) {
      let timer: NodeJS.Timeout | undefined;
      const outcome = await Promise.race([
        s.put(`j/${name}`, failing(), opts).then(
          () => 'stored',
          (e: Error) => e.message,
        ),
        new Promise<string>((r) => (timer = setTimeout(() => r('still waiting after 10 s'), 10_000))),
      ]);
      clearTimeout(timer);
      assert.match(outcome, /the source broke/, name);
      assert.equal(await s.exists(`j/${name}`), false, name);
    }
  });

  it('lists a journal: fragments under any path postfix, unparseable objects reported', async () => {
    const s = await fx().open('listing');
    const j = 'a/journal';
    const want = [
      { path: fragName(0, 0x10), postfix: '', codec: CompressionCodec.NONE, begin: 0n, end: 0x10n },
      { path: `pp=1/${fragName(0x10, 0x20, '.gz')}`, postfix: 'pp=1', codec: CompressionCodec.GZIP, begin: 0x10n, end: 0x20n },
      { path: `pp=1/date=2024-01-02/${fragName(0x20, 0x30, '.zst')}`, postfix: 'pp=1/date=2024-01-02', codec: CompressionCodec.ZSTANDARD, begin: 0x20n, end: 0x30n },
      { path: `x/${fragName(0x30, 0x40, '.sz')}`, postfix: 'x', codec: CompressionCodec.SNAPPY, begin: 0x30n, end: 0x40n },
      { path: fragName(0x40, 0x50, ''), postfix: '', codec: CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION, begin: 0x40n, end: 0x50n },
    ];
    for (const [i, w] of want.entries()) await s.put(`${j}/${w.path}`, 'x'.repeat(i + 1));
    await s.put(`${j}/notes.txt`, 'not a fragment');
    await s.put(`${j}/pp=1/${hex16(1)}-${hex16(2)}-abc.raw`, 'short sum');
    // More objects an operator leaves beside fragments: a README, a copy in a subdirectory, a
    // fragment name with a suffix, a name whose begin is past its end.
    await s.put(`${j}/README`, 'readme');
    await s.put(`${j}/ops/copy-of-notes`, 'copy');
    await s.put(`${j}/${fragName(0, 0x10)}.orig`, 'orig');
    await s.put(`${j}/${hex16(2)}-${hex16(1)}-${SUM}.raw`, 'backwards');
    // Neighbours that are not under `<journal>/`.
    await s.put(`a/journal-other/${fragName(0, 1)}`, 'other');
    await s.put(`a/journals/${fragName(0, 1)}`, 'other');
    await s.put(`a/other/${fragName(0, 1)}`, 'other');

    const got = (await collect(s.listFragments(j))).sort(byPath);
    const frags = got.filter((g): g is Extract<FragmentListing, { kind: 'fragment' }> => g.kind === 'fragment');
    const bad = got.filter((g): g is Extract<FragmentListing, { kind: 'unparseable' }> => g.kind === 'unparseable');
    assert.deepEqual(
      frags.map((f) => f.path),
      want.map((w) => w.path).sort(),
    );
    for (const f of frags) {
      const w = want.find((x) => x.path === f.path)!;
      assert.equal(f.fragment.journal, j);
      assert.equal(f.fragment.begin, w.begin);
      assert.equal(f.fragment.end, w.end);
      assert.equal(f.fragment.path_postfix, w.postfix);
      assert.equal(f.fragment.compression_codec, w.codec);
      assert.equal(sumToHex(f.fragment.sum!), SUM);
      assert.equal(f.fragment.backing_store, s.url);
      assert.ok(f.fragment.mod_time > 0n);
      assert.equal(f.size, want.indexOf(w) + 1);
    }
    assert.deepEqual(
      bad.map((b) => [b.path, b.size]),
      [
        [`${fragName(0, 0x10)}.orig`, 4],
        [`${hex16(2)}-${hex16(1)}-${SUM}.raw`, 9],
        ['README', 6],
        ['notes.txt', 14],
        ['ops/copy-of-notes', 4],
        [`pp=1/${hex16(1)}-${hex16(2)}-abc.raw`, 9],
      ],
    );
    for (const b of bad) {
      assert.ok(b.reason.length > 0 && !b.reason.includes('\n'), b.reason);
      assert.ok(b.modTime.getTime() > 0);
    }
    // A plain listing is relative to its prefix and recursive.
    const listed = (await collect(s.list('a/'))).map((o) => o.path).sort();
    assert.equal(listed.length, want.length + 6 + 3);
    assert.ok(listed.includes(`journal/${want[2]!.path}`));
    assert.ok(listed.includes(`other/${fragName(0, 1)}`));
    assert.deepEqual(await collect(s.listFragments('no/such/journal')), []);
  });

  it('removes objects', async () => {
    const s = await fx().open('remove');
    await s.put('j/a', 'a');
    await s.put('j/b', 'b');
    await s.remove('j/a');
    assert.equal(await s.exists('j/a'), false);
    assert.deepEqual((await collect(s.list('j/'))).map((o) => o.path), ['b']);
    assert.equal(await fx().raw('remove/j/a'), undefined);
  });

  it('signs a GET URL that reads the object', async () => {
    const s = await fx().open('sign');
    const name = `j/pp=1/${fragName(0, 5)}`;
    await s.put(name, 'signed content');
    const url = await s.signGet(name, 60_000);
    assert.equal((await fx().readSigned(url)).toString(), 'signed content');
  });

  it('rewrites paths with find/replace', async () => {
    const s = await fx().open('rewrite', 'find=old%2F&replace=new%2F');
    await s.put('old/j/x.raw', 'moved');
    assert.equal((await fx().raw('rewrite/new/j/x.raw'))?.toString(), 'moved');
    assert.equal(await fx().raw('rewrite/old/j/x.raw'), undefined);
    assert.equal((await s.get('old/j/x.raw')).toString(), 'moved');
    assert.deepEqual((await collect(s.list('old/j/'))).map((o) => o.path), ['x.raw']);
    assert.equal((await fx().readSigned(await s.signGet('old/j/x.raw', 60_000))).toString(), 'moved');
    // Only the first occurrence is replaced.
    await s.put('old/old/y', 'y');
    assert.equal((await fx().raw('rewrite/new/old/y'))?.toString(), 'y');
    await s.remove('old/j/x.raw');
    assert.equal(await fx().raw('rewrite/new/j/x.raw'), undefined);
  });

  it('passes its health check, with and without the delete check', async () => {
    const s = await fx().open('health');
    await s.health();
    assert.equal((await s.get('.test/health-check')).toString(), 'health-check\n');
    await s.put('j/keep', 'k');
    await s.health({ deleteUnder: 'j/' });
    assert.deepEqual((await collect(s.list('j/'))).map((o) => o.path), ['keep'], 'the delete probe is gone');
    assert.ok(!s.isAuthError(new StoreHealthError('x')));
  });
}
