// The fragment index: local and remote fragments, queries (blocking, gaps, mod-time skips),
// listings for ListFragments, and refreshes from a file:// store.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';

import {
  coverSetDifference,
  FragmentIndex,
  runIndexRefresh,
  StrayObjects,
  walkAllStores,
  walkAllStoresTracked,
} from '../../../../src/core/fragment/fragment-index.js';
import { Persister } from '../../../../src/core/fragment/persister.js';
import { readLocal, Spool } from '../../../../src/core/fragment/spool.js';
import { CoverSet, zeroSum } from '../../../../src/lib/protocol/fragment.js';
import { CompressionCodec, Status, type Fragment, type JournalSpec } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import { FileStore } from '../../../../src/lib/stores/index.js';

const J = 'a/journal';
const NOW = new Date(Date.UTC(2024, 5, 1, 12));
const nowSec = BigInt(NOW.getTime() / 1000);

function remote(begin: bigint, end: bigint, modTime = nowSec - 60n, store = 'file:///s/'): Fragment {
  return { journal: J, begin, end, sum: zeroSum(), compression_codec: CompressionCodec.NONE, backing_store: store, mod_time: modTime, path_postfix: '' };
}

function spoolWith(begin: bigint, content: string): Spool {
  const s = new Spool(J);
  s.applyProposal({ ...s.fragment, begin, end: begin }, { labels: [] });
  s.apply(Buffer.from(content));
  s.applyProposal(s.next(), { labels: [] });
  return s;
}

describe('coverSetDifference', () => {
  it('keeps what no member or run of members covers', () => {
    const b = new CoverSet([remote(0n, 10n), remote(10n, 20n), remote(25n, 30n)]);
    const got = coverSetDifference([remote(0n, 5n, 0n), remote(5n, 18n, 0n), remote(15n, 26n, 0n), remote(26n, 30n, 0n)], b);
    assert.deepEqual(got.map((f) => [f.begin, f.end]), [[15n, 26n]]);
  });
});

