// Acceptance of our brokers under faults, with replication 3 on four brokers and a stream of
// appends: etcd stopped for 15 s and started again (no broker exits, appends resume, nothing
// acknowledged is lost), and a kill -9 of a journal's primary (appends resume; we measure how
// soon). Then the reference Go gazctl's `journals prune` against our brokers, on an s3:// store
// (the Go gazctl has no file store root, so it cannot delete from file:// stores).

import assert from 'node:assert/strict';
import { utimesSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import {
  delay,
  getKey,
  pidAlive,
  runGoGazctl,
  s3Request,
  startCluster,
  startS3,
  tsBroker,
  waitForJournalsAssigned,
  type Cluster,
  type S3Server,
} from '../../src/testing/index.js';
import { gzOk } from '../helpers/journals.js';
import { assertReadsBack, startAppendLoad } from '../helpers/core.js';

const live = (c: Cluster) => () => c.brokers.filter((_, j) => c.isRunning(j)).map((b) => b.endpoint);

describe('our brokers under faults (four, replication 3, appends streaming)', { timeout: 300_000 }, () => {
  let cluster: Cluster | undefined;

  before(async () => {
    cluster = await startCluster({ brokers: 4, impl: tsBroker });
    await gzOk(cluster, ['journals', 'apply', '--specs', '-'], {
      input: 'name: fault/\nreplication: 3\nfragment:\n  length: 8192\n  compression_codec: NONE\n  stores:\n  - file:///\n  refresh_interval: 1s\nchildren:\n- name: fault/etcd\n- name: fault/kill\n',
    });
    await waitForJournalsAssigned(cluster, ['fault/etcd', 'fault/kill'], 30_000);
  });
  after(() => cluster?.stop());

  test('etcd stopped for 15 s and started again: no broker exits, appends resume, nothing acknowledged is lost', async (t) => {
    const c = cluster!;
    const journal = 'fault/etcd';
    const pids = c.brokers.map((b) => b.pid!);
    const load = startAppendLoad(journal, live(c), { tag: 'etcd' });
    try {
      await load.until('appends before the outage', () => load.acked.length >= 30, 30_000);
      await c.etcd.halt();
      const haltedAt = Date.now();
      const before = load.acked.length;
      // 15 s without etcd; every broker must stay up all along.
      while (Date.now() - haltedAt < 15_000) {
        for (const pid of pids) assert.ok(pidAlive(pid), `broker pid ${pid} exited while etcd was down`);
        await delay(250);
      }
      const duringOutage = load.acked.length - before;
      await c.etcd.resume();
      const resumedAt = Date.now();
      const atResume = load.acked.length;
      await load.until('appends after etcd is back', () => load.acked.length >= atResume + 30, 60_000);
      // The leases the brokers held before the outage are alive again once etcd is back (etcd
      // renews every lease's TTL when it starts). Appends must still be acknowledged well past
      // their TTL (5 s): a broker that registered under a new lease instead would lose every
      // assignment when the old lease expires, and the journal would come back on empty spools
      // and answer INDEX_HAS_GREATER_OFFSET.
      await load.until('appends more than two lease TTLs after etcd is back', () => load.acked.some((a) => a.at >= resumedAt + 12_000), 60_000);
      const firstAfter = load.acked.find((a) => a.at >= resumedAt)!;
      t.diagnostic(`${duringOutage} appends acknowledged while etcd was down; first acknowledgement ${firstAfter.at - resumedAt} ms after etcd was healthy again; ${load.failures.length} failed attempts in all`);
    } finally {
      await load.stop();
    }
    for (const pid of pids) assert.ok(pidAlive(pid), `broker pid ${pid} is still running`);
    // Every broker is (again) a member, and the cluster serves.
    await c.waitReady(30_000);
    for (let i = 0; i < c.brokers.length; i++) assert.ok(await getKey(c.etcd.endpoint, c.memberKey(i)), `broker ${i} is registered`);
    for (const b of c.brokers) await assertReadsBack(b.endpoint, journal, load.acked, b.id);
  });

  test('kill -9 of the primary: appends resume, every acknowledged append reads back exactly once', async (t) => {
    const c = cluster!;
    const journal = 'fault/kill';
    const listed = await waitForJournalsAssigned(c, [journal], 30_000);
    const route = listed.get(journal)!.route!;
    const victim = c.brokers.findIndex((b) => b.id === route.members[route.primary]!.suffix);
    assert.ok(victim >= 0);
    const load = startAppendLoad(journal, live(c), { tag: 'kill' });
    let killedAt = 0;
    try {
      await load.until('appends before the kill', () => load.acked.length >= 30, 30_000);
      await c.stopBroker(victim, { graceful: false });
      killedAt = Date.now();
      const atKill = load.acked.length;
      await load.until('appends after the kill', () => load.acked.length >= atKill + 30, 60_000);
    } finally {
      await load.stop();
    }
    const firstAfter = load.acked.find((a) => a.at >= killedAt)!;
    const resumeMs = firstAfter.at - killedAt;
    t.diagnostic(`appends resumed ${resumeMs} ms after the kill -9 of the primary (${load.failures.length} failed attempts; etcd lease ${'5s'})`);
    // The requirement is 10 s; on a loaded 2-core CI machine we only insist on a generous bound
    // (twice that) so that the test checks resumption, not the machine's speed.
    assert.ok(resumeMs < 20_000, `appends resumed within 20 s of the kill (took ${resumeMs} ms)`);
    for (const [i, b] of c.brokers.entries()) {
      if (c.isRunning(i)) await assertReadsBack(b.endpoint, journal, load.acked, `${b.id} (${c.implOf(i).name})`);
    }
  });
});

describe('the reference Go gazctl prunes through our brokers (s3:// store)', { timeout: 180_000 }, () => {
  const HOUR = 3600;
  let srv: S3Server | undefined;
  let cluster: Cluster | undefined;
  const sha = '0'.repeat(40);
  const name = (b: number, e: number) => `gprune/a/${b.toString(16).padStart(16, '0')}-${e.toString(16).padStart(16, '0')}-${sha}.raw`;
  const objects = [
    { key: name(0, 100), age: 48, expired: true },
    { key: name(100, 200), age: 30, expired: true },
    { key: name(200, 300), age: 1, expired: false },
  ];
  const env = (): Record<string, string> => ({
    AWS_ACCESS_KEY_ID: srv!.credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: srv!.credentials.secretAccessKey,
    AWS_REGION: srv!.credentials.region,
    AWS_EC2_METADATA_DISABLED: 'true',
  });
  const listBucket = async (): Promise<string[]> => {
    const res = await s3Request({ endpoint: srv!.endpoint, credentials: srv!.credentials, method: 'GET', path: `/${srv!.bucket}`, query: { 'list-type': '2', prefix: 'gprune/' } });
    const xml = await res.text();
    assert.equal(res.status, 200, xml);
    return [...xml.matchAll(/<Key>([^<]*)<\/Key>/g)].map((m) => m[1]!).sort();
  };

  before(async () => {
    srv = await startS3({ bucket: 'gprune' });
    cluster = await startCluster({ brokers: 1, impl: tsBroker, brokerEnv: env() });
    const now = Date.now() / 1000;
    for (const o of objects) {
      const res = await s3Request({ endpoint: srv.endpoint, credentials: srv.credentials, method: 'PUT', path: `/${srv.bucket}/${o.key}`, body: Buffer.alloc(100, 'x') });
      assert.equal(res.status, 200, await res.text());
      const f = join(srv.dataDir, srv.bucket, o.key);
      utimesSync(f, now - o.age * HOUR, now - o.age * HOUR);
    }
    await gzOk(cluster, ['journals', 'apply', '--specs', '-'], {
      input: `name: gprune/a\nreplication: 1\nfragment:\n  length: 1024\n  compression_codec: NONE\n  refresh_interval: 1s\n  retention: 24h\n  stores:\n  - ${JSON.stringify(srv.storeUrl(''))}\n`,
    });
    await waitForJournalsAssigned(cluster, ['gprune/a'], 30_000);
  });
  after(async () => {
    await cluster?.stop();
    await srv?.stop();
  });

  test('journals prune deletes exactly the fragments past their retention, which our broker lists', async () => {
    const c = cluster!;
    // Our broker's index picks the stored fragments up on its next refresh.
    const deadline = Date.now() + 30_000;
    for (;;) {
      const r = await runGoGazctl(['journals', 'fragments', '-l', 'name=gprune/a', '--format', 'json'], { brokerAddress: c.brokerAddress, env: env() });
      assert.equal(r.code, 0, r.stderr);
      if ((r.stdout.toString('utf8').match(/"backing_store"/g) ?? []).length >= 3) break;
      assert.ok(Date.now() < deadline, `our broker lists the 3 stored fragments:\n${r.stdout.toString('utf8')}`);
      await delay(200);
    }
    const dry = await runGoGazctl(['journals', 'prune', '-l', 'name=gprune/a', '--dry-run'], { brokerAddress: c.brokerAddress, env: env() });
    assert.equal(dry.code, 0, dry.stderr);
    assert.deepEqual(await listBucket(), objects.map((o) => o.key).sort(), 'a dry run deletes nothing');
    // At log level info the Go gazctl logs what it pruned.
    const r = await runGoGazctl(['journals', 'prune', '-l', 'name=gprune/a'], { brokerAddress: c.brokerAddress, env: { ...env(), LOG_LEVEL: 'info' }, timeoutMs: 60_000 });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /fragmentsPruned=2/);
    assert.deepEqual(await listBucket(), objects.filter((o) => !o.expired).map((o) => o.key), 'exactly the expired fragments are gone');
  });
});
