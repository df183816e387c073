import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync, existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';

import { CompressionCodec } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import { fragmentContentPath, sumToHex } from '../../../../src/lib/protocol/fragment.js';
import {
  FileStore,
  StoreError,
  StoreHealthError,
  StoreNotFoundError,
  openFileURL,
  openStore,
  type FragmentListing,
} from '../../../../src/lib/stores/index.js';

const SUM = '0102030405060708090a0b0c0d0e0f1011121314';
const hex16 = (n: number) => n.toString(16).padStart(16, '0');
const fragName = (b: number, e: number, ext = '.raw') => `${hex16(b)}-${hex16(e)}-${SUM}${ext}`;

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

describe('file:// fragment store', () => {
  let root = '';
  before(() => {
    root = mkdtempSync(join(tmpdir(), 'gazctl-filestore-'));
    mkdirSync(join(root, 'st'), { recursive: true });
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  it('puts, gets, ranges, checks and removes objects under <root>/<dir>/', async () => {
    const s = new FileStore('file:///st/', { root });
    await s.put('a/b/x.bin', 'hello, store');
    assert.equal(readFileSync(join(root, 'st/a/b/x.bin'), 'utf8'), 'hello, store');
    assert.equal((await s.get('a/b/x.bin')).toString(), 'hello, store');
    assert.equal((await s.get('a/b/x.bin', { start: 7 })).toString(), 'store');
    assert.equal((await s.get('a/b/x.bin', { start: 2, end: 5 })).toString(), 'llo');
    assert.equal((await s.get('a/b/x.bin', { start: 4, end: 4 })).toString(), '');
    assert.equal(await s.exists('a/b/x.bin'), true);
    assert.equal(await s.exists('a/b/nope'), false);
    await s.remove('a/b/x.bin');
    assert.equal(await s.exists('a/b/x.bin'), false);
    await assert.rejects(s.remove('a/b/x.bin'), StoreNotFoundError);
    await assert.rejects(s.open('a/b/x.bin'), (e: Error) => e instanceof StoreNotFoundError && /^store file:\/\/\/st\/: open a\/b\/x\.bin: ENOENT/.test(e.message));
  });

  it('streams put content and leaves nothing behind when it fails', async () => {
    const s = new FileStore('file:///st/', { root });
    const parts = Array.from({ length: 50 }, (_, i) => Buffer.alloc(10_000, i));
    await s.put('big/obj', Readable.from(parts), { contentLength: 500_000 });
    const got = await s.get('big/obj');
    assert.equal(got.length, 500_000);
    assert.equal(got[499_999], 49);
    async function* gen() {
      yield Buffer.from('abc');
      yield Buffer.from('def');
    }
    await s.put('big/gen', gen());
    assert.equal((await s.get('big/gen')).toString(), 'abcdef');

    // Wrong length: an error, the old object stays, no partial file remains.
    await assert.rejects(s.put('big/gen', 'xyz', { contentLength: 4 }), /content has 3 bytes, expected 4/);
    async function* broken() {
      yield Buffer.from('partial');
      throw new Error('source broke');
    }
    await assert.rejects(s.put('big/gen', broken()), /source broke/);
    assert.equal((await s.get('big/gen')).toString(), 'abcdef');
    assert.deepEqual(readdirSync(join(root, 'st/big')).sort(), ['gen', 'obj']);
  });

  it('refuses to put into a store whose directory is missing, as an auth-like error', async () => {
    const s = new FileStore('file:///missing/', { root });
    const err = await s.put('j/x', 'y').then(
      () => assert.fail('put succeeded'),
      (e: unknown) => e as Error,
    );
    assert.ok(err instanceof StoreError);
    assert.match(err.message, /invalid file store directory/);
    assert.equal(s.isAuthError(err), true);
    assert.equal(s.isAuthError(new Error('other')), false);
    assert.equal(existsSync(join(root, 'missing')), false);
  });

  it('lists fragments with parsed names, path postfixes and unparseable objects reported', async () => {
    const s = new FileStore('file:///st/', { root });
    const j = 'logs/part-000';
    await s.put(`${j}/${fragName(0x10, 0x20)}`, 'x'.repeat(16));
    await s.put(`${j}/${fragName(0, 0x10, '.gz')}`, 'gz');
    await s.put(`${j}/date=2024-01-02/${fragName(0x20, 0x30, '.sz')}`, 'sz');
    await s.put(`${j}/${fragName(0x30, 0x40, '')}`, 'offload');
    await s.put(`${j}/README`, 'not a fragment');
    await s.put(`${j}/${hex16(1)}-${hex16(2)}-${SUM}.bogus`, 'bad ext');
    await s.put(`${j}/${hex16(5)}-${hex16(2)}-${SUM}.raw`, 'begin after end');
    const t = new Date('2024-05-06T07:08:09Z');
    utimesSync(join(root, 'st', j, fragName(0x10, 0x20)), t, t);

    const listed = await collect(s.listFragments(j));
    const frags = listed.filter((l): l is Extract<FragmentListing, { kind: 'fragment' }> => l.kind === 'fragment');
    const bad = listed.filter((l): l is Extract<FragmentListing, { kind: 'unparseable' }> => l.kind === 'unparseable');

    assert.deepEqual(
      frags.map((f) => [f.path, f.fragment.begin, f.fragment.end, f.fragment.compression_codec, f.fragment.path_postfix]),
      [
        [fragName(0, 0x10, '.gz'), 0n, 0x10n, CompressionCodec.GZIP, ''],
        [fragName(0x10, 0x20), 0x10n, 0x20n, CompressionCodec.NONE, ''],
        [fragName(0x30, 0x40, ''), 0x30n, 0x40n, CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION, ''],
        [`date=2024-01-02/${fragName(0x20, 0x30, '.sz')}`, 0x20n, 0x30n, CompressionCodec.SNAPPY, 'date=2024-01-02'],
      ],
    );
    const raw = frags[1]!;
    assert.equal(raw.fragment.journal, j);
    assert.equal(raw.fragment.backing_store, 'file:///st/');
    assert.equal(raw.fragment.mod_time, BigInt(t.getTime() / 1000));
    assert.equal(raw.size, 16);
    assert.equal(sumToHex(raw.fragment.sum), SUM);
    // The content path of a listed fragment is where it was found.
    assert.equal(fragmentContentPath(frags[3]!.fragment), `${j}/date=2024-01-02/${fragName(0x20, 0x30, '.sz')}`);

    assert.deepEqual(
      bad.map((b) => b.path),
      [`${hex16(1)}-${hex16(2)}-${SUM}.bogus`, `${hex16(5)}-${hex16(2)}-${SUM}.raw`, 'README'],
    );
    assert.match(bad[0]!.reason, /unknown compression extension "\.bogus"/);
    assert.match(bad[2]!.reason, /README/);
    for (const b of bad) assert.ok(b.reason.length > 0 && b.size > 0);
  });

  it('lists a missing prefix as empty, and a nested journal as a postfix (as upstream)', async () => {
    const s = new FileStore('file:///st/', { root });
    assert.deepEqual(await collect(s.listFragments('no/such/journal')), []);
    await s.put(`nest/a/b/${fragName(0, 1)}`, 'z');
    const l = await collect(s.listFragments('nest/a'));
    assert.equal(l.length, 1);
    assert.equal(l[0]!.kind === 'fragment' && l[0]!.fragment.path_postfix, 'b');
  });

  it('lists objects depth first in name order', async () => {
    const s = new FileStore('file:///st/', { root });
    for (const p of ['o/b', 'o/a/2', 'o/a/1', 'o/c/x', 'o/B']) await s.put(p, p);
    assert.deepEqual(
      (await collect(s.list('o/'))).map((o) => o.path),
      ['B', 'a/1', 'a/2', 'b', 'c/x'],
    );
  });

  it('rewrites paths with find/replace (names case-insensitive) and signs file:// URLs', async () => {
    mkdirSync(join(root, 'rw'), { recursive: true });
    const s = new FileStore('file:///rw/?Find=/v1/&replace=/old/', { root });
    await s.put('app/v1/logs/x', 'rewritten');
    assert.equal(readFileSync(join(root, 'rw/app/old/logs/x'), 'utf8'), 'rewritten');
    assert.equal(await s.signGet('app/v1/logs/x', 60_000), 'file:///rw/app/old/logs/x');
    assert.deepEqual((await collect(s.list('app/v1/'))).map((o) => o.path), ['logs/x']);
    // A signed URL reads back through the root.
    const r = await openFileURL(root, await s.signGet('app/v1/logs/x', 60_000), { start: 4 });
    assert.equal(Buffer.concat(await collect(r as AsyncIterable<Buffer>)).toString(), 'itten');
    // Only the first occurrence is replaced; `$` in the replacement is literal.
    const d = new FileStore('file:///rw/?find=a&replace=%24%26', { root });
    assert.equal(await d.signGet('banana', 1), 'file:///rw/b$&nana');
  });

  it('refuses paths that leave the root', async () => {
    const s = new FileStore('file:///st/', { root });
    await assert.rejects(s.get('../../etc/passwd'), /leaves the root directory/);
    // URL parsing resolves plain `..` segments; encoded slashes survive it.
    await assert.rejects(openFileURL(root, 'file:///a/..%2F..%2Foutside'), /leaves the root directory/);
  });

  it('validates store URLs like a JournalSpec does', () => {
    const bad: [string, RegExp][] = [
      ['file://host/dir/', /must not have a host/],
      ['file:///dir', /must end in "\/"/],
      ['file:///dir/?region=x', /unknown query argument "region"/],
      ['dir/', /not an absolute URL/],
    ];
    for (const [url, re] of bad) assert.throws(() => new FileStore(url, { root }), (e: Error) => e instanceof StoreError && re.test(e.message));
    assert.throws(() => new FileStore('file:///x/', { root: '' }), /no local root directory/);
    assert.throws(() => openStore('gs://bucket/p/'), /scheme gs:\/\/ has no backend here yet/);
    assert.throws(() => openStore('file:///x/'), /no local root directory/);
    assert.ok(openStore('file:///x/', { fileRoot: root }) instanceof FileStore);
  });

  it('passes its health check, and fails it with the step named', async () => {
    const s = new FileStore('file:///st/', { root });
    await s.health();
    assert.equal(readFileSync(join(root, 'st/.test/health-check'), 'utf8'), 'health-check\n');
    const missing = new FileStore('file:///gone/', { root });
    await assert.rejects(missing.health(), (e: Error) => e instanceof StoreHealthError && /health check PUT failed: .*invalid file store directory/.test(e.message));
  });

  it('honours an abort signal while reading', async () => {
    const s = new FileStore('file:///st/', { root });
    writeFileSync(join(root, 'st/abort.bin'), Buffer.alloc(4 << 20));
    const ac = new AbortController();
    const r = await s.open('abort.bin', { signal: ac.signal });
    ac.abort();
    await assert.rejects(collect(r as AsyncIterable<Buffer>));
    await assert.rejects(s.open('abort.bin', { signal: ac.signal }));
  });
});
