// The replica lifecycle and transaction loop of our consumer runtime, on real brokers and etcd,
// with a host built here (no consumer process, no allocator: the test writes the assignment
// keys and hands them to the replicas). A Go sum-consumer writes a shard's recovery log first
// and is killed (-9); our replica recovers that log (BACKFILL → STANDBY → PRIMARY), consumes
// records appended afterwards and commits them; a second replica of ours, a hot standby, takes
// over once the first is closed. After each step the shard's log is played back with our
// player into a fresh directory and its state.json must hold the exact totals of the input.
import assert from 'node:assert/strict';
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { JournalClient } from '../../src/lib/index.js';
import { Keyspace } from '../../src/lib/keyspace/index.js';
import { ReplicaStatus_Code, type ShardSpec } from '../../src/lib/protocol/gen/consumer/protocol.js';
import { decodeHints, emptyHints, journalLogSource, playLog } from '../../src/lib/recoverylog/index.js';
import { hintBackupKeys, hintPrimaryKey } from '../../src/core/consumer/hints.js';
import {
  applySumAppShards,
  createSumAppJournals,
  pollUntil,
  readJsonFileState,
  runGoGazctlShards,
  startCluster,
  startConsumers,
  sumAppLayout,
  sumAppShardSpecs,
  waitForShardsPrimary,
  type Cluster,
  type ConsumerGroup,
  type SumAppLayout,
} from '../../src/testing/index.js';
import { SumLoad } from '../helpers/shards.js';
import { TestMember } from '../helpers/replica.js';

