// Parity of our `gazctl shards` commands with the reference Go gazctl (v0.103.0), side by side on
// three Go brokers, against two consumer groups of Go sum-consumers:
//
//   * "sum-app": three consumers running a shard set of our own (several sources, min_offset,
//     per-shard and multi-valued labels, a disabled shard, 0 to 2 hot standbys, every tuning
//     field, settings hoisted into common);
//   * "examples": one consumer with --consumer.limit=0, holding the shard sets of upstream's
//     examples (word-count, bike-share, stream-sum), rebuilt here from their documented shape.
//     Nothing runs them: some have no recovery log, and their sources are protobuf and CSV
//     journals the sum app does not read. Listing and applying is all they are for.
//
// Compared byte for byte: `shards list` tables (with -p -r --rf -L, -l, --lag), `-o yaml` and
// `-o json`; apply round trips (each tool applies the other's listing, and both list the result
// the same); the examples applied from their source YAML by each tool give the same shards; after
// our `shards unassign` Go's listing agrees with ours; `attach-uuids` prints the same shape.
//
// Outputs that depend on cluster state are "sandwiched": Go, ours, Go; if the two Go runs differ
// the state moved and the comparison is retried, else ours must equal them.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import {
  createSumAppJournals,
  delay,
  runGoGazctl,
  shardPrimary,
  startCluster,
  startConsumers,
  sumAppLayout,
  waitForShardsPrimary,
  type Cluster,
  type ConsumerGroup,
  type GoGazctlResult,
} from '../../src/testing/index.js';
import { describeResult, runGazctl, type GazctlResult } from '../helpers/cli.js';

// ---- shard sets -------------------------------------------------------------------------------

/** Our own shard set of the sum app (journals from sumAppLayout({ name: 'par', shards: 6, sourcesPerShard: 2 })). */
const OUR_SET = `common:
  recovery_log_prefix: par/recovery
  hint_prefix: /gazette/hints/par
  hint_backups: 1
  max_txn_duration: 1s
  hot_standbys: 1
  labels:
  - name: app
    value: par
shards:
- id: par-000
  sources:
  - journal: par/input/part-000-0
  - journal: par/input/part-000-1
    min_offset: 4096
  labels:
  - name: tier
    value: gold
- id: par-001
  sources:
  - journal: par/input/part-001-0
  labels:
  - name: region
    value: eu
  - name: region
    value: us
  - name: tier
    value: silver
- id: par-002
  sources:
  - journal: par/input/part-002-0
  - journal: par/input/part-002-1
  hot_standbys: 2
  max_txn_duration: 2s
  min_txn_duration: 100ms
- id: par-003
  sources:
  - journal: par/input/part-003-0
  disable: true
- id: par-004
  sources:
  - journal: par/input/part-004-0
  hint_backups: 3
  hot_standbys: 0
  disable_wait_for_ack: true
  ring_buffer_size: 1024
  read_channel_size: 64
  labels:
  - name: tier
    value: gold
- id: par-005
  sources:
  - journal: par/input/part-005-1
`;
const RUNNING = ['par-000', 'par-001', 'par-002', 'par-004', 'par-005'];

