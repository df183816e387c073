// `shards list --lag`'s Backlog Age column against a real consumer (the reference Go
// sum-consumer by default; GAZCTL_TEST_CONSUMER picks ours): caught up it reads 0s; while the
// shard cannot commit (its recovery log is made to need two brokers of the cluster's one, so
// appends to it wait and the shard's read-through stays where its last transaction left it),
// a message published with a UUID shows an age that grows between two listings; once the log
// is writable again the shard catches up and the age is 0s again. Also `shards apply --dry-run
// -o json` on the same consumer.

import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';

import { JournalClient, appendOnce } from '../../src/lib/index.js';
import { buildUUID, clockFromTime, formatUUID, MessageFlags, newProducerID } from '../../src/lib/message/uuid.js';
import { parseGoDuration } from '../../src/lib/protocol/duration.js';
import {
  applySumAppShards,
  createSumAppJournals,
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
import { gzsOk } from '../helpers/shards.js';

let cluster: Cluster | undefined;
let group: ConsumerGroup | undefined;
let journals: JournalClient | undefined;
let layout: SumAppLayout;

/** Lag and Backlog Age cells of the one shard, from the table. */
async function lagAndAge(): Promise<{ lag: string; age: string; header: string[] }> {
  const r = await gzsOk(cluster!, group!, ['shards', 'list', '-l', 'app=age', '--lag']);
  const lines = r.stdout.toString('utf8').split('\n').filter((l) => l.startsWith('│'));
  const cells = (l: string) => l.split('│').slice(1, -1).map((c) => c.trim());
  const header = cells(lines[0]!);
  const row = cells(lines[1]!);
  return { header, lag: row[header.indexOf('LAG')]!, age: row[header.indexOf('BACKLOG AGE')]! };
}

interface LagJson {
  journal: string;
  read_through: string;
  write_head: string;
  lag: string;
  backlog_age_seconds: number | null;
  backlog_age_bound: string | null;
}

/** `shards list --lag -o json`: the lag entry of the one shard's one source. */
async function lagJson(): Promise<LagJson> {
  const r = await gzsOk(cluster!, group!, ['shards', 'list', '-l', 'app=age', '--lag', '-o', 'json']);
  const doc = JSON.parse(r.stdout.toString('utf8')) as { shards: { lag: LagJson[] }[] };
  assert.equal(doc.shards.length, 1);
  assert.equal(doc.shards[0]!.lag.length, 1);
  return doc.shards[0]!.lag[0]!;
}

/** Seconds of an age cell "<journal>:<Go duration>". */
function ageSeconds(cell: string, journal: string): number {
  assert.ok(cell.startsWith(`${journal}:`), cell);
  const text = cell.slice(journal.length + 1);
  assert.match(text, /^\d+(h|m|s)/, `an exact age, not a bound or "-": ${cell}`);
  return Number(parseGoDuration(text) / 1_000_000_000n);
}

async function setRecoveryLogReplication(n: number): Promise<void> {
  const log = layout.shards[0]!.recoveryLog;
  const listed = await journals!.list({ include: { labels: [{ name: 'name', value: log, prefix: false }] }, exclude: { labels: [] } });
  const j = listed.journals[0]!;
  await journals!.apply([{ expect_mod_revision: j.mod_revision, upsert: { ...j.spec!, replication: n }, delete: '' }]);
}

describe('shards list --lag: backlog age on a real consumer', { timeout: 180_000 }, () => {
  before(async () => {
    cluster = await startCluster({ brokers: 1 });
    group = await startConsumers(cluster, { count: 1 });
    layout = sumAppLayout({ name: 'age', shards: 1 });
    await createSumAppJournals(cluster, layout);
    await applySumAppShards(group.address, sumAppShardSpecs(layout, { hotStandbys: 0, maxTxnDurationMs: 100 }));
    await waitForShardsPrimary(group.address, [layout.shards[0]!.id], 60_000);
    journals = new JournalClient({ address: cluster.brokerAddress });
  });
  after(async () => {
    journals?.close();
    await group?.stop();
    await cluster?.stop();
  });

  test('shards apply --dry-run -o json: the plan of the shard set', async () => {
    const yaml = (await gzsOk(cluster!, group!, ['shards', 'list', '-l', 'app=age', '-o', 'yaml'])).stdout.toString('utf8');
    const r = await gzsOk(cluster!, group!, ['shards', 'apply', '--dry-run', '-o', 'json'], { input: yaml });
    const doc = JSON.parse(r.stdout.toString('utf8')) as { dry_run: boolean; applied: boolean; unchanged: number; changes: { name: string; action: string }[] };
    assert.equal(doc.dry_run, true);
    assert.equal(doc.applied, false);
    assert.deepEqual(doc.changes.map((c) => [c.name, c.action]), [[layout.shards[0]!.id, 'unchanged']]);
    assert.equal(doc.unchanged, 1);
  });

  test('0s caught up; an age that grows while the shard cannot commit; 0s again after', async (t) => {
    const source = layout.shards[0]!.sources[0]!;
    const producer = newProducerID();
    const record = (value: number) => {
      const uuid = formatUUID(buildUUID(producer, clockFromTime(Date.now()), MessageFlags.OUTSIDE_TXN));
      return Buffer.from(JSON.stringify({ UUID: uuid, key: 'k', value }) + '\n');
    };

    await appendOnce(journals!, source, [record(1)], { timeoutMs: 30_000 });
    let cells = await pollUntil('the shard catches up', async () => {
      const c = await lagAndAge();
      return c.lag === `${source}:0` ? c : undefined;
    }, { timeoutMs: 60_000, intervalMs: 300 });
    assert.deepEqual(cells.header.slice(-2), ['LAG', 'BACKLOG AGE']);
    assert.equal(cells.age, `${source}:0s`);

    // The shard can no longer commit a transaction: its read-through stays put.
    await setRecoveryLogReplication(2);
    const publishedAt = Date.now();
    await appendOnce(journals!, source, [record(2)], { timeoutMs: 30_000 });
    cells = await pollUntil('the lag shows', async () => {
      const c = await lagAndAge();
      return c.lag !== `${source}:0` ? c : undefined;
    }, { timeoutMs: 60_000, intervalMs: 300 });
    const first = ageSeconds(cells.age, source);
    const firstAt = Date.now();
    assert.ok(first <= Math.ceil((firstAt - publishedAt) / 1000) + 1, `age ${first}s of a message published ${firstAt - publishedAt} ms ago`);
    // Two seconds later the same message is two seconds older.
    await sleep(2100);
    const later = await lagAndAge();
    assert.equal(later.lag, cells.lag, 'still stalled');
    const second = ageSeconds(later.age, source);
    t.diagnostic(`stalled: lag ${later.lag}, backlog age ${cells.age}, then ${later.age}`);
    // The same as JSON, for an alert.
    const json = await lagJson();
    assert.equal(json.journal, source);
    assert.ok(BigInt(json.lag) > 0n && BigInt(json.write_head) - BigInt(json.read_through) === BigInt(json.lag), JSON.stringify(json));
    assert.equal(json.backlog_age_bound, 'exact');
    assert.ok(json.backlog_age_seconds! >= second, `${json.backlog_age_seconds} >= ${second}`);
    assert.ok(second >= first + 2, `the age grew: ${first}s, then ${second}s`);

    await setRecoveryLogReplication(1);
    cells = await pollUntil('the shard catches up again', async () => {
      const c = await lagAndAge();
      return c.lag === `${source}:0` ? c : undefined;
    }, { timeoutMs: 60_000, intervalMs: 300 });
    assert.equal(cells.age, `${source}:0s`);
    const caughtUp = await lagJson();
    assert.deepEqual([caughtUp.lag, caughtUp.backlog_age_seconds, caughtUp.backlog_age_bound], ['0', 0, 'exact']);
  });
});
