// Our consumer process on real etcd and brokers, its parts on their own: a skeleton application
// (test/integration/fixtures/skeleton-consumer.ts) that the runtime never calls here, so what is
// proved is the process — membership under a lease, the shared allocation loop with the
// consumer's rules, the consumer.Shard service (List, Apply, Stat, GetHints, Unassign), and Go
// gazctl's shards commands against it. The replica lifecycle and the sum app are proved by the
// consumer-* acceptance tests.
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';

import { ShardClient, parseLabelSelector } from '../../src/lib/index.js';
import { Status as ConsumerStatus } from '../../src/lib/protocol/gen/consumer/protocol.js';
import {
  applySumAppShards,
  createSumAppJournals,
  getKey,
  nodeConsumerImpl,
  pollUntil,
  runGoGazctlShards,
  startCluster,
  startConsumers,
  sumAppLayout,
  sumAppShardSpecs,
  type Cluster,
  type ConsumerGroup,
  type SumAppLayout,
} from '../../src/testing/index.js';

const skeleton = nodeConsumerImpl('skeleton', fileURLToPath(new URL('./fixtures/skeleton-consumer.js', import.meta.url)));

describe('consumer process: membership, allocation and the Shard service', { timeout: 120_000 }, () => {
  let cluster: Cluster | undefined;
  let group: ConsumerGroup | undefined;
  let layout: SumAppLayout;
  let shards: ShardClient;

  before(async () => {
    cluster = await startCluster({ brokers: 1 });
    group = await startConsumers(cluster, { count: 3, impl: skeleton, extraArgs: ['--consumer.watch-delay=10ms'] });
    layout = sumAppLayout({ shards: 8 });
    await createSumAppJournals(cluster, layout);
    shards = new ShardClient({ address: group.address });
  });
  after(async () => {
    shards?.close();
    await group?.stop();
    await cluster?.stop();
  });

  test('each consumer registers a ConsumerSpec under a lease at members/<zone>#<id>', async () => {
    for (let i = 0; i < 3; i++) {
      const kv = await getKey(cluster!.etcd.endpoint, group!.memberKey(i));
      assert.ok(kv, `member key of consumer ${i}`);
      assert.notEqual(kv.lease, 0n, 'member key is under a lease');
    }
  });

  test('applied shards are allocated: a primary and one standby each, spread over the three members', async () => {
    await applySumAppShards(group!.address, sumAppShardSpecs(layout, { hotStandbys: 1 }));
    const res = await pollUntil(
      'every shard to have two assignments',
      async () => {
        const r = await shards.list(parseLabelSelector(`app=${layout.name}`));
        return r.shards.length === 8 && r.shards.every((s) => s.route?.members.length === 2 && s.route.primary !== -1) ? r : undefined;
      },
      { timeoutMs: 30_000 },
    );
    const perMember = new Map<string, number>();
    for (const s of res.shards) {
      assert.equal(s.status.length, 2, `a status per assignment of ${s.spec!.id}`);
      assert.equal(s.route!.endpoints.length, 2, 'endpoints attached');
      for (const m of s.route!.members) perMember.set(m.suffix, (perMember.get(m.suffix) ?? 0) + 1);
    }
    assert.equal(perMember.size, 3, `all members hold replicas: ${JSON.stringify([...perMember])}`);
    for (const n of perMember.values()) assert.ok(n >= 5 && n <= 6, `16 replicas spread evenly: ${JSON.stringify([...perMember])}`);
  });

  test('/debug/ready and /metrics are served on the service port', async () => {
    for (const c of group!.consumers) {
      const ready = await fetch(`${c.endpoint}/debug/ready`);
      assert.equal(ready.status, 200, `${c.id} ready`);
      const metrics = await (await fetch(`${c.endpoint}/metrics`)).text();
      assert.match(metrics, /^gazette_consumer_shards\{status="[A-Z]+"\} \d+$/m, `${c.id} reports its replicas by status`);
      assert.match(metrics, /^process_cpu_seconds_total /m);
      // The shards' publishers report their append buffers (docs/append-buffering.md).
      for (const name of ['gazette_append_bytes_total', 'gazette_append_service_memory_buffer_bytes', 'gazette_append_service_disk_buffer_bytes', 'gazette_append_service_wait_timeouts_total']) {
        assert.match(metrics, new RegExp(`^${name} \\d+$`, 'm'), `${c.id} reports ${name}`);
      }
    }
  });

  test('Go gazctl shards list reads our consumers', async () => {
    const r = await runGoGazctlShards(['shards', 'list', '-l', `app=${layout.name}`, '--format=json'], { consumerAddress: group!.address, timeoutMs: 20_000 });
    assert.equal(r.code, 0, r.stderr);
    const ids = [...String(r.stdout).matchAll(/"id":\s*"([^"]+)"/g)].map((m) => m[1]);
    for (const s of layout.shards) assert.ok(ids.includes(s.id), `${s.id} listed by Go gazctl`);
  });

  test('Apply guards on the expected mod revision; Stat and GetHints answer as upstream', async () => {
    const listed = await shards.list(parseLabelSelector(`id=${layout.shards[0]!.id}`));
    const shard = listed.shards[0]!;
    // A stale expectation fails the whole transaction.
    await assert.rejects(
      shards.apply([{ upsert: shard.spec, expect_mod_revision: shard.mod_revision - 1n, delete: "", primary_hints: undefined }]),
      /ETCD_TRANSACTION_FAILED/,
    );
    const hints = await shards.getHints(layout.shards[0]!.id);
    assert.equal(hints.status, ConsumerStatus.OK);
    assert.equal(hints.primary_hints?.hints, undefined, 'no hints stored yet');
    assert.equal(hints.backup_hints.length, shard.spec!.hint_backups, 'a slot per hint backup');
    for (const b of hints.backup_hints) assert.equal(b.hints, undefined, 'no backup hints stored yet');
    await assert.rejects(shards.getHints('no-such-shard'), /SHARD_NOT_FOUND/);
    await assert.rejects(shards.stat('no-such-shard', { retry: { maxAttempts: 1 } }), /SHARD_NOT_FOUND/);
  });

  test('Unassign (Go gazctl) removes the primary assignment, and the allocator assigns the shard again', async () => {
    const id = layout.shards[1]!.id;
    const before = (await shards.list(parseLabelSelector(`id=${id}`))).shards[0]!;
    const oldPrimary = before.route!.members[before.route!.primary]!;
    const primaryKey = `${group!.etcdPrefix}/assign/${id}#${oldPrimary.zone}#${oldPrimary.suffix}#0`;
    assert.ok(await getKey(cluster!.etcd.endpoint, primaryKey), primaryKey);
    const r = await runGoGazctlShards(['shards', 'unassign', '-l', `id=${id}`], { consumerAddress: group!.address, timeoutMs: 20_000 });
    assert.equal(r.code, 0, r.stderr);
    await pollUntil(
      'the shard to have a primary and a standby again, the primary a different assignment',
      async () => {
        const s = (await shards.list(parseLabelSelector(`id=${id}`))).shards[0]!;
        const r = s.route!;
        return r.members.length === 2 && r.primary !== -1 && s.mod_revision === before.mod_revision && r.members[r.primary]!.suffix !== oldPrimary.suffix;
      },
      { timeoutMs: 30_000 },
    );
  });
});
