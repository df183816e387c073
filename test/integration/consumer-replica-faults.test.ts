// Transient failures never fail a shard of our consumer runtime (issue #27's field report: a Go
// consumer failed its shard with "serveStandby failed: beginRecovery: fetching log spec: …
// Unavailable … connection reset by peer" while its broker was restarting). On two brokers with
// replicated journals: the broker the replica dials is killed (-9) while the replica recovers,
// and again while it serves as primary under load; etcd is stopped for a while as it serves. The
// replica must never go FAILED, must (re)gain PRIMARY, and the log's totals must stay exact.
// Then the failures that are not transient: a recovery log without its content-type label and
// an application that throws fail the shard with the error.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { JournalClient } from '../../src/lib/index.js';
import { Keyspace } from '../../src/lib/keyspace/index.js';
import { ReplicaStatus_Code, type ShardSpec } from '../../src/lib/protocol/gen/consumer/protocol.js';
import type { Application } from '../../src/core/consumer/app.js';
import { createSumAppJournals, pollUntil, startCluster, sumAppLayout, sumAppShardSpecs, type Cluster, type SumAppLayout } from '../../src/testing/index.js';
import { SumLoad } from '../helpers/shards.js';
import { TestMember, checkLog, waitReadThrough } from '../helpers/replica.js';

