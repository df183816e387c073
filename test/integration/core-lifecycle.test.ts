// Our brokers' lifecycle on a real etcd: SIGTERM hands a broker's journals off before it exits,
// and a broker paused past its etcd lease (SIGSTOP) neither exits nor loses acknowledged data:
// on SIGCONT it registers again and rejoins.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { getKey, pidAlive, rangePrefix, runGoGazctl, startCluster, tsBroker, waitForJournalsAssigned, type Cluster } from '../../src/testing/index.js';
import { gzOk } from '../helpers/journals.js';

async function goOk(cluster: Cluster, args: string[], input?: string): Promise<string> {
  const r = await runGoGazctl(args, { brokerAddress: cluster.brokerAddress, input, timeoutMs: 30_000 });
  assert.equal(r.code, 0, `Go gazctl ${args.join(' ')} failed (code ${r.code}):\n${r.stderr}`);
  return r.stdout.toString('utf8');
}

async function until(what: string, timeoutMs: number, fn: () => Promise<boolean> | boolean): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await fn())) {
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('lifecycle of our brokers (four, replication 3)', { timeout: 240_000 }, () => {
  let cluster: Cluster | undefined;

  before(async () => {
    cluster = await startCluster({ brokers: 4, impl: tsBroker });
    await gzOk(cluster, ['journals', 'apply', '--specs', '-'], {
      input: 'name: life/\nreplication: 3\nfragment:\n  length: 4096\n  compression_codec: NONE\n  stores:\n  - file:///\n  refresh_interval: 1s\nchildren:\n- name: life/a\n- name: life/b\n',
    });
    await waitForJournalsAssigned(cluster, ['life/a', 'life/b'], 30_000);
  });
  after(() => cluster?.stop());

  test('SIGTERM: the broker drops out of every route, then exits by itself', async () => {
    const c = cluster!;
    await goOk(c, ['journals', 'append', '-l', 'name=life/a'], 'before sigterm\n');
    const listed = await waitForJournalsAssigned(c, ['life/a'], 30_000);
    const route = listed.get('life/a')!.route!;
    const victim = c.brokers.findIndex((b) => b.id === route.members[route.primary]!.suffix);
    const pid = c.brokers[victim]!.pid!;
    process.kill(pid, 'SIGTERM');
    await until('the signalled broker to exit', 60_000, () => !pidAlive(pid));
    await c.stopBroker(victim, { graceful: false }); // bookkeeping: it is gone already
    const left = await rangePrefix(c.etcd.endpoint, '/gazette/cluster/assign/');
    assert.equal(left.filter((kv) => kv.key.includes(`#${c.brokers[victim]!.id}#`)).length, 0, 'no assignment is left on the exited broker');
    assert.equal(await getKey(c.etcd.endpoint, c.memberKey(victim)), undefined, 'its member key is released');
    await waitForJournalsAssigned(c, ['life/a', 'life/b'], 30_000);
    assert.equal(await goOk(c, ['journals', 'read', '-l', 'name=life/a']), 'before sigterm\n');
    await goOk(c, ['journals', 'append', '-l', 'name=life/a'], 'after sigterm\n');
    assert.equal(await goOk(c, ['journals', 'read', '-l', 'name=life/a']), 'before sigterm\nafter sigterm\n');
  });

  test('SIGSTOP past the lease, then SIGCONT: the broker registers again and nothing is lost', async () => {
    const c = cluster!;
    const i = c.brokers.findIndex((_, j) => c.isRunning(j));
    const b = c.brokers[i]!;
    const pid = b.pid!;
    await goOk(c, ['journals', 'append', '-l', 'name=life/b'], 'before pause\n');
    const key = c.memberKey(i);
    const before = await getKey(c.etcd.endpoint, key);
    assert.ok(before);
    process.kill(pid, 'SIGSTOP');
    try {
      await until('the paused broker\'s member key to expire', 30_000, async () => (await getKey(c.etcd.endpoint, key)) === undefined);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    await until('the broker to register again', 30_000, async () => {
      const kv = await getKey(c.etcd.endpoint, key);
      return kv !== undefined && kv.lease !== before.lease;
    });
    assert.ok(pidAlive(pid), 'the broker did not exit');
    await waitForJournalsAssigned(c, ['life/a', 'life/b'], 30_000);
    await goOk(c, ['journals', 'append', '-l', 'name=life/b'], 'after pause\n');
    assert.equal(await goOk(c, ['journals', 'read', '-l', 'name=life/b']), 'before pause\nafter pause\n');
  });
});
