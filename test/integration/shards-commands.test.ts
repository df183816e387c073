// Our `gazctl shards` commands end to end through the real binary, against three Go
// sum-consumers on two Go brokers: list (-p -r --rf -L --lag, -l, -o json), apply (--dry-run
// plans, --max-txn-size batches, `delete: true` under common), bad shard sets refused with one
// line and nothing applied, and `shards recover` of every shard giving the exact totals of the
// input, also after a kill -9 of a consumer while appends run.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { JournalClient } from '../../src/lib/index.js';
import { ReplicaStatus_Code } from '../../src/lib/protocol/gen/consumer/protocol.js';
import {
  applySumAppShards,
  createSumAppJournals,
  pollUntil,
  shardPrimary,
  shardReplicaCodes,
  startCluster,
  startConsumers,
  sumAppLayout,
  sumAppShardSpecs,
  waitForShardsPrimary,
  type Cluster,
  type ConsumerGroup,
  type SumAppLayout,
} from '../../src/testing/index.js';
import { describeResult } from '../helpers/cli.js';
import { oneStderrLine } from '../helpers/journals.js';
import { gzs, gzsOk, recoverAllAndCheck, SumLoad } from '../helpers/shards.js';

let cluster: Cluster | undefined;
let group: ConsumerGroup | undefined;
let journals: JournalClient | undefined;
/** Journals for six shards; only the first four exist as shards at the start. */
let layout: SumAppLayout;
let running: SumAppLayout;
/** Every record appended to the running shards' sources, over all tests. */
let load: SumLoad;
const APP = 'app=cmd';

/** The rows of a box-drawn table: header cells, then data cells, trimmed. */
function parseTable(text: string): { header: string[]; rows: string[][] } {
  const lines = text.split('\n').filter((l) => l.startsWith('│'));
  const cells = (l: string) => l.split('│').slice(1, -1).map((c) => c.trim());
  return { header: cells(lines[0]!), rows: lines.slice(1).map(cells) };
}

interface JsonShard {
  spec: { id: string; hot_standbys: number; labels: { labels: { name: string; value: string }[] }; sources: { journal: string; min_offset: string }[] };
  mod_revision: string;
  route: { members: { zone: string; suffix: string }[]; primary: number };
  status: { code: string; errors: string[] }[];
}

async function listJson(selector = APP): Promise<JsonShard[]> {
  const r = await gzsOk(cluster!, group!, ['shards', 'list', '-l', selector, '-o', 'json']);
  const doc = JSON.parse(r.stdout.toString('utf8')) as { status: string; shards?: JsonShard[] };
  assert.equal(doc.status, 'OK');
  return doc.shards ?? [];
}

/** `shards list -o yaml` of `selector` (undefined: every shard). */
async function listYaml(selector: string | undefined = APP): Promise<string> {
  return (await gzsOk(cluster!, group!, ['shards', 'list', ...(selector === undefined ? [] : ['-l', selector]), '-o', 'yaml'])).stdout.toString('utf8');
}

