// The consumer harness against real Go consumers: three `sum-consumer` processes (our reference
// Go consumer app, see docs/test-consumer.md) on a three-broker cluster, four shards with one hot
// standby each. NDJSON records are appended to the shards' sources; once every shard has read
// through them, Go gazctl `shards recover` plays each shard's recovery log into a directory and
// the totals in its state.json must equal the input's exactly. Then the consumer that is primary
// of the most shards is killed (SIGKILL) while more records go in; once its shards have failed
// over, the recovered totals must again be exact (nothing lost, nothing counted twice).
import assert from 'node:assert/strict';
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { JournalClient, ShardClient, appendOnce, parseLabelSelector } from '../../src/lib/index.js';
import { ReplicaStatus_Code } from '../../src/lib/protocol/gen/consumer/protocol.js';
import {
  applySumAppShards,
  createSumAppJournals,
  readJsonFileState,
  runGoGazctlShards,
  shardPrimary,
  pollUntil,
  startCluster,
  startConsumers,
  sumAppLayout,
  sumAppShardSpecs,
  waitForShardsPrimary,
  type Cluster,
  type ConsumerGroup,
  type SumAppLayout,
} from '../../src/testing/index.js';
import { lcg } from '../helpers/random.js';

const KEYS = ['apple', 'banana', 'cherry', 'date', 'elder'];