describe('FragmentIndex', () => {
  it('serves local spool content and reports the write head', async () => {
    const ix = new FragmentIndex(J, { now: () => NOW });
    const s = spoolWith(0n, 'hello');
    ix.spoolCommit(s.local());
    s.apply(Buffer.from(' world'));
    s.applyProposal(s.next(), { labels: [] });
    ix.spoolCommit(s.local());
    assert.equal(ix.fragments().length, 1, 'the longer commit replaces the shorter');
    assert.equal(ix.endOffset(), 11n);
    const r = await ix.query({ offset: 6n });
    assert.equal(r.status, Status.OK);
    if (r.status !== Status.OK) return;
    assert.ok(r.local);
    assert.equal(readLocal(r.local, r.offset, 100).toString(), 'world');
    const head = await ix.query({ offset: -1n });
    assert.equal(head.status, Status.OFFSET_NOT_YET_AVAILABLE);
    assert.equal(head.offset, 11n);
    assert.equal(head.writeHead, 11n);
  });

  it('blocks until an offset is committed, and honours abort', async () => {
    const ix = new FragmentIndex(J, { now: () => NOW });
    const pending = ix.query({ offset: 0n, block: true });
    const waited = ix.waitFor(3n);
    const s = spoolWith(0n, 'abcd');
    ix.spoolCommit(s.local());
    const r = await pending;
    assert.equal(r.status, Status.OK);
    await waited;
    const ac = new AbortController();
    const blocked = ix.query({ offset: 100n, block: true, signal: ac.signal });
    ac.abort(new Error('client went away'));
    await assert.rejects(blocked, /client went away/);
  });

  it('drops local fragments once a listing covers them, keeping the rest', () => {
    const ix = new FragmentIndex(J, { now: () => NOW });
    const a = spoolWith(0n, 'persisted');
    const b = spoolWith(9n, 'still local');
    ix.spoolCommit(a.local());
    ix.spoolCommit(b.local());
    ix.replaceRemote([remote(0n, 9n)]);
    const m = ix.fragments();
    assert.deepEqual(m.map((f) => [f.begin, f.end, f.backing_store]), [[0n, 9n, 'file:///s/'], [9n, 20n, '']]);
    assert.ok(ix.localOf(m[1]!));
    assert.equal(ix.localOf(m[0]!), undefined);
  });

  it('addRemote replaces the local fragment a flush persisted at once', async () => {
    const ix = new FragmentIndex(J, { now: () => NOW });
    const s = spoolWith(0n, 'flushed');
    ix.spoolCommit(s.local());
    ix.addRemote(remote(0n, 7n));
    const m = ix.fragments();
    assert.equal(m.length, 1);
    assert.equal(m[0]!.backing_store, 'file:///s/');
    const r = await ix.query({ offset: 0n });
    assert.equal(r.status === Status.OK && r.local, undefined);
    // A later listing without it does not bring the local fragment back.
    ix.replaceRemote([]);
    assert.equal(ix.fragments().length, 0);
  });

  it('resolves firstRefresh on the first listing', async () => {
    const ix = new FragmentIndex(J);
    assert.equal(ix.hasRefreshed, false);
    ix.replaceRemote([]);
    await ix.firstRefresh;
    assert.equal(ix.hasRefreshed, true);
  });

  it('skips a gap before the first remote fragment, or before an old one, but not a recent one', async () => {
    const ix = new FragmentIndex(J, { now: () => NOW });
    ix.replaceRemote([remote(100n, 200n), remote(300n, 400n, nowSec - 3600n), remote(500n, 600n, nowSec - 7n * 3600n)]);
    const first = await ix.query({ offset: 0n });
    assert.equal(first.status, Status.OK);
    assert.equal(first.offset, 100n);
    const recent = await ix.query({ offset: 250n });
    assert.equal(recent.status, Status.OFFSET_NOT_YET_AVAILABLE);
    const old = await ix.query({ offset: 450n });
    assert.equal(old.status, Status.OK);
    assert.equal(old.offset, 500n);
  });

  it('skips fragments persisted before beginModTime', async () => {
    const ix = new FragmentIndex(J, { now: () => NOW });
    ix.replaceRemote([remote(0n, 10n, 1000n), remote(10n, 20n, 2000n)]);
    const r = await ix.query({ offset: 0n, beginModTime: 1500n });
    assert.equal(r.status, Status.OK);
    assert.equal(r.offset, 10n);
    assert.equal(r.fragment.begin, 10n);
  });

  it('lists pages within mod-time bounds', async () => {
    const ix = new FragmentIndex(J, { now: () => NOW });
    ix.replaceRemote([remote(0n, 10n, 100n), remote(10n, 20n, 200n), remote(20n, 30n, 300n)]);
    ix.spoolCommit(spoolWith(30n, 'local').local());
    const p1 = await ix.list({ pageLimit: 2 });
    assert.deepEqual(p1.fragments.map((f) => f.spec.begin), [0n, 10n]);
    assert.equal(p1.nextPageToken, 20n);
    const p2 = await ix.list({ pageLimit: 2, pageToken: p1.nextPageToken });
    assert.deepEqual(p2.fragments.map((f) => f.spec.begin), [20n, 30n]);
    assert.equal(p2.nextPageToken, 0n);
    const bounded = await ix.list({ beginModTime: 150n, endModTime: 300n });
    assert.deepEqual(bounded.fragments.map((f) => f.spec.begin), [10n, 20n], 'end bound inclusive; local fails an end bound');
    const from = await ix.list({ beginModTime: 250n });
    assert.deepEqual(from.fragments.map((f) => f.spec.begin), [20n, 30n], 'local fragments pass a begin bound');
  });
});