describe('gazctl shards commands against Go consumers', { timeout: 300_000 }, () => {
  before(async () => {
    cluster = await startCluster({ brokers: 2 });
    group = await startConsumers(cluster, { count: 3 });
    layout = sumAppLayout({ name: 'cmd', shards: 6, sourcesPerShard: 2 });
    running = { ...layout, shards: layout.shards.slice(0, 4) };
    await createSumAppJournals(cluster, layout);
    await applySumAppShards(group.address, sumAppShardSpecs(running, { hotStandbys: 1 }));
    await waitForShardsPrimary(group.address, running.shards.map((s) => s.id), 60_000, { standbys: true });
    journals = new JournalClient({ address: cluster.brokerAddress });
    load = new SumLoad(journals, running);
  });

  after(async () => {
    await load?.stop();
    journals?.close();
    await group?.stop();
    await cluster?.stop();
  });

  test('list -p -r --rf -L app --lag: statuses, members, RF, labels, and lag 0 once processed', async () => {
    await load.round(20);
    await load.waitProcessed(group!.address);
    const listed = await waitForShardsPrimary(group!.address, running.shards.map((s) => s.id), 30_000, { standbys: true });
    const args = ['shards', 'list', '-l', APP, '-p', '-r', '--rf', '-L', 'app', '--lag'];
    const r = await gzsOk(cluster!, group!, args);
    const { header, rows } = parseTable(r.stdout.toString('utf8'));
    assert.deepEqual(header, ['ID', 'STATUS', 'RF', 'PRIMARY', 'REPLICAS', 'APP', 'LAG', 'BACKLOG AGE']);
    assert.deepEqual(rows.map((row) => row[0]), running.shards.map((s) => s.id));
    for (const row of rows) {
      const [id, status, rf, primary, replicas, app, lag, age] = row as [string, string, string, string, string, string, string, string];
      const s = listed.get(id)!;
      const codes = shardReplicaCodes(s);
      assert.equal(status, 'PRIMARY', row.join(' | '));
      assert.equal(rf, '2');
      assert.equal(primary, `${shardPrimary(s)}:PRIMARY`);
      const standbys = [...codes].filter(([m]) => m !== shardPrimary(s)).map(([m, c]) => `${m}:${ReplicaStatus_Code[c]}`);
      assert.deepEqual(replicas.split(','), standbys);
      assert.equal(app, 'cmd');
      // Processed through the last append: every source (sorted by name) trails by 0 bytes.
      const sources = layout.shards.find((x) => x.id === id)!.sources;
      assert.equal(lag, sources.map((j) => `${j}:0`).join(', '), `lag cell of ${id}`);
      // Nothing unread: no backlog.
      assert.equal(age, sources.map((j) => `${j}:0s`).join(', '), `backlog age cell of ${id}`);
    }

    // More records: once processed again, the lag is 0 again and the state moved on.
    await load.round(30);
    await load.waitProcessed(group!.address);
    const again = parseTable((await gzsOk(cluster!, group!, ['shards', 'list', '-l', APP, '--lag'])).stdout.toString('utf8'));
    assert.deepEqual(again.header, ['ID', 'STATUS', 'LAG', 'BACKLOG AGE']);
    for (const row of again.rows) assert.match(row[2]!, /^cmd\/input\/part-\d{3}-0:0, cmd\/input\/part-\d{3}-1:0$/);
  });

  test('list -l id=… selects one shard; -o json is the whole List response in proto3 JSON', async () => {
    const one = parseTable((await gzsOk(cluster!, group!, ['shards', 'list', '-l', 'id=cmd-002'])).stdout.toString('utf8'));
    assert.deepEqual(one.rows.map((r) => r[0]), ['cmd-002']);

    const shards = await listJson();
    assert.deepEqual(shards.map((s) => s.spec.id), running.shards.map((s) => s.id));
    for (const s of shards) {
      assert.match(s.mod_revision, /^\d+$/, '64-bit revisions are JSON strings');
      assert.equal(s.spec.hot_standbys, 1);
      assert.deepEqual(s.spec.labels.labels.map((l) => `${l.name}=${l.value}`), ['app=cmd']);
      assert.deepEqual(s.spec.sources.map((x) => x.min_offset), ['0', '0']);
      assert.equal(s.route.members.length, 2);
      assert.equal(s.status.length, 2);
      assert.equal(s.status[s.route.primary]!.code, 'PRIMARY');
    }
  });

  test('apply --dry-run prints the plan and applies nothing; --max-txn-size 2 --parallel 1 applies in batches of 2, in order', async () => {
    const before = await listYaml();
    // Add a label to every shard (under common) and two new shards taking common's settings.
    const edited =
      before.replace('  - name: app\n    value: cmd\n', '  - name: app\n    value: cmd\n  - name: tier\n    value: gold\n') +
      layout.shards
        .slice(4)
        .map((s) => `- id: ${s.id}\n  sources:\n${s.sources.map((j) => `  - journal: ${j}\n`).join('')}`)
        .join('');
    assert.notEqual(edited, before);
    const revs = new Map((await listJson()).map((s) => [s.spec.id, s.mod_revision]));

    const plan = await gzsOk(cluster!, group!, ['shards', 'apply', '--dry-run', '--max-txn-size', '2'], { input: edited });
    const expectedPlan = [
      ...running.shards.map((s) => `update  ${s.id}  (at revision ${revs.get(s.id)})`),
      ...layout.shards.slice(4).map((s) => `create  ${s.id}`),
      '6 shard changes in 3 transactions; nothing applied (--dry-run).',
    ];
    assert.deepEqual(plan.stdout.toString('utf8').trimEnd().split('\n'), expectedPlan, describeResult(['shards', 'apply', '--dry-run'], plan));
    assert.equal(await listYaml(), before, 'a dry run applies nothing');

    // --parallel 1: the batches go one after another (by default up to 4 are in flight at once,
    // and their revisions then come in any order).
    const r = await gzsOk(cluster!, group!, ['shards', 'apply', '--max-txn-size', '2', '--parallel', '1'], { input: edited });
    const m = /^applied 6 shard changes in 3 transactions \(etcd revision (\d+)\)$/m.exec(r.stderr);
    assert.ok(m, describeResult(['shards', 'apply'], r));
    const shards = await listJson();
    assert.deepEqual(shards.map((s) => s.spec.id), layout.shards.map((s) => s.id));
    for (const s of shards) assert.deepEqual(s.spec.labels.labels.map((l) => `${l.name}=${l.value}`), ['app=cmd', 'tier=gold']);
    // Three transactions: the shards in list order share a revision two by two, the last is the reported one.
    const byRev = shards.map((s) => BigInt(s.mod_revision));
    assert.equal(byRev[0], byRev[1]);
    assert.equal(byRev[2], byRev[3]);
    assert.equal(byRev[4], byRev[5]);
    assert.ok(byRev[0]! < byRev[2]! && byRev[2]! < byRev[4]!, `three increasing revisions: ${byRev.join(' ')}`);
    assert.equal(byRev[4], BigInt(m[1]!));
    await waitForShardsPrimary(group!.address, layout.shards.map((s) => s.id), 60_000);
  });

  test('delete: true under common deletes exactly the listed shards', async () => {
    const doomed = layout.shards.slice(4).map((s) => s.id);
    const yaml = await listYaml(`id in (${doomed.join(', ')})`);
    assert.match(yaml, /^common:\n/);
    const input = yaml.replace(/^common:\n/, 'common:\n  delete: true\n');
    const plan = await gzsOk(cluster!, group!, ['shards', 'apply', '--dry-run'], { input });
    const lines = plan.stdout.toString('utf8').trimEnd().split('\n');
    assert.deepEqual(lines.slice(0, 2).map((l) => l.split(/\s+/).slice(0, 2).join(' ')), doomed.map((id) => `delete ${id}`));
    await gzsOk(cluster!, group!, ['shards', 'apply'], { input });
    assert.deepEqual((await listJson()).map((s) => s.spec.id), running.shards.map((s) => s.id), 'the other shards remain');
  });

  test('bad shard sets: one line on stderr, exit 1 or 2, nothing applied', async () => {
    const ok = `  sources:\n  - journal: cmd/input/part-000-0\n`;
    const cases: { name: string; args?: string[]; input: string; code: number; match: RegExp }[] = [
      { name: 'YAML syntax', input: 'shards: [\n', code: 1, match: /YAML/ },
      { name: 'unknown field', input: `common:\n  max_txn_duration: 1s\nshards:\n- id: cmd-bad-1\n  hot_standby: 1\n${ok}`, code: 1, match: /hot_standby/ },
      { name: 'id too short', input: `common:\n  max_txn_duration: 1s\nshards:\n- id: ab\n${ok}`, code: 1, match: /"ab"/ },
      { name: 'no max_txn_duration', input: `shards:\n- id: cmd-bad-1\n${ok}`, code: 1, match: /max_txn_duration/ },
      { name: 'missing source journal', input: `common:\n  max_txn_duration: 1s\nshards:\n- id: cmd-bad-1\n  sources:\n  - journal: cmd/input/nope\n`, code: 1, match: /cmd\/input\/nope/ },
      { name: 'source without a framing', input: `common:\n  max_txn_duration: 1s\nshards:\n- id: cmd-bad-1\n  sources:\n  - journal: cmd/recovery/cmd-000\n`, code: 1, match: /content-type/ },
      { name: 'missing recovery log', input: `common:\n  max_txn_duration: 1s\n  recovery_log_prefix: cmd/recovery\n  hint_prefix: /gazette/hints/cmd\nshards:\n- id: cmd-no-log\n${ok}`, code: 1, match: /cmd\/recovery\/cmd-no-log/ },
      // A good new shard beside a stale revision: the whole transaction is refused.
      { name: 'stale revision', input: `common:\n  max_txn_duration: 1s\nshards:\n- id: cmd-000\n  revision: 3\n${ok}- id: cmd-bad-1\n${ok}`, code: 1, match: /revision/ },
      { name: 'negative --max-txn-size', args: ['--max-txn-size', '-1'], input: '', code: 2, match: /max-txn-size/ },
    ];
    for (const c of cases) {
      const before = await listYaml(undefined);
      const args = ['shards', 'apply', ...(c.args ?? [])];
      const r = await gzs(cluster!, group!, args, { input: c.input });
      assert.equal(r.code, c.code, `${c.name}: ${describeResult(args, r)}`);
      assert.match(oneStderrLine(args, r), c.match, c.name);
      assert.equal(r.stdout.length, 0, `${c.name}: nothing on stdout`);
      assert.equal(await listYaml(undefined), before, `${c.name}: nothing applied`);
    }
  });

  test('shards recover of every shard gives the exact totals, also after a kill -9 of a consumer under load', async () => {
    await load.round(25);
    await load.round(25);
    await load.waitProcessed(group!.address);
    await recoverAllAndCheck(cluster!, group!, load, 'steady');

    const ids = running.shards.map((s) => s.id);
    const listed = await waitForShardsPrimary(group!.address, ids, 30_000, { standbys: true });
    const count = new Map<string, number>();
    for (const s of listed.values()) count.set(shardPrimary(s)!, (count.get(shardPrimary(s)!) ?? 0) + 1);
    const victim = [...count].sort((a, b) => b[1] - a[1])[0]![0];

    load.start(5, 100);
    const started = load.appends;
    await pollUntil('appends to run', async () => load.appends >= started + 20, { timeoutMs: 30_000, intervalMs: 50 });
    await group!.killConsumer(group!.indexOf(victim));
    const seen = load.appends;
    const survivor = group!.consumers.find((c) => c.id !== victim)!.endpoint;
    const moved = await waitForShardsPrimary(survivor, ids, 60_000, { exclude: [victim] });
    await load.stop();
    assert.ok(load.appends > seen, 'appends went on while the consumer died');
    for (const s of moved.values()) {
      for (const st of s.status) assert.notEqual(st.code, ReplicaStatus_Code.FAILED, `${s.spec?.id}: ${st.errors.join('; ')}`);
    }
    await load.waitProcessed(survivor);
    await recoverAllAndCheck(cluster!, group!, load, 'after-kill');
  });
});
