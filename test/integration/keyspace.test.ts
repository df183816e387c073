// The keyspace client against a real etcd: a prefix watch that rides out a 15 s etcd outage,
// resyncing after compaction, and leases that keep a key alive for exactly as long as their
// holder lives.

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { Keyspace, memberKey, type WatchChanges, type WatchResync } from '../../src/lib/keyspace/index.js';
import { delay, pollUntil, spawnManaged, startEtcd, type EtcdProcess } from '../../src/testing/index.js';

const here = fileURLToPath(new URL('.', import.meta.url));

/** A watch's deliveries, flattened to `revision type key=value` lines. */
function recorder() {
  const lines: string[] = [];
  const revisions: bigint[] = [];
  const resyncs: WatchResync[] = [];
  const retries: string[] = [];
  return {
    lines,
    revisions,
    resyncs,
    retries,
    onChanges(c: WatchChanges) {
      revisions.push(c.revision);
      for (const e of c.events) lines.push(`${c.revision} ${e.type} ${e.kv.key}=${e.kv.value.toString()}`);
    },
    onResync(r: WatchResync) {
      resyncs.push(r);
    },
    onRetry(err: Error) {
      retries.push(err.message);
    },
  };
}

describe('keyspace on a real etcd', { timeout: 120_000 }, () => {
  let etcd: EtcdProcess | undefined;
  before(async () => {
    etcd = await startEtcd();
  });
  after(() => etcd?.stop());

  test('a prefix watch sees every change across a 15 s etcd outage, in order, once each', async (t) => {
    const e = etcd!;
    const writer = e.connect();
    const watcher = e.connect();
    const rec = recorder();
    const expected: string[] = [];
    const writeRevisions: bigint[] = [];
    let ended = false;
    try {
      await writer.put('/outside/x', 'not watched');
      const start = await writer.revision();
      const w = watcher.watchPrefix('/outage/', { afterRevision: start, ...rec, backoff: { maxMs: 1000 } });
      void w.done.finally(() => (ended = true));

      const put = async (k: string, v: string) => {
        const rev = await writer.put(`/outage/${k}`, v);
        writeRevisions.push(rev);
        expected.push(`${rev} put /outage/${k}=${v}`);
      };
      for (let i = 0; i < 5; i++) await put(`before-${i}`, `v${i}`);
      await writer.put('/outside/y', 'not watched either');
      await pollUntil('the watch to see the writes made before the outage', async () => rec.lines.length === 5, {
        timeoutMs: 10_000,
      });

      // A lease can't outlive an outage longer than its TTL: its holder is told.
      let leaseLost: Error | undefined;
      const lease = await watcher.grantLease(5, { onLost: (err) => (leaseLost = err) });

      await e.halt();
      t.diagnostic('etcd halted; waiting 15 s');
      await delay(15_000);
      assert.equal(ended, false, 'the watch must not end while etcd is down');
      assert.match(leaseLost?.message ?? 'not lost', /lost: no keep-alive succeeded for 5s/);
      assert.equal(lease.lost, leaseLost);
      await e.resume();
      const resumedAt = Date.now();
      t.diagnostic('etcd resumed');

      for (let i = 0; i < 5; i++) await put(`after-${i}`, `w${i}`);
      // Several changes in one revision arrive together, as one delivery.
      const txn = await writer.txn({
        success: [{ put: '/outage/t1', value: 'a' }, { put: '/outage/t2', value: 'b' }, { delete: '/outage/before-0' }],
      });
      assert.ok(txn.succeeded);
      writeRevisions.push(txn.revision);
      expected.push(`${txn.revision} put /outage/t1=a`, `${txn.revision} put /outage/t2=b`, `${txn.revision} delete /outage/before-0=`);
      await pollUntil('the watch to catch up after the outage', async () => rec.lines.length >= expected.length, {
        timeoutMs: 30_000,
        describe: () => rec.lines.join('\n'),
      });
      t.diagnostic(`caught up ${Date.now() - resumedAt} ms after etcd was healthy again`);

      assert.deepEqual(rec.lines, expected);
      assert.deepEqual(rec.revisions, writeRevisions, 'one delivery per revision, none missed or repeated');
      assert.equal(w.revision, txn.revision);
      assert.deepEqual(rec.resyncs, []);
      assert.ok(rec.retries.length > 0, 'the outage was noticed and retried');
      t.diagnostic(`${rec.retries.length} retries; first: ${rec.retries[0]}`);
      assert.equal(ended, false, 'the watch keeps running until closed');
      await w.close();
      assert.equal(ended, true);
    } finally {
      writer.close();
      watcher.close();
    }
  });

  test('a watch that resumes below the compacted history resyncs from a fresh listing', async () => {
    const ks = etcd!.connect();
    try {
      const start = await ks.revision();
      await ks.put('/compact/a', '1');
      await ks.put('/compact/b', '2');
      await ks.delete('/compact/a');
      const top = await ks.put('/compact/c', '3');
      await ks.compact(top);

      const rec = recorder();
      const w = ks.watchPrefix('/compact/', { afterRevision: start, ...rec });
      await pollUntil('the resync', async () => rec.resyncs.length === 1, { timeoutMs: 10_000 });
      const r = rec.resyncs[0]!;
      assert.equal(r.missedAfter, start);
      assert.equal(r.compactRevision, top);
      assert.ok(r.revision >= top);
      assert.deepEqual(r.kvs.map((kv) => `${kv.key}=${kv.value}`), ['/compact/b=2', '/compact/c=3']);
      assert.deepEqual(rec.lines, []);

      const next = await ks.put('/compact/d', '4');
      await pollUntil('the change after the resync', async () => rec.lines.length === 1, { timeoutMs: 10_000 });
      assert.deepEqual(rec.lines, [`${next} put /compact/d=4`]);
      assert.equal(rec.resyncs.length, 1);
      await w.close();
    } finally {
      ks.close();
    }
  });

  test('a lease-held key disappears after its holder is killed -9', async (t) => {
    const e = etcd!;
    const ttl = 3;
    const key = memberKey('/lease-test', { zone: 'local', suffix: 'holder' });
    const holder = spawnManaged({
      name: 'lease holder',
      command: process.execPath,
      args: [join(here, 'fixtures', 'lease-holder.js'), e.endpoint, key, String(ttl)],
      logFile: join(e.dataDir, '..', 'lease-holder.log'),
    });
    const ks = e.connect();
    try {
      const kv = await pollUntil(
        'the holder to put its key',
        async () => {
          if (!holder.running) throw new Error(`holder exited: ${holder.describe()}`);
          return ks.get(key);
        },
        { timeoutMs: 15_000, describe: () => holder.describe() },
      );
      assert.equal(kv.value.toString(), String(holder.pid));
      assert.notEqual(kv.lease, 0n);

      // Outlive the TTL twice over: only keep-alives can keep the key.
      await delay(2 * ttl * 1000);
      const still = await ks.get(key);
      assert.equal(still?.lease, kv.lease, 'the key outlives its TTL while the holder keeps the lease alive');
      assert.ok(holder.running);

      const gone: WatchChanges[] = [];
      const w = ks.watchPrefix(key, {
        afterRevision: still.modRevision,
        onChanges: (c) => void gone.push(c),
        onResync: () => assert.fail('unexpected resync'),
      });
      process.kill(holder.pid, 'SIGKILL');
      const killedAt = Date.now();
      await holder.waitForExit(5000);
      // etcd expires a lease at most its TTL after the last keep-alive; allow generous slack
      // for a loaded machine.
      await pollUntil('the key to be deleted by lease expiry', async () => gone.length > 0, { timeoutMs: (ttl + 10) * 1000 });
      t.diagnostic(`key deleted ${Date.now() - killedAt} ms after kill -9 (TTL ${ttl} s)`);
      assert.equal(gone.length, 1);
      assert.deepEqual(
        gone[0]!.events.map((ev) => `${ev.type} ${ev.kv.key}`),
        [`delete ${key}`],
      );
      assert.equal(await ks.get(key), undefined);
      assert.equal(await ks.revokeLease(kv.lease), false, 'the lease itself is gone too');
      await w.close();
    } finally {
      holder.killNow('SIGKILL');
      ks.close();
    }
  });

  test('a lease revoked elsewhere is reported lost; a revoked lease deletes its keys at once', async () => {
    const a = etcd!.connect();
    const b = etcd!.connect();
    try {
      let lost: Error | undefined;
      const lease = await a.grantLease(5, { onLost: (e) => (lost = e), keepAliveIntervalMs: 200 });
      await a.put('/lost/k', 'v', { lease: lease.id });
      assert.equal(await b.revokeLease(lease.id), true);
      assert.equal(await b.get('/lost/k'), undefined);
      await pollUntil('the loss to be reported', async () => lost !== undefined, { timeoutMs: 10_000 });
      assert.match(lost!.message, /lost: etcd reports the lease expired or revoked/);
      assert.equal(lease.lost, lost);
      assert.equal(lease.signal.aborted, true);

      assert.equal(await b.resumeLease(lease.id), undefined, 'a revoked lease cannot be taken up again');
      const held = await a.grantLease(5);
      const again = await b.resumeLease(held.id);
      assert.ok(again, 'a lease etcd still holds can be taken up');
      assert.equal(again.id, held.id);
      assert.equal(again.ttlSeconds, 5);
      held.close();
      assert.equal(await again.revoke(), true);
      assert.equal(await b.resumeLease(held.id), undefined);

      const own = await a.grantLease(5);
      await a.put('/lost/own', 'v', { lease: own.id });
      assert.equal(await own.revoke(), true);
      assert.equal(await b.get('/lost/own'), undefined);
      assert.equal(own.lost, undefined, 'revoking through the lease is not a loss');
    } finally {
      a.close();
      b.close();
    }
  });

  test('an AbortSignal closes the client, its watches and its keep-alives', async () => {
    const ac = new AbortController();
    const ks = new Keyspace({ endpoints: etcd!.endpoint, signal: ac.signal });
    const w = ks.watchPrefix('/abort/', { onChanges: () => {}, onResync: () => {} });
    const lease = await ks.grantLease(5);
    ac.abort();
    await w.done;
    await lease.ended;
    assert.equal(ks.isClosed, true);
    assert.equal(lease.lost, undefined);
    await assert.rejects(ks.get('/abort/x'), /the keyspace client is closed/);
    assert.throws(() => ks.watchPrefix('/abort/', { onChanges: () => {}, onResync: () => {} }), /closed/);
  });

  test('transactions compare revisions', async () => {
    const ks = etcd!.connect();
    try {
      const create = await ks.txn({
        compare: [{ key: '/txn/k', target: 'modRevision', value: 0n }],
        success: [{ put: '/txn/k', value: 'one' }],
      });
      assert.equal(create.succeeded, true);
      const again = await ks.txn({
        compare: [{ key: '/txn/k', target: 'modRevision', value: 0n }],
        success: [{ put: '/txn/k', value: 'two' }],
        failure: [{ put: '/txn/failed', value: 'yes' }],
      });
      assert.equal(again.succeeded, false);
      assert.equal((await ks.get('/txn/k'))?.value.toString(), 'one');
      assert.equal((await ks.get('/txn/failed'))?.value.toString(), 'yes');
      const kv = (await ks.get('/txn/k'))!;
      const update = await ks.txn({
        compare: [{ key: '/txn/k', target: 'modRevision', value: kv.modRevision }, { key: '/txn/k', target: 'value', value: 'one' }],
        success: [{ put: '/txn/k', value: 'three' }, { deletePrefix: '/txn/f' }],
      });
      assert.equal(update.succeeded, true);
      assert.deepEqual((await ks.range('/txn/')).kvs.map((x) => `${x.key}=${x.value}`), ['/txn/k=three']);
      // Paged ranges read every key, at one revision.
      for (let i = 0; i < 25; i++) await ks.put(`/page/${String(i).padStart(2, '0')}`, String(i));
      const paged = await ks.range('/page/', { pageSize: 7 });
      assert.equal(paged.kvs.length, 25);
      assert.equal(paged.kvs[24]!.key, '/page/24');
      assert.equal(await ks.deletePrefix('/page/'), 25);
    } finally {
      ks.close();
    }
  });

  test('calls on a down etcd fail with one clear error; health says false', async () => {
    const ks = new Keyspace({ endpoints: 'http://127.0.0.1:1', callTimeoutMs: 2000 });
    try {
      assert.equal(await ks.healthy(1000), false);
      await assert.rejects(ks.get('/x'), (err: Error) => err.name === 'KeyspaceError' && /^etcd get \/x: /.test(err.message));
    } finally {
      ks.close();
    }
    await assert.rejects(ks.put('/x', 'y'), /the keyspace client is closed/);
  });
});