/** Journals of upstream's examples that their shard sets name (as a journal hierarchy). */
const EXAMPLE_JOURNALS = (() => {
  const dir = (path: string, contentType: string, names: string[]) =>
    [`- name: examples/${path}`, '  labels:', '  - name: content-type', `    value: ${contentType}`, '  children:', ...names.map((n) => `  - name: examples/${path}${n}`)].join('\n') + '\n';
  const nums = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(3, '0')}`);
  return (
    'name: examples/\nreplication: 1\nfragment:\n  length: 1048576\n  compression_codec: SNAPPY\n  stores:\n  - file:///examples/\n  refresh_interval: 1m\nchildren:\n' +
    dir('bike-share/recovery-logs/', 'application/x-gazette-recoverylog', nums('cycles-part-', 4)) +
    dir('bike-share/rides/', 'text/csv', nums('part-', 4)) +
    dir('stream-sum/chunks/', 'application/x-ndjson', nums('part-', 8)) +
    dir('stream-sum/recovery-logs/', 'application/x-gazette-recoverylog', nums('chunks-part-', 8)) +
    dir('word-count/deltas/', 'application/x-protobuf-fixed', nums('part-', 4)) +
    dir('word-count/recovery-logs/', 'application/x-gazette-recoverylog', nums('shard-', 4))
  );
})();

/** Upstream's word-count shard set: four shards with everything else in common. */
const WORD_COUNT = `# One shard per deltas partition.
common:
  hint_prefix: /gazette/hints
  hint_backups: 2
  hot_standbys: 1
  max_txn_duration: 1s
  min_txn_duration: 0s
  recovery_log_prefix: examples/word-count/recovery-logs
  labels:
    - name: common-label
      value: common-value
shards:
  - id: shard-000
    labels:
      - name: custom-label
    sources:
      - journal: examples/word-count/deltas/part-000
${[1, 2, 3].map((i) => `  - id: shard-00${i}\n    sources:\n      - journal: examples/word-count/deltas/part-00${i}\n`).join('')}`;

/** Upstream's bike-share shard set: per-shard labels, only two shards with a recovery log. */
const BIKE_SHARE = `common:
  max_txn_duration: 1s
shards:
${[0, 1, 2, 3]
  .map((i) => {
    const sqlite = i >= 2;
    return (
      `  - id: cycles-part-00${i}\n    labels:\n      - name: store\n        value: ${sqlite ? 'sqlite' : 'postgres'}\n` +
      `    sources:\n      - journal: examples/bike-share/rides/part-00${i}\n` +
      (sqlite ? '    hint_prefix: /gazette/hints\n    recovery_log_prefix: examples/bike-share/recovery-logs\n' : '') +
      '\n'
    );
  })
  .join('')}`;

/** Upstream's stream-sum shard set, as its generator script writes it (flow-style sources). */
const STREAM_SUM = `common:
  recovery_log_prefix: examples/stream-sum/recovery-logs
  hint_prefix:         /gazette/hints/examples/stream-sum
  hint_backups:        2
  max_txn_duration:    1s
  hot_standbys:        1
shards:
${Array.from({ length: 8 }, (_, i) => {
  const n = String(i).padStart(3, '0');
  return `- id: chunks-part-${n}\n  sources: [journal: examples/stream-sum/chunks/part-${n}]\n  labels:\n    - name:  store\n      value: ${i % 2 ? 'sqlite' : 'rocksdb'}\n`;
}).join('')}`;

const EXAMPLES = { 'word-count': WORD_COUNT, 'bike-share': BIKE_SHARE, 'stream-sum': STREAM_SUM };

// ---- running both tools -----------------------------------------------------------------------

let cluster: Cluster | undefined;
let sums: ConsumerGroup | undefined;
let examples: ConsumerGroup | undefined;
let work = '';

type Who = 'sums' | 'examples';
const addressOf = (who: Who) => (who === 'sums' ? sums! : examples!).address;

function go(who: Who, args: string[], input?: string): Promise<GoGazctlResult> {
  return runGoGazctl(args, {
    brokerAddress: cluster!.brokerAddress,
    env: { CONSUMER_ADDRESS: addressOf(who) },
    input,
    cwd: work,
    timeoutMs: 30_000,
  });
}

function ours(who: Who, args: string[], input?: string): Promise<GazctlResult> {
  return runGazctl(args, { env: { BROKER_ADDRESS: cluster!.brokerAddress, CONSUMER_ADDRESS: addressOf(who) }, input, timeoutMs: 30_000 });
}

async function goOk(who: Who, args: string[], input?: string): Promise<GoGazctlResult> {
  const r = await go(who, args, input);
  assert.equal(r.code, 0, `Go gazctl: ${describeResult(args, r as GazctlResult)}`);
  return r;
}

async function oursOk(who: Who, args: string[], input?: string): Promise<GazctlResult> {
  const r = await ours(who, args, input);
  assert.equal(r.code, 0, `our gazctl: ${describeResult(args, r)}`);
  return r;
}

/**
 * A box-drawn table without its last column: ours adds Backlog Age after Lag with --lag
 * (docs/divergences.md D80), which Go's table does not have.
 */
function withoutLastColumn(table: string): string {
  const cut = (line: string, sep: string, end: string) => {
    const at = line.lastIndexOf(sep);
    return at < 0 ? line : line.slice(0, at) + end;
  };
  return table
    .split('\n')
    .map((l) => {
      if (l.startsWith('┌')) return cut(l, '┬', '┐');
      if (l.startsWith('├')) return cut(l, '┼', '┤');
      if (l.startsWith('└')) return cut(l, '┴', '┘');
      if (l.startsWith('│')) return l.slice(0, l.lastIndexOf('│', l.length - 2) + 1);
      return l;
    })
    .join('\n');
}

/** Go, ours, Go until the Go runs agree; then ours must print the same bytes. Returns them. */
async function assertSameOutput(who: Who, args: string[], tries = 8): Promise<string> {
  for (let i = 0; i < tries; i++) {
    const g1 = await goOk(who, args);
    const raw = await oursOk(who, args);
    const o = args.includes('--lag') ? { ...raw, stdout: Buffer.from(withoutLastColumn(raw.stdout.toString('utf8'))) } : raw;
    const g2 = await goOk(who, args);
    if (!g1.stdout.equals(g2.stdout)) {
      await delay(500);
      continue;
    }
    assert.equal(o.stdout.toString('utf8'), g1.stdout.toString('utf8'), `stdout of "gazctl ${args.join(' ')}" (${who}) differs from Go gazctl's`);
    assert.ok(o.stdout.equals(g1.stdout), `stdout bytes of "gazctl ${args.join(' ')}" differ`);
    return g1.stdout.toString('utf8');
  }
  assert.fail(`Go gazctl's output of "gazctl ${args.join(' ')}" never settled over ${tries} tries`);
}

