// End-to-end check of the local-cluster harness: a real etcd and three brokers (the reference Go
// broker unless GAZCTL_TEST_BROKER says otherwise), driven with the reference Go gazctl.

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';

import {
  getKey,
  liveChildPids,
  pidAlive,
  rangePrefix,
  runGoGazctl,
  startCluster,
  waitForJournalsAssigned,
  type Cluster,
} from '../../src/testing/index.js';

const JOURNALS = ['harness/a', 'harness/b'];

const SPECS = `name: harness/
replication: 3
labels:
- name: app
  value: harness
fragment:
  length: 1048576
  compression_codec: NONE
  stores:
  - file:///
  refresh_interval: 1m
children:
- name: harness/a
- name: harness/b
`;

async function gazctl(cluster: Cluster, args: string[], input?: string): Promise<Buffer> {
  const r = await runGoGazctl(args, { brokerAddress: cluster.brokerAddress, input, timeoutMs: 20_000 });
  assert.equal(r.code, 0, `gazctl ${args.join(' ')} failed (code ${r.code}):\n${r.stderr}`);
  return r.stdout;
}

async function readAll(cluster: Cluster, journal: string): Promise<string> {
  const out = await gazctl(cluster, ['journals', 'read', '-l', `name=${journal}`]);
  return out.toString('utf8');
}

describe('local cluster harness', { timeout: 90_000 }, () => {
  let cluster: Cluster | undefined;
  const pids: number[] = [];
  let tempDir = '';
  let startMs = 0;

  before(async () => {
    const t0 = Date.now();
    cluster = await startCluster({ brokers: 3 });
    startMs = Date.now() - t0;
    tempDir = cluster.tempDir;
    pids.push(cluster.etcd.process.pid);
  });
  after(() => cluster?.stop());

  test('starts etcd and three announced brokers', async (t) => {
    const c = cluster!;
    t.diagnostic(`startCluster({brokers: 3}) took ${startMs} ms`);
    assert.equal(c.brokers.length, 3);
    assert.match(c.etcd.endpoint, /^http:\/\/127\.0\.0\.1:\d+$/);
    const members = await rangePrefix(c.etcd.endpoint, '/gazette/cluster/members/');
    assert.deepEqual(
      members.map((m) => m.key),
      ['broker-0', 'broker-1', 'broker-2'].map((id) => `/gazette/cluster/members/local#${id}`),
    );
    for (const b of c.brokers) {
      assert.match(b.endpoint, /^http:\/\/127\.0\.0\.1:\d+$/);
      if (b.pid !== undefined) pids.push(b.pid);
    }
  });

  test('applies journals, appends and reads back', async () => {
    const c = cluster!;
    await gazctl(c, ['journals', 'apply', '--specs', '-'], SPECS);
    const listed = await waitForJournalsAssigned(c, JOURNALS, 20_000);
    for (const name of JOURNALS) assert.equal(listed.get(name)?.route?.members.length, 3);

    await gazctl(c, ['journals', 'append', '-l', 'name=harness/a'], 'hello from the harness\n');
    await gazctl(c, ['journals', 'append', '-l', 'name=harness/b'], 'second journal\n');
    assert.equal(await readAll(c, 'harness/a'), 'hello from the harness\n');
    assert.equal(await readAll(c, 'harness/b'), 'second journal\n');
  });

  test('a restarted broker rejoins and the data still reads back', async (t) => {
    const c = cluster!;
    const old = c.brokers[1]!;
    const t0 = Date.now();
    await c.restartBroker(1); // kill, release its lease, start with the same id and port, waitReady
    t.diagnostic(`restart + ready took ${Date.now() - t0} ms`);
    const now = c.brokers[1]!;
    assert.equal(now.id, old.id);
    assert.equal(now.endpoint, old.endpoint);
    if (old.pid !== undefined) assert.equal(pidAlive(old.pid), false, 'old broker process is gone');
    if (now.pid !== undefined) {
      assert.notEqual(now.pid, old.pid);
      pids.push(now.pid);
    }
    await c.waitReady();
    const t1 = Date.now();
    await waitForJournalsAssigned(c, JOURNALS, 20_000);
    t.diagnostic(`journals assigned and consistent ${Date.now() - t1} ms after ready`);
    assert.equal(await readAll(c, 'harness/a'), 'hello from the harness\n');
    // Appends keep working across the restart.
    await gazctl(c, ['journals', 'append', '-l', 'name=harness/a'], 'after restart\n');
    assert.equal(await readAll(c, 'harness/a'), 'hello from the harness\nafter restart\n');
  });

  test("a killed broker's member key and assignments expire with its short lease", async (t) => {
    const c = cluster!;
    const key = c.memberKey(2);
    const t0 = Date.now();
    await c.stopBroker(2, { graceful: false });
    assert.equal(c.isRunning(2), false);
    assert.ok(await getKey(c.etcd.endpoint, key), 'member key outlives the killed process');
    while (await getKey(c.etcd.endpoint, key)) {
      assert.ok(Date.now() - t0 < 15_000, 'member key expired within 15 s');
      await new Promise((r) => setTimeout(r, 100));
    }
    t.diagnostic(`member key expired ${Date.now() - t0} ms after the kill`);
    const assigned = await rangePrefix(c.etcd.endpoint, '/gazette/cluster/assign/');
    assert.equal(assigned.filter((kv) => kv.key.includes('#broker-2#')).length, 0);
    // With the broker gone, a route of 3 can't be had; bring it back and reads still work.
    await c.restartBroker(2);
    const b = c.brokers[2]!;
    if (b.pid !== undefined) pids.push(b.pid);
    await waitForJournalsAssigned(c, JOURNALS, 20_000);
    assert.equal(await readAll(c, 'harness/b'), 'second journal\n');
  });

  test('stop() kills every child and removes the temp dir', async () => {
    const c = cluster!;
    assert.ok(existsSync(tempDir));
    await c.stop();
    for (const pid of pids) assert.equal(pidAlive(pid), false, `pid ${pid} still alive after stop()`);
    assert.deepEqual(liveChildPids(), [], 'no managed child process left');
    assert.equal(existsSync(tempDir), false, 'temp dir removed');
    await c.stop(); // idempotent
  });
});