describe('refresh from stores', () => {
  const root = mkdtempSync(join(tmpdir(), 'index-test-'));
  mkdirSync(join(root, 'one'));
  mkdirSync(join(root, 'two'));
  after(() => rmSync(root, { recursive: true, force: true }));
  const open = (url: string) => new FileStore(url, { root });

  function spec(stores: string[]): JournalSpec {
    return {
      name: J,
      replication: 1,
      labels: { labels: [] },
      fragment: { length: 1024n, compression_codec: CompressionCodec.GZIP, stores, refresh_interval: undefined, retention: undefined, flush_interval: undefined, path_postfix_template: 'p={{ .Spool.Begin }}' },
      flags: 0,
      max_append_rate: 0n,
      suspend: undefined,
    };
  }

  it('lists fragments persisted by another writer, across stores, and skips unparseable objects', async () => {
    const p = new Persister({ openStore: open });
    await p.persist(spoolWith(0n, 'first store').roll()!, spec(['file:///one/']));
    await p.persist(spoolWith(11n, 'second store').roll()!, spec(['file:///two/']));
    await open('file:///one/').put(`${J}/not-a-fragment.txt`, 'x');
    const odd: string[] = [];
    const set = await walkAllStores(J, ['file:///one/', 'file:///two/'], open, { onUnparseable: (_s, path) => odd.push(path) });
    assert.deepEqual(set.members().map((f) => [f.begin, f.end, f.backing_store, f.path_postfix]), [
      [0n, 11n, 'file:///one/', 'p=0'],
      [11n, 23n, 'file:///two/', 'p=11'],
    ]);
    assert.deepEqual(odd, ['not-a-fragment.txt']);
  });

  it('reports each stray object once per appearance, across listings', async () => {
    const one = open('file:///one/');
    await one.put(`${J}/README`, 'x');
    await one.put(`${J}/sub/notes.txt`, 'x');
    const seen: string[] = [];
    const strays = new StrayObjects((o) => seen.push(`${o.store} ${o.path}`));
    const walk = () => walkAllStoresTracked(J, ['file:///one/', 'file:///two/'], open, strays);
    const first = await walk();
    assert.equal(first.members().length, 2, 'the fragments are served');
    // (not-a-fragment.txt is left by the test before.)
    assert.deepEqual(seen.sort(), ['file:///one/ README', 'file:///one/ not-a-fragment.txt', 'file:///one/ sub/notes.txt']);
    await walk();
    await walk();
    assert.equal(seen.length, 3, 'a later listing does not report them again');
    await one.remove(`${J}/README`);
    await walk();
    await one.put(`${J}/README`, 'back');
    await walk();
    assert.deepEqual(seen.slice(3), ['file:///one/ README'], 'an object that went away and came back is reported again');
    // A listing that fails reports nothing and forgets nothing.
    await assert.rejects(walkAllStoresTracked(J, ['file:///one/', 'bogus://x/'], (u) => (u.startsWith('bogus') ? { listFragments: () => { throw new Error('down'); } } as unknown as FileStore : open(u)), strays));
    await walk();
    assert.equal(seen.length, 4);
    await one.remove(`${J}/README`);
    await one.remove(`${J}/sub/notes.txt`);
  });

  it('runIndexRefresh with strays reports each stray object once over several refreshes', async () => {
    const one = open('file:///one/');
    await one.put(`${J}/notes.txt`, 'x');
    const ix = new FragmentIndex(J, { openStore: open });
    const seen: string[] = [];
    const ac = new AbortController();
    let listings = 0;
    const done = runIndexRefresh(ix, {
      spec: () => ({ stores: ['file:///one/'], refreshIntervalMs: 1 }),
      open: (u) => (listings++, open(u)),
      signal: ac.signal,
      strays: new StrayObjects((o) => seen.push(o.path)),
    });
    await ix.firstRefresh;
    assert.equal(ix.endOffset(), 11n, 'the fragment beside the stray object is indexed');
    // Refreshes run every millisecond: wait for several more listings.
    while (listings < 5) await new Promise((r) => setTimeout(r, 5));
    ac.abort();
    await done;
    assert.deepEqual(seen.sort(), ['not-a-fragment.txt', 'notes.txt']);
    await one.remove(`${J}/notes.txt`);
  });

  it('runIndexRefresh installs listings until stopped', async () => {
    const ix = new FragmentIndex(J, { openStore: open });
    const ac = new AbortController();
    const done = runIndexRefresh(ix, { spec: () => ({ stores: ['file:///one/', 'file:///two/'], refreshIntervalMs: 60_000 }), open, signal: ac.signal });
    await ix.firstRefresh;
    assert.equal(ix.endOffset(), 23n);
    const page = await ix.list({ signatureTtlMs: 60_000 });
    assert.equal(page.fragments.length, 2);
    assert.ok(page.fragments.every((f) => f.signedUrl.startsWith('file:///')), JSON.stringify(page.fragments.map((f) => f.signedUrl)));
    ac.abort();
    await done;
  });
});
