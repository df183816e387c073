// The persister against a file:// store in a temporary directory, and against a store that
// fails a few times first.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { after, describe, it } from 'node:test';

import { Persister, PersistConfigError, persistPath } from '../../../../src/core/fragment/persister.js';
import { Spool, type LocalFragment } from '../../../../src/core/fragment/spool.js';
import { decompressor } from '../../../../src/lib/codecs/index.js';
import { parseFragmentPath, sumToHex } from '../../../../src/lib/protocol/fragment.js';
import { CompressionCodec, type JournalSpec } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import { FileStore, StoreAuthError, type FragmentStore } from '../../../../src/lib/stores/index.js';

const root = mkdtempSync(join(tmpdir(), 'persister-test-'));
mkdirSync(join(root, 'store'));
mkdirSync(join(root, 'other'));
after(() => rmSync(root, { recursive: true, force: true }));

const J = 'a/journal';
const T = new Date(Date.UTC(2024, 2, 5, 14, 7, 9));

function spec(codec: CompressionCodec, stores = ['file:///store/'], template = ''): JournalSpec {
  return {
    name: J,
    replication: 1,
    labels: { labels: [] },
    fragment: {
      length: 1n << 20n,
      compression_codec: codec,
      stores,
      refresh_interval: undefined,
      retention: undefined,
      flush_interval: undefined,
      path_postfix_template: template,
    },
    flags: 0,
    max_append_rate: 0n,
    suspend: undefined,
  };
}

function closedSpool(content: string, codec: CompressionCodec, begin = 0n): LocalFragment {
  const s = new Spool(J, { now: () => T });
  s.applyProposal({ ...s.fragment, begin, end: begin, compression_codec: codec }, { labels: [] });
  s.apply(Buffer.from(content));
  s.applyProposal(s.next(), { labels: [] });
  return s.roll()!;
}

async function decode(codec: CompressionCodec, stored: Buffer): Promise<string> {
  const d = codec === CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION ? decompressor(CompressionCodec.GZIP) : decompressor(codec);
  if (!d) return stored.toString();
  const out: Buffer[] = [];
  await pipeline(Readable.from([stored]), d, async (src: AsyncIterable<Buffer | string>) => {
    for await (const c of src) out.push(Buffer.from(c));
  });
  return Buffer.concat(out).toString();
}

const store = new FileStore('file:///store/', { root });

