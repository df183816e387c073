// Our consumer with a small read queue: a shard of several sources whose readers block on a
// `read_channel_size` of 4 while far more records wait in each source. The readers share the
// one queue and are woken as it drains; every record must still be consumed once, in order per
// source, so `shards recover` gives the input's exact totals and read-through offsets.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { JournalClient } from '../../src/lib/index.js';
import {
  applySumAppShards,
  createSumAppJournals,
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
import { recoverAllAndCheck, SumLoad } from '../helpers/shards.js';

describe('our consumer: several sources sharing a read queue of 4 records', { timeout: 180_000 }, () => {
  let cluster: Cluster | undefined;
  let group: ConsumerGroup | undefined;
  let journals: JournalClient | undefined;
  let layout: SumAppLayout;

  before(async () => {
    cluster = await startCluster({ brokers: 1 });
    group = await startConsumers(cluster, { count: 1, impl: tsConsumer });
    layout = sumAppLayout({ name: 'rq', shards: 2, sourcesPerShard: 4 });
    await createSumAppJournals(cluster, layout, { fragmentLength: 1n << 20n });
    journals = new JournalClient({ address: cluster.brokerAddress });
  });
  after(async () => {
    journals?.close();
    await group?.stop();
    await cluster?.stop();
  });

  test('records appended before the shards start, and while they run, are each summed once', async () => {
    const load = new SumLoad(journals!, layout, 20261206);
    // Thousands of records wait in every source before the shards exist: each reader fills the
    // queue of 4 at once and then blocks until the transaction loop drains it.
    for (let i = 0; i < 4; i++) await load.round(500);
    const specs = sumAppShardSpecs(layout, { hotStandbys: 0 }).map((s) => ({ ...s, read_channel_size: 4 }));
    await applySumAppShards(group!.address, specs);
    await waitForShardsPrimary(group!.address, layout.shards.map((s) => s.id), 60_000);
    load.start(50, 100);
    await new Promise((r) => setTimeout(r, 2000));
    await load.stop();
    await load.waitProcessed(group!.address, 120_000);
    await recoverAllAndCheck(cluster!, group!, load, 'read queue of 4');

    // The per-shard counters of completed transactions (upstream's names) account for every
    // record and byte once; messages per transaction is the batching an operator reads off them.
    const metrics = await (await fetch(`${group!.consumers[0]!.endpoint}/metrics`)).text();
    const sample = (name: string, shard: string): number => {
      const m = new RegExp(`^${name}\\{shard="${group!.etcdPrefix}/items/${shard}"\\} (\\d+)$`, 'm').exec(metrics);
      assert.ok(m, `${name} of ${shard} in /metrics`);
      return Number(m[1]);
    };
    let messages = 0;
    let bytes = 0;
    for (const s of layout.shards) {
      assert.ok(sample('gazette_shard_transactions_total', s.id) >= 1, `${s.id} completed transactions`);
      messages += sample('gazette_shard_read_messages_total', s.id);
      bytes += sample('gazette_shard_read_bytes_total', s.id);
    }
    assert.equal(messages, load.records, 'messages of completed transactions = records appended');
    assert.equal(bytes, [...load.heads.values()].reduce((a, h) => a + Number(h), 0), 'bytes of completed transactions = sources written');
  });
});
