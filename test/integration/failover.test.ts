// Acceptance: appends and reads ride out the failover of a journal's primary.
//
// Four Go brokers, a journal with replication 3. Its primary is killed (SIGKILL: its etcd lease
// and so its assignments linger until the lease expires) and at once `gazctl journals append` and
// `gazctl journals read` start through a surviving broker. Until the lease expires, the route
// still names the dead primary: the broker we reach cannot dial it, so the append is refused
// before any broker could commit it and must be retried, with a warning saying what it waits
// for. Both commands must finish within --timeout, and the journal must then hold every byte
// exactly once.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { startCluster, waitForJournalsAssigned, type Cluster } from '../../src/testing/index.js';
import { describeResult, spawnGazctl } from '../helpers/cli.js';
import { gzOk, sha256, tempDir } from '../helpers/journals.js';

const JOURNAL = 'failover/data';
const SPEC = `name: ${JOURNAL}
replication: 3
fragment:
  length: 1048576
  compression_codec: NONE
  stores:
  - file:///
  refresh_interval: 1s
`;

describe('journal primary failover (acceptance, 4 Go brokers)', { timeout: 240_000 }, () => {
  let cluster: Cluster;
  let dir: string;
  let cleanupDir = () => {};

  before(async () => {
    // A short etcd lease, so the dead primary's assignments expire soon.
    cluster = await startCluster({ brokers: 4, brokerArgs: ['--etcd.lease=3s'] });
    ({ dir, cleanup: cleanupDir } = tempDir('gazctl-failover-'));
    await gzOk(cluster, ['journals', 'apply'], { input: SPEC });
    await waitForJournalsAssigned(cluster, [JOURNAL], 30_000);
  });
  after(async () => {
    await cluster?.stop();
    cleanupDir();
  });

  /**
   * Kills the journal's primary, then at once appends and reads through a broker outside the
   * journal's route (which must proxy both). `extra` adds flags to both commands.
   */
  async function failover(name: string, extra: string[]): Promise<void> {
    const journal = `failover/${name}`;
    await gzOk(cluster, ['journals', 'apply'], { input: SPEC.replace(`name: ${JOURNAL}`, `name: ${journal}`) });
    const assigned = await waitForJournalsAssigned(cluster, [journal], 30_000);
    const running = cluster.brokers.findIndex((_, i) => cluster.isRunning(i));
    const env = (i: number) => ({ BROKER_ADDRESS: cluster.brokers[i]!.endpoint });
    const before = randomBytes(256 * 1024);
    const appended = randomBytes(512 * 1024);
    const beforePath = join(dir, `${name}-before`);
    const appendPath = join(dir, `${name}-append`);
    writeFileSync(beforePath, before);
    writeFileSync(appendPath, appended);
    await gzOk(cluster, ['journals', 'append', '-l', `name=${journal}`, '-i', beforePath], { env: env(running) });

    // The primary, a replica that survives, and the one broker outside the route.
    const route = assigned.get(journal)!.route!;
    assert.equal(route.members.length, 3, `route ${JSON.stringify(route)}`);
    const members = new Set(route.members.map((m) => m.suffix));
    const pi = cluster.brokers.findIndex((b) => b.id === route.members[route.primary]?.suffix);
    const replica = cluster.brokers.findIndex((b, i) => i !== pi && members.has(b.id));
    const via = cluster.brokers.findIndex((b, i) => cluster.isRunning(i) && !members.has(b.id));
    assert.ok(pi >= 0 && replica >= 0 && via >= 0, `route ${JSON.stringify(route)}`);
    await cluster.stopBroker(pi, { graceful: false });

    const appendArgs = ['journals', 'append', '-l', `name=${journal}`, '-i', appendPath, '--timeout', '60s', ...extra];
    const readArgs = ['journals', 'read', '-l', `name=${journal}`, '--timeout', '60s', ...extra];
    const app = spawnGazctl(appendArgs, { env: env(via), timeoutMs: 120_000 });
    const rd = spawnGazctl(readArgs, { env: env(via), timeoutMs: 120_000 });
    const [a, r] = await Promise.all([app.result, rd.result]);
    assert.equal(a.code, 0, describeResult(appendArgs, a));
    assert.equal(r.code, 0, describeResult(readArgs, r));
    assert.match(a.stderr, /waiting for the journal's primary broker to become reachable, or to be replaced/, describeResult(appendArgs, a));
    if (process.env.GAZCTL_TEST_BROKER === 'ts' && extra.length === 0) {
      // Our broker forwards a read it cannot reach the dead primary for to a live replica, so the
      // client never has to wait: a read needs no primary.
      assert.doesNotMatch(r.stderr, /read failure/, describeResult(readArgs, r));
    }

    // The concurrent read saw at least what was there before, and nothing but a prefix of the whole.
    const whole = Buffer.concat([before, appended]);
    assert.ok(r.stdout.length >= before.length, describeResult(readArgs, r));
    assert.ok(whole.subarray(0, r.stdout.length).equals(r.stdout), 'the concurrent read is a prefix of the journal');

    // Read back from a replica that held the journal throughout. (The broker that replaced the
    // primary joined the route after the first bytes were written: it serves them only once they
    // are persisted to the store, and a read there jumps over what it does not have yet.)
    const final = await gzOk(cluster, ['journals', 'read', '-l', `name=${journal}`], { env: env(replica), timeoutMs: 60_000 });
    assert.equal(final.stdout.length, whole.length, 'every byte exactly once');
    assert.equal(sha256(final.stdout), sha256(whole));

    // Bring the killed broker back for the next case.
    await cluster.restartBroker(pi);
  }

  test('append and read started right after kill -9 of the primary both finish, every byte exactly once', async () => {
    await failover('proxied', []);
  });

  test('the same with a route cache: the client dials the dead primary itself first', async () => {
    await failover('routed', ['--broker.cache.size', '16']);
  });
});