describe('consumer replica: recovery of a Go-written log, transactions, standby take-over', { timeout: 240_000 }, () => {
  let cluster: Cluster | undefined;
  let group: ConsumerGroup | undefined;
  let journals: JournalClient;
  let ks: Keyspace;
  let layout: SumAppLayout;
  let spec: ShardSpec;
  let load: SumLoad;
  const members: TestMember[] = [];
  /** The hints a's recovery stored in backup 0. */
  let recoveredByA = '';

  before(async () => {
    cluster = await startCluster({ brokers: 1 });
    group = await startConsumers(cluster, { count: 1 });
    layout = sumAppLayout({ name: 'rsum', shards: 1 });
    await createSumAppJournals(cluster, layout);
    spec = sumAppShardSpecs(layout, { hotStandbys: 0, maxTxnDurationMs: 200, hintBackups: 2 })[0]!;
    await applySumAppShards(group.address, [spec]);
    await waitForShardsPrimary(group.address, [spec.id], 60_000);
    journals = new JournalClient({ address: cluster.brokerAddress });
    ks = new Keyspace({ endpoints: cluster.etcd.endpoint });
    load = new SumLoad(journals, layout);
  });

  after(async () => {
    for (const m of members) await m.close().catch(() => undefined);
    journals?.close();
    ks?.close();
    await group?.stop();
    await cluster?.stop();
  });

  /** Plays the shard's log (from `hints`, default: the whole log) with our player; totals and offsets must be exact. */
  async function checkLog(round: string, hints = emptyHints(layout.shards[0]!.recoveryLog)): Promise<void> {
    const dir = await mkdtemp(join(cluster!.tempDir, `play-${round}-`));
    await playLog(journalLogSource(journals, { head: 'write-head' }), hints, dir, { clearDir: true });
    const st = await readJsonFileState(dir);
    assert.deepEqual(st.state, load.expected.get(spec.id), `totals (${round})`);
    for (const j of layout.shards[0]!.sources) assert.equal(BigInt(st.offsets[j]!), load.heads.get(j), `read-through of ${j} (${round})`);
  }

  async function waitReadThrough(m: TestMember): Promise<void> {
    const want = new Map(layout.shards[0]!.sources.map((j) => [j, load.heads.get(j)!]));
    await m.replica!.waitForReadThrough(want, AbortSignal.timeout(60_000));
  }

  test('a replica recovers the log a Go sum-consumer wrote, goes PRIMARY and commits new records exactly', async () => {
    for (let i = 0; i < 4; i++) await load.round(30);
    await load.waitProcessed(group!.address);
    await group!.killConsumer(0);

    const a = new TestMember('ours-a', ks, journals, spec);
    members.push(a);
    await a.assign(0);
    await a.waitFor(ReplicaStatus_Code.PRIMARY);
    assert.deepEqual(a.statuses.slice(0, 2), [ReplicaStatus_Code.BACKFILL, ReplicaStatus_Code.PRIMARY]);
    await waitReadThrough(a);
    for (let i = 0; i < 3; i++) await load.round(25);
    await waitReadThrough(a);
    assert.deepEqual(load.errors, []);
    await checkLog('after-recovery');

    // Recovered hints went to backup 0 and play to the same totals; the primary's hints are
    // stored on the timer (300 ms here) and play too.
    const backup = await ks.get(hintBackupKeys(spec)[0]!);
    assert.ok(backup, 'backup hints stored at recovery');
    recoveredByA = backup.value.toString();
    await checkLog('from-backup-hints', decodeHints(backup.value));
    await pollUntil('primary hints', async () => ((await ks.get(hintPrimaryKey(spec))) ? true : undefined), { timeoutMs: 10_000 });
    await load.round(10);
    await waitReadThrough(a);
    await new Promise((r) => setTimeout(r, 700)); // a hints interval after the last commit
    const primary = decodeHints((await ks.get(hintPrimaryKey(spec)))!.value);
    await checkLog('from-primary-hints', primary);
  });

  test('a hot standby tails as STANDBY and takes over once the primary is closed, totals exact', async () => {
    const a = members[0]!;
    const b = new TestMember('ours-b', ks, journals, spec);
    members.push(b);
    await b.assign(1);
    await b.waitFor(ReplicaStatus_Code.STANDBY);
    assert.deepEqual(b.statuses, [ReplicaStatus_Code.BACKFILL, ReplicaStatus_Code.STANDBY]);
    await load.round(20);
    await waitReadThrough(a);

    await a.close();
    await b.assign(0);
    await b.waitFor(ReplicaStatus_Code.PRIMARY);
    // b tailed a's commits as a standby and completed recovery from the state it tailed.
    assert.ok(b.logLines.some((l) => /completing recovery .*"from":"tailed state"/.test(l)), b.logLines.join('\n'));
    await load.round(20);
    await load.round(20);
    await waitReadThrough(b);
    assert.deepEqual(load.errors, []);
    await checkLog('after-takeover');

    // b's recovery rotated a's recovered hints from backup 0 to backup 1 (in one transaction).
    const [b0, b1] = await Promise.all(hintBackupKeys(spec).map((k) => ks.get(k)));
    assert.ok(b0 && b1, 'two backups after the second recovery');
    assert.equal(b1.value.toString(), recoveredByA);
    assert.notEqual(b0.value.toString(), recoveredByA);
    assert.equal(b0.modRevision, b1.modRevision);
    await checkLog('from-b-backup-hints', decodeHints(b0.value));
  });

  test('a zombie primary is fenced: once another replica takes the log over, its next commit fails and it goes FAILED', async () => {
    const b = members[1]!;
    const c = new TestMember('ours-c', ks, journals, spec);
    members.push(c);
    // b keeps running as primary (it is not told anything) while c is made primary too.
    await c.assign(0);
    await c.waitFor(ReplicaStatus_Code.PRIMARY);
    await load.round(20);
    await waitReadThrough(c);
    await pollUntil(
      'b to fail',
      async () => (b.replica!.status().code === ReplicaStatus_Code.FAILED ? true : undefined),
      { timeoutMs: 30_000, intervalMs: 100, describe: () => b.logLines.slice(-10).join('\n') },
    );
    assert.match(b.replica!.status().errors.join('\n'), /REGISTER_MISMATCH|register/i);
    await load.round(10);
    await waitReadThrough(c);
    await checkLog('after-fencing');
    await b.close();
  });

  test('a read-through wait beyond the input is rejected when the replica closes', async () => {
    const b = members[2]!;
    const far = new Map([[layout.shards[0]!.sources[0]!, 1n << 40n]]);
    const rejected = assert.rejects(b.replica!.waitForReadThrough(far, AbortSignal.timeout(60_000)), /the replica closed/);
    await b.close();
    await rejected;
  });

  test('a Go sum-consumer takes the shard back: it plays the log our replicas wrote, totals exact', async () => {
    try {
      await group!.restartConsumer(0);
    } catch (err) {
      // On a loaded machine a Go consumer may give up dialling etcd at start-up (it allows 1 s):
      // start it once more, and only once.
      if (!/failed to build Etcd client/.test((err as Error).message)) throw err;
      await group!.restartConsumer(0);
    }
    const listed = await waitForShardsPrimary(group!.address, [spec.id], 60_000);
    for (const st of listed.get(spec.id)!.status) assert.notEqual(st.code, ReplicaStatus_Code.FAILED, st.errors.join('; '));
    await load.round(15);
    await load.waitProcessed(group!.address);
    const dir = await mkdtemp(join(cluster!.tempDir, 'go-recover-'));
    const r = await runGoGazctlShards(['shards', 'recover', '--id', spec.id, '--dir', dir], {
      consumerAddress: group!.address,
      brokerAddress: cluster!.brokerAddress,
      timeoutMs: 30_000,
    });
    assert.equal(r.code, 0, r.stderr);
    const st = await readJsonFileState(dir);
    assert.deepEqual(st.state, load.expected.get(spec.id));
    await checkLog('after-go-took-back');
  });
});
