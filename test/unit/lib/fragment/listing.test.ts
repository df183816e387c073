// Listing a journal's fragments across its stores: two file:// stores on disk, and fake stores
// for failures and the concurrency bound.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import {
  collectFragmentObjects,
  listFragmentObjects,
  listJournalFragments,
  type FragmentListingEntry,
} from '../../../../src/lib/fragment/listing.js';
import { planForks } from '../../../../src/lib/fragment/forks.js';
import { sumFromHex } from '../../../../src/lib/protocol/fragment.js';
import { StoreAuthError, StoreError, type FragmentListing, type FragmentStore, type StoreObject } from '../../../../src/lib/stores/index.js';

const SUM = 'aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d';
const hex16 = (n: number) => n.toString(16).padStart(16, '0');
const frag = (b: number, e: number, ext = '.raw') => `${hex16(b)}-${hex16(e)}-${SUM}${ext}`;

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

/**
 * A store whose listFragments is `list`, and whose list of `<journal>/` yields the same entries
 * as plain objects (the listing parses names itself); everything else throws.
 */
function fakeStore(url: string, list: (journal: string) => AsyncIterable<FragmentListing>): FragmentStore {
  const no = () => {
    throw new Error('not in this test');
  };
  async function* objects(prefix: string): AsyncGenerator<StoreObject> {
    for await (const l of list(prefix.replace(/\/$/, ''))) {
      yield { path: l.path, size: l.size, modTime: l.kind === 'fragment' ? new Date(Number(l.fragment.mod_time) * 1000) : l.modTime };
    }
  }
  return {
    url,
    scheme: 'fake',
    list: objects,
    listFragments: list,
    exists: no,
    open: no,
    get: no,
    put: no,
    remove: no,
    signGet: no,
    health: no,
    isAuthError: (e) => e instanceof StoreAuthError,
  };
}