describe('consumer replica: transient failures never fail a shard', { timeout: 240_000 }, () => {
  let cluster: Cluster | undefined;
  let journals: JournalClient;
  let ks: Keyspace;
  let layout: SumAppLayout;
  let spec: ShardSpec;
  let load: SumLoad;
  const members: TestMember[] = [];
  // Keeps the event loop alive while a test waits on signals only (AbortSignal.timeout and
  // grpc-js's reconnect timers do not hold it).
  let keepAlive: NodeJS.Timeout | undefined;

  before(async () => {
    keepAlive = setInterval(() => undefined, 1000);
    cluster = await startCluster({ brokers: 2 });
    layout = sumAppLayout({ name: 'fsum', shards: 1 });
    // Fragments roll at 1 KiB; a restarted broker lists the persisted ones every 2 s.
    await createSumAppJournals(cluster, layout, { replication: 2, refreshIntervalSec: 2 });
    spec = sumAppShardSpecs(layout, { hotStandbys: 0, maxTxnDurationMs: 200 })[0]!;
    // The client dials broker 0: the one killed below.
    journals = new JournalClient({ address: cluster.brokerAddress });
    ks = new Keyspace({ endpoints: cluster.etcd.endpoint });
    load = new SumLoad(journals, layout);
  });

  after(async () => {
    clearInterval(keepAlive);
    for (const m of members) await m.close().catch(() => undefined);
    journals?.close();
    ks?.close();
    await cluster?.stop();
  });

  const noFailure = (m: TestMember) =>
    assert.ok(!m.statuses.includes(ReplicaStatus_Code.FAILED), `${m.name} went FAILED: ${m.replica?.status().errors.join('; ')}\n${m.logLines.join('\n')}`);

  test('kill -9 of the dialled broker while the replica recovers: it retries and becomes PRIMARY', async () => {
    for (let i = 0; i < 3; i++) await load.round(30);
    const a = new TestMember('ours-a', ks, journals, spec);
    members.push(a);
    await cluster!.stopBroker(0, { graceful: false, releaseLease: true });
    await a.assign(0);
    // Unrouted calls (the log's spec, listing a source) go to the dialled address, as upstream's
    // do: recovery cannot complete until a broker answers there, and it must not fail meanwhile.
    await new Promise((r) => setTimeout(r, 4000));
    noFailure(a);
    assert.equal(a.replica!.status().code, ReplicaStatus_Code.BACKFILL);
    await cluster!.restartBroker(0);
    await a.waitFor(ReplicaStatus_Code.PRIMARY);
    noFailure(a);
    await waitReadThrough(a, layout, load);
    await load.round(20);
    await waitReadThrough(a, layout, load);
    noFailure(a);
    await checkLog(journals, cluster!.tempDir, layout, load, 'after-recovery-kill');
  });

  test('kill -9 of the dialled broker under load while PRIMARY: still PRIMARY, totals exact', async () => {
    const a = members[0]!;
    load.start(10, 50);
    await new Promise((r) => setTimeout(r, 500));
    await cluster!.stopBroker(0, { graceful: false, releaseLease: true });
    await new Promise((r) => setTimeout(r, 1500));
    await cluster!.restartBroker(0);
    await new Promise((r) => setTimeout(r, 500));
    await load.stop();
    // Appends that failed while the broker was gone are not in the input (SumLoad counts only
    // committed appends), so the expected totals stay those of what the journals hold.
    await waitReadThrough(a, layout, load);
    noFailure(a);
    assert.equal(a.replica!.status().code, ReplicaStatus_Code.PRIMARY);
    await checkLog(journals, cluster!.tempDir, layout, load, 'after-primary-kill');
  });

  test('a recovery log without the recovery-log content type fails the shard with the reason', async () => {
    const bad = { ...spec, id: 'fsum-badlog', recovery_log_prefix: 'fsum/input' };
    // Its "log" is fsum/input/fsum-badlog: create it as an NDJSON journal.
    await journals.apply([
      {
        expect_mod_revision: 0n,
        delete: '',
        upsert: { ...(await journals.list({ include: undefined, exclude: undefined })).journals.find((j) => j.spec?.name === layout.shards[0]!.sources[0])!.spec!, name: 'fsum/input/fsum-badlog' },
      },
    ]);
    const m = new TestMember('ours-bad', ks, journals, bad);
    members.push(m);
    await m.assign(0);
    await pollUntil('the shard to fail', async () => (m.replica!.status().code === ReplicaStatus_Code.FAILED ? true : undefined), { timeoutMs: 30_000, intervalMs: 100, describe: () => m.logLines.join('\n') });
    assert.match(m.replica!.status().errors[0]!, /expected label content-type value application\/x-gazette-recoverylog \(got application\/x-ndjson\)/);
    await m.close();
  });

  test('a shard without a recovery log goes STANDBY, then PRIMARY; an application error fails it with the error text', async () => {
    // An application with a store of its own (nothing recorded) that refuses every message.
    const failing: Application = {
      newStore: () => ({
        restoreCheckpoint: async () => ({ sources: {}, ack_intents: {} }),
        startCommit: async () => undefined,
        destroy: () => undefined,
      }),
      newMessage: () => ({ framing: 'lines', decode: (b: Buffer) => b, uuid: () => new Uint8Array(16) }),
      consume: () => {
        throw new Error('the application refuses this record');
      },
      finalizeTxn: () => undefined,
    };
    const m = new TestMember('ours-app', ks, journals, { ...spec, id: 'fsum-nolog', recovery_log_prefix: '', hint_prefix: '' }, failing);
    members.push(m);
    await m.assign(0);
    await pollUntil('the shard to fail', async () => (m.replica!.status().code === ReplicaStatus_Code.FAILED ? true : undefined), { timeoutMs: 30_000, intervalMs: 100, describe: () => m.logLines.join('\n') });
    assert.deepEqual(m.statuses, [ReplicaStatus_Code.STANDBY, ReplicaStatus_Code.PRIMARY, ReplicaStatus_Code.FAILED]);
    assert.match(m.replica!.status().errors[0]!, /^servePrimary: runTransactions: .*the application refuses this record/);
    await m.close();
  });

  test('etcd stopped for 3 s while PRIMARY under load: hints and status writes wait, the shard keeps serving', async () => {
    const a = members[0]!;
    load.start(10, 50);
    await cluster!.etcd.halt('SIGKILL');
    // Shorter than the brokers' 5 s lease: Go brokers exit once theirs expires.
    await new Promise((r) => setTimeout(r, 3000));
    await cluster!.etcd.resume();
    await load.stop();
    await cluster!.waitReady(30_000);
    await waitReadThrough(a, layout, load);
    noFailure(a);
    assert.equal(a.replica!.status().code, ReplicaStatus_Code.PRIMARY);
    await checkLog(journals, cluster!.tempDir, layout, load, 'after-etcd-outage');
    assert.ok(a.logLines.some((l) => /failed to store recorded hints \(will retry\)/.test(l)), 'hints were attempted while etcd was down');
    await a.close();
  });
});