/** A listing's YAML with every `revision: N` replaced by `revision: <rev>`. */
const noRevisions = (yaml: string) => yaml.replace(/^(\s*)revision: \d+$/gm, '$1revision: <rev>');

/** Waits until the running shards of the sum app have their primaries and all standbys. */
const settle = () => waitForShardsPrimary(sums!.address, RUNNING, 60_000, { standbys: true });

// ---- the suite ----------------------------------------------------------------------------------

describe('shards: our gazctl vs the reference Go gazctl on Go consumers', { timeout: 300_000 }, () => {
  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'gazctl-shards-parity-'));
    cluster = await startCluster({ brokers: 3 });
    sums = await startConsumers(cluster, { count: 3 });
    examples = await startConsumers(cluster, { count: 1, etcdPrefix: '/gazette/consumers/examples', extraArgs: ['--consumer.limit=0'] });
    await createSumAppJournals(cluster, sumAppLayout({ name: 'par', shards: 6, sourcesPerShard: 2 }));
    await goOk('examples', ['journals', 'apply'], EXAMPLE_JOURNALS);
    await goOk('sums', ['shards', 'apply'], OUR_SET);
    for (const yaml of Object.values(EXAMPLES)) await goOk('examples', ['shards', 'apply'], yaml);
    await settle();
  });

  after(async () => {
    await examples?.stop();
    await sums?.stop();
    await cluster?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  test('list tables are byte-identical (plain, -p -r --rf -L, -l, --lag, no match)', async () => {
    await settle();
    const tables = [
      ['shards', 'list'],
      ['shards', 'list', '-p', '-r', '--rf', '-L', 'app', '-L', 'tier', '-L', 'region'],
      ['shards', 'list', '-l', 'tier=gold', '-p', '--rf'],
      ['shards', 'list', '-l', 'id in (par-001, par-003, par-005)', '-r', '-L', 'tier'],
      // One source each: upstream orders the lag cells of several sources at random.
      ['shards', 'list', '-l', 'id in (par-001, par-004, par-005)', '--lag', '-p'],
      ['shards', 'list', '-l', 'app=nothing', '-p', '-r'],
    ];
    for (const args of tables) await assertSameOutput('sums', args);
    const all = await assertSameOutput('sums', tables[1]!);
    assert.match(all, /par-003 +│ IDLE +│ 0 +│ <none>/, 'the disabled shard: RF 0, no primary');
    for (const args of [['shards', 'list'], ['shards', 'list', '-p', '-r', '--rf', '-L', 'store', '-L', 'custom-label', '-L', 'common-label'], ['shards', 'list', '-l', 'store=sqlite']]) {
      await assertSameOutput('examples', args);
    }
  });

  test('list -o yaml and -o json are byte-identical, for our set and upstream\'s examples', async () => {
    await settle();
    for (const sel of [[], ['-l', 'app=par'], ['-l', 'tier=gold'], ['-l', 'id=par-002'], ['-l', 'app=nothing']]) {
      await assertSameOutput('sums', ['shards', 'list', ...sel, '-o', 'yaml']);
      await assertSameOutput('sums', ['shards', 'list', ...sel, '-o', 'json']);
    }
    for (const sel of [[], ['-l', 'id:prefix=shard-'], ['-l', 'id:prefix=cycles-'], ['-l', 'id:prefix=chunks-'], ['-l', 'store=postgres']]) {
      await assertSameOutput('examples', ['shards', 'list', ...sel, '-o', 'yaml']);
      await assertSameOutput('examples', ['shards', 'list', ...sel, '-o', 'json']);
    }
    // Hoisting: the word-count set lists as it was written, everything shared in common.
    const wc = (await goOk('examples', ['shards', 'list', '-l', 'id:prefix=shard-', '-o', 'yaml'])).stdout.toString('utf8');
    assert.match(wc, /^common:\n {2}recovery_log_prefix: examples\/word-count\/recovery-logs\n {2}hint_prefix: \/gazette\/hints\n {2}hint_backups: 2\n {2}max_txn_duration: 1s\n {2}hot_standbys: 1\n {2}labels:\n {2}- name: common-label\n {4}value: common-value\nshards:\n- id: shard-000\n/);
  });

  test('apply round trips: each tool applies the other\'s edited listing, and both list the result alike', async () => {
    const slower = (y: string) => y.replace(/max_txn_duration: 1s$/gm, 'max_txn_duration: 3s');
    for (const who of ['sums', 'examples'] as const) {
      const y0 = (await goOk(who, ['shards', 'list', '-o', 'yaml'])).stdout.toString('utf8');
      assert.notEqual(slower(y0), y0);
      // Go's listing, edited, applied by ours; both list it alike, as edited.
      await oursOk(who, ['shards', 'apply'], slower(y0));
      const y1 = await assertSameOutput(who, ['shards', 'list', '-o', 'yaml']);
      assert.equal(noRevisions(y1), noRevisions(slower(y0)), `${who}: our apply of Go's edited listing`);
      // Our listing, edited back, applied by Go.
      await goOk(who, ['shards', 'apply'], y1.replace(/max_txn_duration: 3s$/gm, 'max_txn_duration: 1s'));
      const y2 = await assertSameOutput(who, ['shards', 'list', '-o', 'yaml']);
      assert.equal(noRevisions(y2), noRevisions(y0), `${who}: Go's apply of our edited listing`);
      await assertSameOutput(who, ['shards', 'list', '-o', 'json']);
      // Our apply of an unchanged listing touches nothing (docs/divergences.md D17: Go writes
      // every shard again); Go's apply of the same listing writes them all.
      const r = await oursOk(who, ['shards', 'apply'], y2);
      assert.match(r.stderr, /nothing to apply: \d+ shards? unchanged/);
      assert.equal((await goOk(who, ['shards', 'list', '-o', 'yaml'])).stdout.toString('utf8'), y2);
      await goOk(who, ['shards', 'apply'], y2);
      const y3 = await assertSameOutput(who, ['shards', 'list', '-o', 'yaml']);
      assert.notEqual(y3, y2, `${who}: Go's apply bumped the revisions`);
      assert.equal(noRevisions(y3), noRevisions(y2));
    }
    await settle();
  });

  test('upstream\'s example YAML applied by ours gives the shards Go\'s apply gave', async () => {
    for (const [name, yaml] of Object.entries(EXAMPLES)) {
      const ids = [...yaml.matchAll(/- id: (\S+)/g)].map((m) => m[1]!);
      const sel = `id in (${ids.join(', ')})`;
      const byGo = (await goOk('examples', ['shards', 'list', '-l', sel, '-o', 'yaml'])).stdout.toString('utf8');
      assert.equal([...byGo.matchAll(/^- id: /gm)].length, ids.length, `${name}: all listed`);
      // Delete them (Go's way: delete: true on each shard of the listing), then apply the source YAML with ours.
      const deletion = byGo.replace(/^- id: /gm, '- delete: true\n  id: ');
      await goOk('examples', ['shards', 'apply'], deletion);
      assert.equal((await goOk('examples', ['shards', 'list', '-l', sel, '-o', 'yaml'])).stdout.toString('utf8'), 'common: {}\nshards: []\n');
      await oursOk('examples', ['shards', 'apply'], yaml);
      const byOurs = await assertSameOutput('examples', ['shards', 'list', '-l', sel, '-o', 'yaml']);
      assert.equal(noRevisions(byOurs), noRevisions(byGo), `${name}: same shards from our apply as from Go's`);
    }
  });

  test('after our shards unassign, Go\'s listing agrees with ours', async () => {
    const before = await settle();
    const victim = 'par-001';
    const was = shardPrimary(before.get(victim)!)!;
    const args = ['shards', 'unassign', '-l', `id=${victim}`, '--yes'];
    await oursOk('sums', args);
    const after = await waitForShardsPrimary(sums!.address, RUNNING, 60_000, { standbys: true });
    assert.notEqual(shardPrimary(after.get(victim)!), was, `${victim}'s primary moved off ${was}`);
    const table = await assertSameOutput('sums', ['shards', 'list', '-p', '-r', '--rf']);
    assert.match(table, new RegExp(`${victim} +│ PRIMARY +│ 2 +│ ${shardPrimary(after.get(victim)!)}:PRIMARY`));
    await assertSameOutput('sums', ['shards', 'list', '-o', 'yaml']);
  });

  test('attach-uuids: the same output shape as Go\'s', async () => {
    const a = join(work, 'a.csv');
    const b = join(work, 'b.csv');
    writeFileSync(a, 'id,name\n1,alpha\n2,"b, c"\r\n');
    writeFileSync(b, 'id,name\n3,delta\n');
    const UUID = /^([0-9a-f]{8})-([0-9a-f]{4})-1([0-9a-f]{3})-([89ab][0-9a-f]{3})-([0-9a-f]{12})$/;
    /** Unix time in ms of a v1 UUID. */
    const when = (m: RegExpExecArray) => Number((BigInt(`0x${m[3]}${m[2]}${m[1]}`) / 10_000n) - 12_219_292_800_000n);

    const shape = (who: string, out: string, sep: string, uuidFirst: boolean) => {
      const lines = out.split('\n');
      assert.equal(lines.pop(), '', `${who}: ends with a newline`);
      const parsed = lines.map((l) => {
        const at = uuidFirst ? l.indexOf(sep) : l.lastIndexOf(sep);
        const [u, line] = uuidFirst ? [l.slice(0, at), l.slice(at + 1)] : [l.slice(at + 1), l.slice(0, at)];
        const m = UUID.exec(u);
        assert.ok(m, `${who}: ${JSON.stringify(u)} is a version 1 UUID`);
        return { m, line };
      });
      // One producer per run, multicast bit set; clocks that only go forward, near now.
      const nodes = new Set(parsed.map((p) => p.m[5]));
      assert.equal(nodes.size, 1, `${who}: one producer id per run`);
      assert.equal(parseInt([...nodes][0]!.slice(0, 2), 16) & 1, 1, `${who}: producer id has its multicast bit`);
      const times = parsed.map((p) => BigInt(`0x${p.m[3]}${p.m[2]}${p.m[1]}`) * 16n + BigInt(parseInt(p.m[4]!, 16) & 0x3c00) / 1024n);
      for (let i = 1; i < times.length; i++) assert.ok(times[i]! > times[i - 1]!, `${who}: clock moves forward`);
      for (const p of parsed) assert.ok(Math.abs(when(p.m) - Date.now()) < 60_000, `${who}: timestamps are now`);
      for (const p of parsed) assert.equal(parseInt(p.m[4]!, 16) & 0x03ff, 0, `${who}: no transaction flags`);
      return parsed.map((p) => p.line);
    };

    const runs: { args: string[]; input?: string; sep: string; uuidFirst: boolean }[] = [
      { args: ['attach-uuids', a, b], sep: ',', uuidFirst: true },
      { args: ['attach-uuids', '--skip-header', a, b], sep: ',', uuidFirst: true },
      { args: ['attach-uuids', '--template', '{{.Line}}\t{{.UUID}}\n'], input: 'x\ny y\n\nlast', sep: '\t', uuidFirst: false },
      { args: ['attach-uuids', '--skip-header'], input: 'header\nrow\n', sep: ',', uuidFirst: true },
    ];
    for (const r of runs) {
      const g = await goOk('sums', r.args, r.input);
      const o = await oursOk('sums', r.args, r.input);
      assert.deepEqual(shape('ours', o.stdout.toString('utf8'), r.sep, r.uuidFirst), shape('Go', g.stdout.toString('utf8'), r.sep, r.uuidFirst), `lines of ${r.args.join(' ')}`);
      assert.notEqual(o.stdout.toString('utf8'), g.stdout.toString('utf8'), 'each run its own UUIDs');
    }
    // A line longer than --max-length fails both, with exit 1.
    const g = await go('sums', ['attach-uuids', '--max-length', '4'], 'abcdefgh\n');
    const o = await ours('sums', ['attach-uuids', '--max-length', '4'], 'abcdefgh\n');
    assert.equal(g.code, 1);
    assert.equal(o.code, 1, describeResult(['attach-uuids'], o));
    assert.equal(o.stdout.length, 0);
  });
});