describe('listing fragments across stores', () => {
  let root = '';
  const A = 'file:///a/';
  const B = 'file:///b/';
  const write = (rel: string, content: string, mtime = 1_700_000_000) => {
    const p = join(root, rel);
    mkdirSync(dirname(p), { recursive: true });
    writeFileSync(p, content);
    utimesSync(p, mtime, mtime);
  };
  before(() => {
    root = mkdtempSync(join(tmpdir(), 'gazctl-listing-'));
    write(`a/j/one/${frag(0, 4)}`, 'aaaa');
    write(`a/j/one/pp=1/${frag(4, 8, '.gz')}`, 'gz', 1_700_000_100);
    write(`a/j/one/README`, 'hello');
    write(`a/j/one-two/${frag(0, 9)}`, 'not this journal');
    write(`b/j/one/date=2024-05-01/${frag(0, 4)}`, 'aaaa');
    write(`b/j/one/${frag(8, 9, '.zst')}`, 'z');
    write(`b/j/two/${frag(0, 1)}`, 'x');
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  it('yields every fragment object of the journal in every store, and the unparseable ones', async () => {
    const spec = { name: 'j/one', fragment: { stores: [A, B, A] } };
    const got = await collectFragmentObjects([spec], { stores: { fileRoot: root } });
    const key = (o: { store: string; path: string }) => `${o.store} ${o.path}`;
    assert.deepEqual(got.objects.map(key).sort(), [
      `${A} j/one/${frag(0, 4)}`,
      `${A} j/one/pp=1/${frag(4, 8, '.gz')}`,
      `${B} j/one/${frag(8, 9, '.zst')}`,
      `${B} j/one/date=2024-05-01/${frag(0, 4)}`,
    ]);
    const gz = got.objects.find((o) => o.path.endsWith('.gz'))!;
    assert.deepEqual(gz, {
      journal: 'j/one',
      begin: 4n,
      end: 8n,
      sum: SUM,
      store: A,
      path: `j/one/pp=1/${frag(4, 8, '.gz')}`,
      size: 2,
      modTime: 1_700_000_100,
    });
    assert.equal(got.unparseable.length, 1);
    assert.equal(got.unparseable[0]!.path, 'j/one/README');
    assert.equal(got.unparseable[0]!.store, A);
    assert.equal(got.unparseable[0]!.size, 5);
    assert.equal(got.unparseable[0]!.modTime, 1_700_000_000);
    assert.ok(got.unparseable[0]!.reason.length > 0);
    assert.deepEqual(got.failed, []);

    // The shape the fork planner takes.
    const plan = planForks('j/one', got.objects);
    assert.deepEqual([plan.chain.begin, plan.chain.end], [0n, 9n]);
  });

  it('sets aside the objects of journals nested under a listed one, at any depth', async () => {
    const N = 'file:///n/';
    write(`n/ns/y/${frag(0, 4)}`, 'yyyy');
    write(`n/ns/y/pp=1/${frag(4, 6)}`, 'yy');
    write(`n/ns/y/z/${frag(0, 3)}`, 'zzz');
    write(`n/ns/y/z/w/q/${frag(0, 2)}`, 'ww');
    write(`n/ns/y/z/README`, 'nested readme');
    write(`n/ns/y/zz/${frag(6, 7)}`, 'p');
    const key = (o: { path: string }) => o.path;
    // Without the names of other journals, their objects parse as this journal's (postfix `z`).
    const blind = await collectFragmentObjects([{ name: 'ns/y', fragment: { stores: [N] } }], { stores: { fileRoot: root } });
    assert.equal(blind.objects.length, 5);
    assert.deepEqual(blind.nested, []);

    const journals = new Set(['ns/y', 'ns/y/z', 'ns/y/z/w', 'ns/yy', 'ns/y/pp']);
    const got = await collectFragmentObjects([{ name: 'ns/y', fragment: { stores: [N] } }], { stores: { fileRoot: root }, journals });
    // `zz` is not a journal and `pp=1` is not `pp`: those stay postfixes of ns/y.
    assert.deepEqual(got.objects.map(key).sort(), [`ns/y/${frag(0, 4)}`, `ns/y/pp=1/${frag(4, 6)}`, `ns/y/zz/${frag(6, 7)}`]);
    assert.deepEqual(
      got.nested.map((o) => [o.path, o.owner, o.journal, o.store]).sort(),
      [
        [`ns/y/z/README`, 'ns/y/z', 'ns/y', N],
        [`ns/y/z/${frag(0, 3)}`, 'ns/y/z', 'ns/y', N],
        // The deepest journal owns it.
        [`ns/y/z/w/q/${frag(0, 2)}`, 'ns/y/z/w', 'ns/y', N],
      ].sort(),
    );
    assert.deepEqual(got.unparseable, []);
    // The nested journal itself lists its own objects, and sets aside its own nested journal's.
    const z = await collectFragmentObjects([{ name: 'ns/y/z', fragment: { stores: [N] } }], { stores: { fileRoot: root }, journals });
    assert.deepEqual(z.objects.map(key), [`ns/y/z/${frag(0, 3)}`]);
    assert.deepEqual(z.unparseable.map(key), ['ns/y/z/README']);
    assert.deepEqual(z.nested.map(key), [`ns/y/z/w/q/${frag(0, 2)}`]);
  });

  it('lists several journals; a journal without stores yields nothing', async () => {
    const got = await collectFragmentObjects(
      [
        { name: 'j/one', fragment: { stores: [B] } },
        { name: 'j/two', fragment: { stores: [A, B] } },
        { name: 'j/none', fragment: { stores: [] } },
        { name: 'j/undef', fragment: undefined },
      ],
      { stores: { fileRoot: root } },
    );
    assert.deepEqual(got.objects.map((o) => `${o.journal} ${o.store}`).sort(), [`j/one ${B}`, `j/one ${B}`, `j/two ${B}`]);
    assert.deepEqual(await collect(listJournalFragments({ name: 'j/undef', fragment: undefined })), []);
  });

  it('ends with the first store error, or reports failing stores and goes on', async () => {
    const broken = fakeStore('s3://gone/p/', async function* () {
      throw new StoreAuthError('store s3://gone/p/: list j/one/: bucket gone does not exist (NoSuchBucket)', 'no-bucket');
    });
    const good = fakeStore('s3://ok/p/', async function* (journal) {
      yield { kind: 'fragment', path: frag(0, 1), size: 1, fragment: { journal, begin: 0n, end: 1n, sum: sumFromHex(SUM), compression_codec: 1, backing_store: 's3://ok/p/', mod_time: 5n, path_postfix: '' } };
    });
    const byUrl = new Map([
      [broken.url, broken],
      [good.url, good],
    ]);
    const spec = { name: 'j/one', fragment: { stores: [broken.url, good.url, 'file:///needs-root/'] } };
    const openStore = (u: string) => {
      const s = byUrl.get(u);
      if (!s) throw new StoreError(`store ${u}: no local root directory is configured for file:// stores`);
      return s;
    };
    await assert.rejects(collect(listJournalFragments(spec, { openStore, concurrency: 1 })), (e: Error) => e instanceof StoreAuthError && /NoSuchBucket/.test(e.message));

    const got = await collectFragmentObjects([spec], { openStore, continueOnError: true });
    assert.deepEqual(got.failed.map((f) => f.store).sort(), ['file:///needs-root/', 's3://gone/p/']);
    assert.deepEqual(got.objects.map((o) => [o.store, o.path, o.sum, o.modTime]), [['s3://ok/p/', `j/one/${frag(0, 1)}`, SUM, 5]]);
    const gone = got.failed.find((f) => f.store === 's3://gone/p/')!;
    assert.ok(gone.error instanceof StoreAuthError);
    assert.equal(gone.journal, 'j/one');
    for (const f of got.failed) assert.ok(f.error instanceof StoreError && !f.error.message.includes('\n'), f.error.message);
  });

  it('lists at most `concurrency` stores at once', async () => {
    let active = 0;
    let max = 0;
    const stores = new Map<string, FragmentStore>();
    for (let i = 0; i < 6; i++) {
      const url = `s3://b${i}/p/`;
      stores.set(
        url,
        fakeStore(url, async function* () {
          active++;
          max = Math.max(max, active);
          try {
            for (let k = 0; k < 3; k++) {
              await new Promise((r) => setImmediate(r));
              yield { kind: 'unparseable', path: `x${k}`, size: 0, modTime: new Date(0), reason: 'test' };
            }
          } finally {
            active--;
          }
        }),
      );
    }
    const spec = { name: 'j', fragment: { stores: [...stores.keys()] } };
    const entries: FragmentListingEntry[] = await collect(listJournalFragments(spec, { openStore: (u) => stores.get(u)!, concurrency: 2 }));
    assert.equal(entries.length, 18);
    assert.equal(max, 2);
    assert.equal(active, 0);
    // Each store's entries keep their order.
    for (const url of stores.keys()) {
      const mine = entries.filter((e) => e.kind === 'unparseable' && e.object.store === url).map((e) => (e.kind === 'unparseable' ? e.object.path : ''));
      assert.deepEqual(mine, ['j/x0', 'j/x1', 'j/x2']);
    }
  });

  it('stops the store listings when the consumer stops early, or on abort', async () => {
    let closed = 0;
    const endless = fakeStore('s3://endless/p/', async function* () {
      try {
        for (let k = 0; ; k++) {
          await new Promise((r) => setImmediate(r));
          yield { kind: 'unparseable', path: `x${k}`, size: 0, modTime: new Date(0), reason: 'test' };
        }
      } finally {
        closed++;
      }
    });
    const spec = { name: 'j', fragment: { stores: [endless.url] } };
    let n = 0;
    for await (const _ of listFragmentObjects([spec], { openStore: () => endless })) if (++n === 5) break;
    assert.equal(closed, 1);

    const ac = new AbortController();
    await assert.rejects(
      (async () => {
        for await (const _ of listFragmentObjects([spec], { openStore: () => endless, signal: ac.signal })) ac.abort(new Error('stop now'));
      })(),
      /stop now/,
    );
    assert.equal(closed, 2);
  });
});
