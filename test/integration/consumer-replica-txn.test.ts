// Exactly-once sequencing in our consumer runtime: a replica of ours on a new shard (an empty
// recovery log, taken over from empty hints) reads messages our Publisher writes (committed
// transactions, an uncommitted tail acknowledged later, a sequence re-sent by a producer
// restarted from an older checkpoint, OUTSIDE_TXN messages) and its totals count each committed
// message once and nothing else. A Go sum-consumer then takes the shard over and agrees.
import assert from 'node:assert/strict';
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { JournalClient } from '../../src/lib/index.js';
import { Publisher } from '../../src/lib/client/publisher.js';
import { jsonEncoder } from '../../src/lib/message/encoder.js';
import { Keyspace } from '../../src/lib/keyspace/index.js';
import { ReplicaStatus_Code, type ShardSpec } from '../../src/lib/protocol/gen/consumer/protocol.js';
import { emptyHints, journalLogSource, playLog } from '../../src/lib/recoverylog/index.js';
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
  type SumAppLayout,
} from '../../src/testing/index.js';
import { TestMember } from '../helpers/replica.js';

type Rec = { key: string; value: number };

describe('consumer replica: exactly-once sequencing of transactional messages', { timeout: 180_000 }, () => {
  let cluster: Cluster | undefined;
  let journals: JournalClient;
  let ks: Keyspace;
  let layout: SumAppLayout;
  let spec: ShardSpec;
  let source: string;
  let member: TestMember;
  const expected: Record<string, number> = {};
  const encoder = jsonEncoder<Rec>(() => ({ key: '', value: 0 }));

  before(async () => {
    cluster = await startCluster({ brokers: 1 });
    layout = sumAppLayout({ name: 'tsum', shards: 1 });
    await createSumAppJournals(cluster, layout);
    spec = sumAppShardSpecs(layout, { hotStandbys: 0, maxTxnDurationMs: 200 })[0]!;
    source = layout.shards[0]!.sources[0]!;
    journals = new JournalClient({ address: cluster.brokerAddress });
    ks = new Keyspace({ endpoints: cluster.etcd.endpoint });
    member = new TestMember('ours', ks, journals, spec);
    await member.assign(0);
    await member.waitFor(ReplicaStatus_Code.PRIMARY);
  });

  after(async () => {
    await member?.close().catch(() => undefined);
    journals?.close();
    ks?.close();
    await cluster?.stop();
  });

  const add = (r: Rec) => (expected[r.key] = (expected[r.key] ?? 0) + r.value);

  /** Totals in the shard's log, played back with our player from the start. */
  async function totals(): Promise<unknown> {
    const dir = await mkdtemp(join(cluster!.tempDir, 'play-'));
    await playLog(journalLogSource(journals, { head: 'write-head' }), emptyHints(layout.shards[0]!.recoveryLog), dir, { clearDir: true });
    return (await readJsonFileState(dir)).state;
  }

  async function waitThrough(end: bigint): Promise<void> {
    await member.replica!.waitForReadThrough(new Map([[source, end]]), AbortSignal.timeout(30_000));
  }

  test('committed transactions count, an unacknowledged tail does not until its ACK, OUTSIDE_TXN at once', async () => {
    const pub = new Publisher(journals);
    for (let i = 0; i < 5; i++) pub.publishUncommitted(() => source, encoder, { key: 'a', value: i + 1 });
    await pub.writeAckIntents(pub.buildAckIntents());
    add({ key: 'a', value: 15 });
    add({ key: '', value: 0 }); // the ACK record, which Go's summer adds too (a zero record)

    for (let i = 0; i < 3; i++) pub.publishUncommitted(() => source, encoder, { key: 'b', value: 100 });
    // c comes from another producer: an OUTSIDE_TXN message of the same producer would end its
    // pending sequence (its clock becomes the producer's last acknowledged one, as upstream).
    const other = new Publisher(journals);
    const c = other.publishCommitted(() => source, encoder, { key: 'c', value: 7 });
    await c.committed;
    add({ key: 'c', value: 7 });
    // Once c (written after b's messages) is counted, b's were read, and must not be counted.
    await pollUntil('c to be counted', async () => ((await totals()) as Record<string, number>)['c'] === 7 ? true : undefined, { timeoutMs: 30_000, intervalMs: 200 });
    assert.deepEqual(await totals(), expected, 'b is not counted before its ACK');

    await pub.writeAckIntents(pub.buildAckIntents());
    add({ key: 'b', value: 300 });
    const end2 = pub.publishedThrough().get(source)!;
    await waitThrough(end2);
    assert.deepEqual(await totals(), expected);
  });

  test('a rolled-back sequence (a producer restarted from an older checkpoint re-sends its last ACK) is not counted', async () => {
    const pub = new Publisher(journals);
    pub.publishUncommitted(() => source, encoder, { key: 'd', value: 1 });
    const [ack] = pub.buildAckIntents();
    await pub.writeAckIntents([ack!]);
    add({ key: 'd', value: 1 });
    add({ key: '', value: 0 });
    // More uncommitted messages, then the same ACK again: the producer rolls back to its last
    // committed state, and the pending messages are discarded.
    for (let i = 0; i < 4; i++) pub.publishUncommitted(() => source, encoder, { key: 'e', value: 1000 });
    pub.buildAckIntents();
    await pub.writeAckIntents([ack!]);
    const end = pub.publishedThrough().get(source)!;
    await waitThrough(end);
    assert.deepEqual(await totals(), expected);
  });

  test('a Go sum-consumer takes the shard over from our log and continues with the same sums', async () => {
    await member.close();
    const group = await startConsumers(cluster!, { count: 1 });
    try {
      await applySumAppShards(group.address, [spec]);
      await waitForShardsPrimary(group.address, [spec.id], 60_000);
      const pub = new Publisher(journals);
      pub.publishUncommitted(() => source, encoder, { key: 'f', value: 5 });
      await pub.writeAckIntents(pub.buildAckIntents());
      add({ key: 'f', value: 5 });
      add({ key: '', value: 0 });
      const dir = await mkdtemp(join(cluster!.tempDir, 'go-recover-'));
      const { ShardClient } = await import('../../src/lib/index.js');
      const shards = new ShardClient({ address: group.address });
      try {
        await shards.stat(spec.id, { readThrough: { [source]: pub.publishedThrough().get(source)! }, timeoutMs: 30_000 });
      } finally {
        shards.close();
      }
      const r = await runGoGazctlShards(['shards', 'recover', '--id', spec.id, '--dir', dir], {
        consumerAddress: group.address,
        brokerAddress: cluster!.brokerAddress,
        timeoutMs: 30_000,
      });
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual((await readJsonFileState(dir)).state, expected);
    } finally {
      await group.stop();
    }
  });
});