describe('shards harness: Go sum-consumers, recover and failover', { timeout: 180_000 }, () => {
  let cluster: Cluster | undefined;
  let group: ConsumerGroup | undefined;
  let journals: JournalClient;
  let layout: SumAppLayout;
  const next = lcg(20241204);
  /** Expected totals per shard, per key. */
  const expected = new Map<string, Record<string, number>>();
  /** Write head of each source after our last append. */
  const heads = new Map<string, bigint>();

  before(async () => {
    cluster = await startCluster({ brokers: 3 });
    group = await startConsumers(cluster, { count: 3 });
    layout = sumAppLayout({ shards: 4 });
    await createSumAppJournals(cluster, layout, { replication: 2 });
    await applySumAppShards(group.address, sumAppShardSpecs(layout, { hotStandbys: 1 }));
    await waitForShardsPrimary(group.address, layout.shards.map((s) => s.id), 60_000, { standbys: true });
    journals = new JournalClient({ address: cluster.brokerAddress });
    for (const s of layout.shards) expected.set(s.id, {});
  });

  after(async () => {
    journals?.close();
    await group?.stop();
    await cluster?.stop();
  });

  /** Append `perSource` records to every source (one atomic append each), noting the totals. */
  async function appendRound(perSource: number): Promise<void> {
    await Promise.all(
      layout.shards.map(async (s) => {
        const sums = expected.get(s.id)!;
        for (const journal of s.sources) {
          const lines: string[] = [];
          for (let i = 0; i < perSource; i++) {
            const key = KEYS[next() % KEYS.length]!;
            const value = (next() % 2001) - 1000; // negative values too
            sums[key] = (sums[key] ?? 0) + value;
            lines.push(JSON.stringify({ key, value }));
          }
          const res = await appendOnce(journals, journal, [Buffer.from(lines.join('\n') + '\n')], { timeoutMs: 30_000 });
          heads.set(journal, res.commit!.end);
        }
      }),
    );
  }

  /** Wait until every shard has read through the heads of its sources (Stat with read_through). */
  async function waitProcessed(): Promise<void> {
    const shards = new ShardClient({ address: group!.address });
    try {
      await Promise.all(
        layout.shards.map((s) =>
          shards.stat(s.id, {
            readThrough: Object.fromEntries(s.sources.map((j) => [j, heads.get(j)!])),
            timeoutMs: 30_000,
          }),
        ),
      );
    } finally {
      shards.close();
    }
  }

  /** `gazctl shards recover` every shard and compare its state.json with what went in. */
  async function recoverAndCheck(round: string): Promise<void> {
    for (const s of layout.shards) {
      const dir = await mkdtemp(join(cluster!.tempDir, `recover-${round}-${s.id}-`));
      const r = await runGoGazctlShards(['shards', 'recover', '--id', s.id, '--dir', dir], {
        consumerAddress: group!.address,
        brokerAddress: cluster!.brokerAddress,
        timeoutMs: 30_000,
      });
      assert.equal(r.code, 0, `shards recover ${s.id} (${round}): exit ${r.code}${r.timedOut ? ' (timed out)' : ''}\n${r.stderr}`);
      const st = await readJsonFileState(dir);
      assert.deepEqual(st.state, expected.get(s.id), `totals of ${s.id} (${round})`);
      for (const j of s.sources) assert.equal(BigInt(st.offsets[j]!), heads.get(j), `read-through offset of ${j} (${round})`);
    }
  }

  test('recovered state.json of every shard holds the exact totals', async () => {
    await appendRound(40);
    await appendRound(40);
    await waitProcessed();
    await recoverAndCheck('first');
  });

  test('after kill -9 of a primary consumer during appends, shards fail over and totals stay exact', async () => {
    const listed = await waitForShardsPrimary(group!.address, layout.shards.map((s) => s.id), 30_000);
    const primaries = new Map<string, number>();
    for (const s of listed.values()) {
      const p = shardPrimary(s)!;
      primaries.set(p, (primaries.get(p) ?? 0) + 1);
    }
    const [victim] = [...primaries].sort((a, b) => b[1] - a[1])[0]!;
    const i = group!.indexOf(victim);
    assert.ok(i >= 0, `primary ${victim} is one of ours`);

    const appending = (async () => {
      for (let round = 0; round < 6; round++) await appendRound(15);
    })();
    await appendRound(10);
    await group!.killConsumer(i);
    await appending;
    await appendRound(10);

    // Its etcd lease expires; its standbys take over, and the shards get new standbys.
    const after = await waitForShardsPrimary(group!.address, layout.shards.map((s) => s.id), 60_000, {
      exclude: [victim],
      standbys: true,
    });
    for (const s of after.values()) {
      assert.notEqual(shardPrimary(s), victim);
      for (const st of s.status) assert.notEqual(st.code, ReplicaStatus_Code.FAILED, `${s.spec?.id}: ${st.errors.join('; ')}`);
    }
    await waitProcessed();
    await recoverAndCheck('after-failover');

    // The logs played back span several fragments (1 KiB fragments), not a single one.
    for (const s of layout.shards) {
      const frags = await journals.listFragments(s.recoveryLog);
      assert.ok(frags.length >= 2, `${s.recoveryLog} has ${frags.length} fragment(s)`);
    }
  });

  test('a shard without recovery_log_prefix is failed with an error saying why', async () => {
    const id = 'sums-no-log';
    const spec = sumAppShardSpecs(layout, { hotStandbys: 0 })[0]!;
    spec.id = id;
    spec.recovery_log_prefix = '';
    spec.hint_prefix = '';
    await applySumAppShards(group!.address, [spec]);
    const shards = new ShardClient({ address: group!.address });
    try {
      const errors = await pollUntil(
        `shard ${id} to fail`,
        async () => {
          const r = await shards.list(parseLabelSelector(`id=${id}`), { timeoutMs: 5000 });
          const st = r.shards[0]?.status.find((x) => x.code === ReplicaStatus_Code.FAILED);
          return st ? st.errors : undefined;
        },
        { timeoutMs: 30_000, intervalMs: 200 },
      );
      assert.match(errors.join('\n'), /has no recovery_log_prefix: (sum-consumer|gazette-sum) keeps its sums in a recorded JSON file/);
      // Only that shard failed: every consumer still runs, the other shards keep their primaries.
      group!.consumers.forEach((c, i) => {
        if (group!.isRunning(i)) assert.ok(c.alive?.() ?? true, `consumer ${c.id} still runs\n${c.describe?.() ?? ''}`);
      });
      await waitForShardsPrimary(group!.address, layout.shards.map((s) => s.id), 30_000);
    } finally {
      await shards.apply([{ expect_mod_revision: -1n, upsert: undefined, delete: id, primary_hints: undefined }], { timeoutMs: 10_000 });
      shards.close();
    }
  });
});