describe('Persister', () => {
  const CONTENT = 'line of journal content\n'.repeat(2000);
  for (const codec of [CompressionCodec.NONE, CompressionCodec.GZIP, CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION, CompressionCodec.SNAPPY, CompressionCodec.ZSTANDARD]) {
    it(`stores a ${CompressionCodec[codec]} fragment at its content path`, async () => {
      const p = new Persister({ stores: { fileRoot: root } });
      const lf = closedSpool(CONTENT, codec, 1000n);
      const f = await p.persist(lf, spec(codec));
      assert.ok(f);
      assert.equal(f.backing_store, 'file:///store/');
      assert.equal(f.path_postfix, '');
      const { path } = persistPath(lf, spec(codec));
      const stored = readFileSync(join(root, 'store', path));
      const back = await decode(codec, stored);
      assert.equal(back, CONTENT);
      const parsed = parseFragmentPath(J, path.slice(J.length + 1));
      assert.equal(parsed.begin, 1000n);
      assert.equal(parsed.end, 1000n + BigInt(CONTENT.length));
      assert.equal(sumToHex(parsed.sum), createHash('sha1').update(back).digest('hex'));
      assert.equal(parsed.compression_codec, codec);
      assert.equal(p.pendingBytes, 0);
    });
  }

  it('puts the fragment under its evaluated postfix', async () => {
    const p = new Persister({ stores: { fileRoot: root } });
    const lf = closedSpool('dated content', CompressionCodec.GZIP, 50n);
    const s = spec(CompressionCodec.GZIP, ['file:///store/'], 'date={{ .Spool.FirstAppendTime.Format "2006-01-02" }}/');
    const f = await p.persist(lf, s);
    assert.equal(f?.path_postfix, 'date=2024-03-05');
    const listed = readdirSync(join(root, 'store', J, 'date=2024-03-05'));
    assert.equal(listed.length, 1);
    assert.ok(listed[0]!.startsWith('0000000000000032-000000000000003f-'), listed[0]);
  });

  it('is idempotent: an existing object is left alone', async () => {
    let puts = 0;
    const counting: FragmentStore = Object.assign(Object.create(store) as FragmentStore, {
      put: async (...a: Parameters<FragmentStore['put']>) => {
        puts++;
        return store.put(...a);
      },
    });
    const p = new Persister({ openStore: () => counting });
    const lf = closedSpool('same content twice', CompressionCodec.SNAPPY, 7n);
    const reports: number[] = [];
    const p2 = new Persister({ openStore: () => counting, hooks: { persisted: (_f, n) => reports.push(n) } });
    await p.persist(lf, spec(CompressionCodec.SNAPPY));
    await p2.persist(lf, spec(CompressionCodec.SNAPPY));
    assert.equal(puts, 1);
    assert.deepEqual(reports, [0]);
  });

  it('retries with backoff until the store takes it, reporting pending bytes', async () => {
    let failures = 3;
    const flaky: FragmentStore = Object.assign(Object.create(store) as FragmentStore, {
      put: async (...a: Parameters<FragmentStore['put']>) => {
        if (failures-- > 0) throw new Error('store is down');
        return store.put(...a);
      },
    });
    const delays: number[] = [];
    const pending: number[] = [];
    const p = new Persister({
      openStore: () => flaky,
      initialBackoffMs: 1,
      maxBackoffMs: 3,
      hooks: { failed: (_f, _e, ms) => delays.push(ms), pendingBytes: (n) => pending.push(n) },
    });
    const lf = closedSpool('retried content', CompressionCodec.GZIP, 3n);
    const f = await p.persist(lf, spec(CompressionCodec.GZIP));
    assert.ok(f);
    assert.deepEqual(delays, [1, 2, 3]);
    assert.deepEqual(pending, [15, 0]);
    assert.ok(await store.exists(persistPath(lf, spec(CompressionCodec.GZIP)).path));
  });

  it('stops retrying when its signal aborts', async () => {
    const down: FragmentStore = Object.assign(Object.create(store) as FragmentStore, {
      exists: async () => {
        throw new Error('unreachable');
      },
    });
    const ac = new AbortController();
    const p = new Persister({ openStore: () => down, initialBackoffMs: 1, hooks: { failed: () => ac.abort(new Error('giving up')) } });
    await assert.rejects(p.persist(closedSpool('x', CompressionCodec.NONE), spec(CompressionCodec.NONE), { signal: ac.signal }), /giving up/);
    assert.equal(p.pendingBytes, 0);
  });

  it('runs at most `concurrency` persists at once; a waiting one can be aborted', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let active = 0;
    let most = 0;
    const slow: FragmentStore = Object.assign(Object.create(store) as FragmentStore, {
      put: async (...a: Parameters<FragmentStore['put']>) => {
        active++;
        most = Math.max(most, active);
        await gate;
        active--;
        return store.put(...a);
      },
    });
    const p = new Persister({ openStore: () => slow, concurrency: 2 });
    const jobs = [0, 1, 2, 3].map((i) => p.persist(closedSpool(`concurrent ${i}`, CompressionCodec.NONE, BigInt(i * 1000)), spec(CompressionCodec.NONE)));
    // Wait until two puts are in the store (the others wait for a slot).
    for (let i = 0; i < 100_000 && active < 2; i++) await new Promise((r) => setImmediate(r));
    assert.equal(active, 2);
    const ac = new AbortController();
    const waiting = p.persist(closedSpool('aborted while waiting', CompressionCodec.NONE, 9000n), spec(CompressionCodec.NONE), { signal: ac.signal });
    ac.abort(new Error('not needed'));
    await assert.rejects(waiting, /not needed/);
    release();
    assert.equal((await Promise.all(jobs)).filter(Boolean).length, 4);
    assert.equal(most, 2);
    await p.idle();
  });

  it('falls back to the next store on a permission error while exiting', async () => {
    const other = new FileStore('file:///other/', { root });
    const denied: FragmentStore = Object.assign(Object.create(store) as FragmentStore, {
      exists: async () => {
        throw new StoreAuthError('access denied', 'denied');
      },
      isAuthError: (e: unknown) => e instanceof StoreAuthError,
    });
    const p = new Persister({ openStore: (url) => (url === 'file:///store/' ? denied : other) });
    const f = await p.persist(closedSpool('exiting', CompressionCodec.NONE), spec(CompressionCodec.NONE, ['file:///store/', 'file:///other/']), { exiting: true });
    assert.equal(f?.backing_store, 'file:///other/');
  });

  it('does nothing for empty fragments or specs without stores', async () => {
    const p = new Persister({ stores: { fileRoot: root } });
    assert.equal(await p.persist(closedSpool('abc', CompressionCodec.NONE), spec(CompressionCodec.NONE, [])), undefined);
    const s = new Spool(J);
    assert.equal(await p.persist(s.local(), spec(CompressionCodec.NONE)), undefined);
  });

  it('refuses a postfix that does not make a parseable path, without retrying', async () => {
    const p = new Persister({ stores: { fileRoot: root }, initialBackoffMs: 1 });
    const lf = closedSpool('abc', CompressionCodec.NONE);
    await assert.rejects(p.persist(lf, spec(CompressionCodec.NONE, ['file:///store/'], '../../escape/')), PersistConfigError);
    await assert.rejects(p.persist(lf, spec(CompressionCodec.NONE, ['file:///store/'], '{{ if .Name }}x{{ end }}')), PersistConfigError);
  });
});
