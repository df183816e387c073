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

import { listJournals, startCluster, waitForJournalsAssigned, type Cluster } from '../../src/testing/index.js';
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

  test('append and read started right after kill -9 of the primary both finish, every byte exactly once', async () => {
    const env = (i: number) => ({ BROKER_ADDRESS: cluster.brokers[i]!.endpoint });
    const before = randomBytes(256 * 1024);
    const appended = randomBytes(512 * 1024);
    const beforePath = join(dir, 'before');
    const appendPath = join(dir, 'append');
    writeFileSync(beforePath, before);
    writeFileSync(appendPath, appended);
    await gzOk(cluster, ['journals', 'append', '-l', `name=${JOURNAL}`, '-i', beforePath]);

    // Find the primary, and a surviving broker to talk to.
    const listing = await listJournals(cluster.brokerAddress, { timeoutMs: 5000 });
    const route = listing.journals.find((j) => j.spec?.name === JOURNAL)!.route!;
    const primary = route.members[route.primary]!.suffix;
    const pi = cluster.brokers.findIndex((b) => b.id === primary);
    assert.ok(pi >= 0, `primary ${primary} is one of ours`);
    const via = cluster.brokers.findIndex((_, i) => i !== pi);
    await cluster.stopBroker(pi, { graceful: false });

    const appendArgs = ['journals', 'append', '-l', `name=${JOURNAL}`, '-i', appendPath, '--timeout', '60s'];
    const readArgs = ['journals', 'read', '-l', `name=${JOURNAL}`, '--timeout', '60s'];
    const app = spawnGazctl(appendArgs, { env: env(via), timeoutMs: 120_000 });
    const rd = spawnGazctl(readArgs, { env: env(via), timeoutMs: 120_000 });
    const [a, r] = await Promise.all([app.result, rd.result]);
    assert.equal(a.code, 0, describeResult(appendArgs, a));
    assert.equal(r.code, 0, describeResult(readArgs, r));
    assert.match(a.stderr, /waiting for the journal's primary broker to become reachable, or to be replaced/, describeResult(appendArgs, a));

    // The concurrent read saw at least what was there before, and nothing but a prefix of the whole.
    const whole = Buffer.concat([before, appended]);
    assert.ok(r.stdout.length >= before.length, describeResult(readArgs, r));
    assert.ok(whole.subarray(0, r.stdout.length).equals(r.stdout), 'the concurrent read is a prefix of the journal');

    const final = await gzOk(cluster, ['journals', 'read', '-l', `name=${JOURNAL}`], { env: env(via), timeoutMs: 60_000 });
    assert.equal(final.stdout.length, whole.length, 'every byte exactly once');
    assert.equal(sha256(final.stdout), sha256(whole));
  });
});
