// Issue #27's acceptance on our own consumer processes (bin/gazette-sum.js, the sum app on
// runConsumer): three members, eight shards with one hot standby each, on real brokers (Go, or
// ours with GAZCTL_TEST_BROKER=ts) and a real etcd. After each disturbance, Go gazctl `shards
// recover` of every shard must give a state.json with exactly the totals and offsets of the
// input (SumsInput): nothing lost, nothing applied twice.
//
//   * input, then recover: exact;
//   * Go gazctl shards list, apply, unassign and prune --dry-run against our consumers;
//   * kill -9 of the member holding the most primaries while records go in: its shards fail over
//     to their standbys (the time from the kill to every shard PRIMARY again is printed);
//   * kill -9 of the broker the consumers dial while every shard recovers (all primaries
//     unassigned at once): no shard is ever FAILED, all are PRIMARY again once a broker answers;
//   * etcd stopped for 15 s: no consumer exits, every shard keeps or regains PRIMARY;
//   * SIGTERM of a member: it hands its shards over and exits 0.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { ShardClient, parseLabelSelector } from '../../src/lib/index.js';
import { ReplicaStatus_Code, type ListResponse_Shard } from '../../src/lib/protocol/gen/consumer/protocol.js';
import {
  applySumAppShards,
  createSumAppJournals,
  delay,
  pollUntil,
  runGoGazctlShards,
  shardPrimary,
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

const SHARDS = 8;

describe('consumer acceptance (#27): three of our members, eight shards, one standby each', { timeout: 600_000 }, () => {
  let cluster: Cluster | undefined;
  let group: ConsumerGroup | undefined;
  let layout: SumAppLayout;
  let input: SumsInput;
  const ids = () => layout.shards.map((s) => s.id);

  before(async () => {
    // Brokers get a 30 s lease: Go brokers exit once their lease lapses, and the etcd outage
    // below (15 s) is about the consumers (whose lease stays the harness's 5 s), not the brokers.
    cluster = await startCluster({ brokers: 3, brokerArgs: ['--etcd.lease=30s'] });
    group = await startConsumers(cluster, { count: 3, impl: tsConsumer, extraArgs: ['--consumer.watch-delay=10ms'] });
    layout = sumAppLayout({ shards: SHARDS });
    await createSumAppJournals(cluster, layout, { replication: 2 });
    await applySumAppShards(group.address, sumAppShardSpecs(layout, { hotStandbys: 1 }));
    await waitForShardsPrimary(group.address, ids(), 60_000, { standbys: true });
    input = new SumsInput(cluster, layout, 20261206);
  });

  after(async () => {
    input?.close();
    await group?.stop();
    await cluster?.stop();
  });

  /** Every List answer while `fn` runs; rejects if any shows a FAILED replica. */
  async function neverFailed<T>(what: string, fn: () => Promise<T>): Promise<T> {
    const shards = new ShardClient({ address: group!.address });
    let stop = false;
    const failed: string[] = [];
    const watching = (async () => {
      while (!stop) {
        try {
          for (const s of (await shards.list(parseLabelSelector(`app=${layout.name}`), { timeoutMs: 2000 })).shards) {
            for (const st of s.status) if (st.code === ReplicaStatus_Code.FAILED) failed.push(`${s.spec!.id}: ${st.errors.join('; ')}`);
          }
        } catch {
          // a consumer restarting, etcd away: List is retried at the next turn
        }
        await delay(200);
      }
    })();
    try {
      return await fn();
    } finally {
      stop = true;
      await watching;
      shards.close();
      assert.deepEqual(failed, [], `${what}: shards went FAILED`);
    }
  }

  test('input is summed exactly (Go gazctl shards recover of every shard)', async () => {
    await input.round(30);
    await input.round(30);
    await input.waitProcessed(group!);
    await input.recoverAndCheck(group!, 'first');
  });

  test('Go gazctl shards list, apply, unassign and prune --dry-run work against our consumers', async () => {
    const opts = { consumerAddress: group!.address, brokerAddress: cluster!.brokerAddress, timeoutMs: 30_000 };
    const list = await runGoGazctlShards(['shards', 'list', '-l', `app=${layout.name}`, '-o', 'yaml'], opts);
    assert.equal(list.code, 0, list.stderr);
    const yaml = list.stdout.toString();
    for (const id of ids()) assert.match(yaml, new RegExp(`id: ${id}\\b`));
    // Applying what was listed (with its revisions) changes nothing, and succeeds.
    const apply = await runGoGazctlShards(['shards', 'apply'], { ...opts, input: yaml });
    assert.equal(apply.code, 0, apply.stderr);
    // Primary of one shard unassigned: the allocator promotes its standby.
    const one = ids()[0]!;
    const before = (await waitForShardsPrimary(group!.address, [one], 30_000)).get(one)!;
    const unassign = await runGoGazctlShards(['shards', 'unassign', '-l', `id=${one}`], opts);
    assert.equal(unassign.code, 0, unassign.stderr);
    await pollUntil(
      `${one} to have a new primary`,
      async () => {
        const s = (await waitForShardsPrimary(group!.address, [one], 30_000, { standbys: true })).get(one)!;
        return shardPrimary(s) !== shardPrimary(before);
      },
      { timeoutMs: 30_000 },
    );
    const prune = await runGoGazctlShards(['shards', 'prune', '-l', `app=${layout.name}`, '--dry-run'], opts);
    assert.equal(prune.code, 0, prune.stderr);
    await input.round(5);
    await input.waitProcessed(group!);
    await input.recoverAndCheck(group!, 'go-gazctl');
  });

  test('kill -9 of a member under load: its shards fail over to their standbys, totals exact', async () => {
    const listed = await waitForShardsPrimary(group!.address, ids(), 30_000, { standbys: true });
    const primaries = new Map<string, number>();
    for (const s of listed.values()) primaries.set(shardPrimary(s)!, (primaries.get(shardPrimary(s)!) ?? 0) + 1);
    const [victim] = [...primaries].sort((a, b) => b[1] - a[1])[0]!;
    const i = group!.indexOf(victim);
    const appending = (async () => {
      for (let r = 0; r < 6; r++) await input.round(10);
    })();
    await input.round(10);
    const killedAt = Date.now();
    await group!.killConsumer(i);
    await appending;
    const afterKill = await waitForShardsPrimary(group!.address, ids(), 60_000, { exclude: [victim] });
    const failoverMs = Date.now() - killedAt;
    for (const s of afterKill.values()) assert.notEqual(shardPrimary(s), victim);
    process.stdout.write(`# failover: kill -9 of ${victim} (${primaries.get(victim)} primaries) to every shard PRIMARY again: ${failoverMs} ms (lease 5s)\n`);
    await input.round(10);
    await input.waitProcessed(group!);
    await input.recoverAndCheck(group!, 'after-kill');
    await group!.restartConsumer(i);
    await waitForShardsPrimary(group!.address, ids(), 60_000, { standbys: true });
  });

  test('kill -9 of the broker the consumers dial while every shard recovers: none goes FAILED', async () => {
    await neverFailed('broker killed during recovery', async () => {
      // Every primary unassigned at once: each standby completes its recovery and takes over,
      // and each shard gets a new standby, which plays its log from the start.
      const shards = new ShardClient({ address: group!.address });
      try {
        await shards.unassign(ids());
      } finally {
        shards.close();
      }
      await cluster!.stopBroker(0, { graceful: false });
      await delay(3000);
      await cluster!.restartBroker(0);
      await waitForShardsPrimary(group!.address, ids(), 90_000, { standbys: true });
    });
    await input.round(10);
    await input.waitProcessed(group!);
    await input.recoverAndCheck(group!, 'after-broker-kill');
  });

  test('etcd stopped for 15 s: no consumer exits, every shard keeps or regains PRIMARY', async () => {
    await cluster!.etcd.halt();
    await delay(15_000);
    await cluster!.etcd.resume();
    for (let i = 0; i < 3; i++) assert.ok(group!.consumers[i]!.alive?.() ?? true, `consumer ${i} still running`);
    await neverFailed('after the etcd outage', async () => {
      await waitForShardsPrimary(group!.address, ids(), 90_000, { standbys: true });
      await input.round(5);
      await input.waitProcessed(group!);
    });
    for (let i = 0; i < 3; i++) assert.ok(group!.consumers[i]!.alive?.() ?? true, `consumer ${i} still running`);
    await input.recoverAndCheck(group!, 'after-etcd-outage');
  });

  test('SIGTERM: a member hands its shards over and exits 0', async () => {
    const listed = await waitForShardsPrimary(group!.address, ids(), 30_000, { standbys: true });
    const victim = shardPrimary([...listed.values()][0] as ListResponse_Shard)!;
    const i = group!.indexOf(victim);
    await group!.stopConsumer(i, { graceful: true, timeoutMs: 60_000 });
    assert.equal(group!.consumers[i]!.exitCode?.(), 0, 'exited by itself with 0 after SIGTERM (not killed after the timeout)');
    const after = await waitForShardsPrimary(group!.address, ids(), 30_000, { exclude: [victim] });
    for (const s of after.values()) assert.ok(!s.route!.members.some((m) => m.suffix === victim), `${s.spec!.id} no longer on ${victim}`);
    await input.round(5);
    await input.waitProcessed(group!);
    await input.recoverAndCheck(group!, 'after-sigterm');
  });
});
