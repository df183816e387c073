// Unassigning primaries of our consumers under load, with two members: the allocator promotes
// each shard's standby and, having no other member, gives the old primary's member a new standby
// assignment of the same shard at once. A member that sees the deletion and the new assignment in
// one view update (the slow member below; a busy process in practice) must start its replica
// over as a standby, as upstream's resolver replaces a shard whose assignment was deleted and
// re-created. Carried on as a primary, its next commit met the new primary's fenced log
// (REGISTER_MISMATCH) and wrote FAILED onto its new assignment. No shard may ever show FAILED,
// and Go gazctl `shards recover` must find exactly the input's totals.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { ShardClient, parseLabelSelector } from '../../src/lib/index.js';
import { ReplicaStatus_Code } from '../../src/lib/protocol/gen/consumer/protocol.js';
import {
  applySumAppShards,
  createSumAppJournals,
  delay,
  startCluster,
  startConsumers,
  sumAppLayout,
  sumAppShardSpecs,
  tsConsumer,
  waitForShardsPrimary,
  type Cluster,
  type ConsumerGroup,
  type SumAppLayout,
} from '../../src/testing/index.js';
import { SumsInput } from './consumer-sums.js';

describe('our consumers: primaries unassigned under load, two members', { timeout: 300_000 }, () => {
  let cluster: Cluster | undefined;
  let group: ConsumerGroup | undefined;
  let slow: ConsumerGroup | undefined;
  let layout: SumAppLayout;
  let input: SumsInput;
  const ids = () => layout.shards.map((s) => s.id);

  before(async () => {
    cluster = await startCluster({ brokers: 1 });
    // The first member allocates (the oldest member leads) and sees changes within 10 ms; the
    // second applies what it watches only every 1.5 s, so that a deleted assignment of its own and
    // the new one the leader gives it right after reach it in one update.
    group = await startConsumers(cluster, { count: 1, impl: tsConsumer, extraArgs: ['--consumer.watch-delay=10ms'] });
    slow = await startConsumers(cluster, { count: 1, impl: tsConsumer, zone: 'slow', idPrefix: 'slow', extraArgs: ['--consumer.watch-delay=1500ms'] });
    layout = sumAppLayout({ name: 'unassign', shards: 4 });
    await createSumAppJournals(cluster, layout);
    await applySumAppShards(group.address, sumAppShardSpecs(layout, { hotStandbys: 1 }));
    await waitForShardsPrimary(group.address, ids(), 60_000, { standbys: true });
    input = new SumsInput(cluster, layout, 20261207);
  });

  after(async () => {
    input?.close();
    await slow?.stop();
    await group?.stop();
    await cluster?.stop();
  });

  test('each old primary restarts as a standby: no shard ever FAILED, totals exact', async () => {
    const shards = new ShardClient({ address: group!.address });
    const failed: string[] = [];
    let stop = false;
    // Rejects as soon as a listing shows a FAILED replica, so that the waits below end at once.
    let sawFailed!: (err: Error) => void;
    const failure = new Promise<never>((_, reject) => (sawFailed = reject));
    failure.catch(() => undefined);
    const watching = (async () => {
      while (!stop) {
        try {
          for (const s of (await shards.list(parseLabelSelector(`app=${layout.name}`), { timeoutMs: 2000 })).shards) {
            for (const st of s.status) if (st.code === ReplicaStatus_Code.FAILED) failed.push(`${s.spec!.id}: ${st.errors.join('; ')}`);
          }
          if (failed.length > 0) sawFailed(new Error(`shards went FAILED:\n${failed.join('\n')}`));
        } catch {
          // retried at the next turn
        }
        await delay(100);
      }
    })();
    const settled = <T>(p: Promise<T>) => Promise.race([p, failure]);
    let appending = true;
    const load = (async () => {
      while (appending) await input.round(20);
    })();
    try {
      for (let turn = 0; turn < 4; turn++) {
        await settled(waitForShardsPrimary(group!.address, ids(), 60_000, { standbys: true }));
        // Let the primaries commit a few transactions of the load first.
        await settled(delay(400));
        await shards.unassign(ids());
      }
      await settled(waitForShardsPrimary(group!.address, ids(), 60_000, { standbys: true }));
      // The slow member applies what it watched every 1.5 s: give it two turns to show a failure.
      await settled(delay(3500));
    } finally {
      appending = false;
      await load;
      stop = true;
      await watching;
      shards.close();
    }
    assert.deepEqual(failed, [], 'shards went FAILED');
    assert.ok(input.records > 0);
    await input.waitProcessed(group!);
    await input.recoverAndCheck(group!, 'after-unassigns');
  });
});
