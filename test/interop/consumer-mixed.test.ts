// A mixed consumer group: the reference Go sum-consumer and our gazette-sum on one etcd prefix,
// serving the same shards (each has a replica on both: one hot standby). Shards move from the Go
// member to ours (kill -9 of the Go member: ours plays the log Go recorded and takes over) and
// back (kill -9 of ours: Go plays the log we recorded), and Go gazctl `shards recover` of every
// shard gives the exact totals after each move.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
  applySumAppShards,
  createSumAppJournals,
  goConsumer,
  shardPrimary,
  startCluster,
  startConsumers,
  sumAppLayout,
  sumAppShardSpecs,
  tsConsumer,
  waitForShardsPrimary,
  type Cluster,
  type ConsumerGroup,
  type ConsumerImpl,
  type SumAppLayout,
} from '../../src/testing/index.js';
import { SumsInput } from '../integration/consumer-sums.js';

/** consumer-0 is the Go sum-consumer, consumer-1 ours (restarts keep each one's kind). */
const mixed: ConsumerImpl = {
  name: 'mixed',
  start: (o) => (o.id === 'consumer-0' ? goConsumer : tsConsumer).start(o),
};
const GO = 'consumer-0';
const TS = 'consumer-1';

describe('mixed consumer group: Go sum-consumer and our gazette-sum serve the same shards', { timeout: 300_000 }, () => {
  let cluster: Cluster | undefined;
  let group: ConsumerGroup | undefined;
  let layout: SumAppLayout;
  let input: SumsInput;
  const ids = () => layout.shards.map((s) => s.id);

  before(async () => {
    cluster = await startCluster({ brokers: 2 });
    group = await startConsumers(cluster, { count: 2, impl: mixed });
    layout = sumAppLayout({ shards: 4 });
    await createSumAppJournals(cluster, layout, { replication: 2 });
    await applySumAppShards(group.address, sumAppShardSpecs(layout, { hotStandbys: 1 }));
    await waitForShardsPrimary(group.address, ids(), 60_000, { standbys: true });
    input = new SumsInput(cluster, layout, 27);
  });

  after(async () => {
    input?.close();
    await group?.stop();
    await cluster?.stop();
  });

  test('both kinds hold primaries and standbys; totals exact', async () => {
    const listed = await waitForShardsPrimary(group!.address, ids(), 30_000, { standbys: true });
    for (const s of listed.values()) {
      const members = s.route!.members.map((m) => m.suffix).sort();
      assert.deepEqual(members, [GO, TS], `${s.spec!.id} has a replica on each`);
    }
    await input.round(20);
    await input.waitProcessed(group!);
    await input.recoverAndCheck(group!, 'mixed');
  });

  /** kill -9 `victim`, check that every shard is served by the other, totals exact, restart it. */
  async function moveAway(victim: string, round: string): Promise<void> {
    const i = group!.indexOf(victim);
    const moving = [...(await waitForShardsPrimary(group!.address, ids(), 30_000, { standbys: true })).values()].filter((s) => shardPrimary(s) === victim).length;
    const appending = input.round(10);
    await group!.killConsumer(i);
    await appending;
    const after = await waitForShardsPrimary(group!.address, ids(), 60_000, { exclude: [victim] });
    for (const s of after.values()) assert.notEqual(shardPrimary(s), victim);
    await input.round(10);
    await input.waitProcessed(group!);
    await input.recoverAndCheck(group!, round);
    process.stdout.write(`# ${round}: ${moving} shard(s) moved off ${victim}\n`);
    await group!.restartConsumer(i);
    await waitForShardsPrimary(group!.address, ids(), 60_000, { standbys: true });
  }

  test('kill -9 of the Go member: our member takes its shards over from the logs Go recorded', async () => {
    await moveAway(GO, 'go-to-ts');
    // Every shard is now primary on ours (Go came back as standby).
    const listed = await waitForShardsPrimary(group!.address, ids(), 30_000, { standbys: true });
    for (const s of listed.values()) assert.equal(shardPrimary(s), TS);
  });

  test('kill -9 of our member: the Go member takes the shards back from the logs we recorded', async () => {
    await moveAway(TS, 'ts-to-go');
    const listed = await waitForShardsPrimary(group!.address, ids(), 30_000, { standbys: true });
    for (const s of listed.values()) assert.equal(shardPrimary(s), GO);
    await input.round(10);
    await input.waitProcessed(group!);
    await input.recoverAndCheck(group!, 'final');
  });
});
