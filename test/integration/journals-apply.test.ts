// Acceptance: `gazctl journals apply` against three reference Go brokers + etcd.
//
// * a generated hierarchy of 1,000 journals (nested directories, labels at every level,
//   replication 1) needs --max-txn-size: without it the command fails with one line naming the
//   flag and applies nothing; with --max-txn-size 100 it succeeds;
// * `journals list` shows all 1,000, and its `-o yaml` re-applied changes no spec;
// * a stale revision refuses the whole apply, with one line naming the revision problem;
// * --dry-run prints the plan and applies nothing;
// * with --parallel, a refused transaction in the middle of a run stops the sending: the one
//   line names the transactions that were applied, and exactly their journals exist.

import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import YAML from 'yaml';

import { startCluster, waitForJournalsAssigned, type Cluster } from '../../src/testing/index.js';
import { describeResult, type GazctlResult } from '../helpers/cli.js';
import { gz, gzOk, listJson, oneStderrLine, stopwatch, tempDir, type JsonJournal } from '../helpers/journals.js';

const REGIONS = 4;
const TEAMS = 5;
const SERVICES = 10;
const LEAVES = 5; // 4 * 5 * 10 * 5 = 1,000 journals

/** The fragment spec of the hierarchies' roots, as YAML lines. */
const FRAGMENT_SPEC = ['fragment:', '  length: 1048576', '  compression_codec: NONE', '  stores:', '  - file:///', '  refresh_interval: 1m'];

/** acc/r<R>/t<T>/s<S>/j<J>, with labels on every directory level and on the j0 leaves. */
function bigHierarchy(root: string): { yaml: string; names: string[] } {
  const names: string[] = [];
  const l: string[] = [
    `name: ${root}`,
    'replication: 1',
    'labels:',
    '- name: app',
    '  value: acceptance',
    ...FRAGMENT_SPEC,
    'children:',
  ];
  for (let r = 0; r < REGIONS; r++) {
    l.push(`- name: ${root}r${r}/`, '  labels:', '  - name: region', `    value: r${r}`, '  children:');
    for (let t = 0; t < TEAMS; t++) {
      l.push(`  - name: ${root}r${r}/t${t}/`, '    labels:', '    - name: team', `      value: t${t}`, '    children:');
      for (let s = 0; s < SERVICES; s++) {
        l.push(`    - name: ${root}r${r}/t${t}/s${s}/`, '      children:');
        for (let j = 0; j < LEAVES; j++) {
          const name = `${root}r${r}/t${t}/s${s}/j${j}`;
          names.push(name);
          l.push(`      - name: ${name}`);
          if (j === 0) l.push('        labels:', '        - name: tier', '          value: hot');
        }
      }
    }
  }
  return { yaml: l.join('\n') + '\n', names };
}

/** name → JSON of the spec, for spec comparisons. */
function specsByName(journals: JsonJournal[]): Map<string, string> {
  return new Map(journals.map((j) => [j.spec.name, JSON.stringify(j.spec)]));
}

function labelsOf(j: JsonJournal): string[] {
  const ls = (j.spec.labels as { labels?: { name: string; value: string }[] } | undefined)?.labels ?? [];
  return ls.map((x) => `${x.name}=${x.value}`);
}

/** Sets `field: value` on the terminal nodes named in `names` of a journal YAML tree. */
function editTerminals(yamlText: string, names: string[], field: string, value: unknown): string {
  const doc = YAML.parse(yamlText) as Record<string, unknown>;
  let hits = 0;
  const walk = (n: Record<string, unknown>) => {
    if (names.includes(n.name as string)) {
      n[field] = value;
      hits++;
    }
    for (const c of (n.children as Record<string, unknown>[] | undefined) ?? []) walk(c);
  };
  walk(doc);
  assert.equal(hits, names.length, `expected to find ${names.join(', ')} in\n${yamlText}`);
  return YAML.stringify(doc);
}

/** `root` with `n` children root + j0000.. (zero-padded, so batches of the run are runs of them). */
function flatHierarchy(root: string, n: number): { yaml: string; names: string[] } {
  const names = Array.from({ length: n }, (_, i) => `${root}j${String(i).padStart(4, '0')}`);
  const l = [
    `name: ${root}`,
    'replication: 1',
    ...FRAGMENT_SPEC,
    'children:',
    ...names.map((x) => `- name: ${x}`),
  ];
  return { yaml: l.join('\n') + '\n', names };
}

/** "1-4, 6 and 8-10" → [0, 1, 2, 3, 5, 7, 8, 9] (0-based). */
function parseRanges(text: string): number[] {
  const out: number[] = [];
  for (const part of text.split(/, | and /)) {
    const [a, b] = part.split('-').map(Number) as [number, number | undefined];
    for (let i = a; i <= (b ?? a); i++) out.push(i - 1);
  }
  return out;
}

/**
 * The 0-based transactions a failure line says were applied: "Transaction K of N failed; the M
 * changes of the transactions before it were applied" (those before K), or "Transaction(s) R of
 * N was/were applied (M changes); …".
 */
function appliedTransactions(line: string): { applied: number[]; failed: number[]; notSent: number[]; ranged: boolean } {
  let m = /Transaction (\d+) of (\d+) failed; the \d+ changes of the transactions before it were applied\./.exec(line);
  if (m) return { applied: Array.from({ length: Number(m[1]) - 1 }, (_, i) => i), failed: [Number(m[1]) - 1], notSent: [], ranged: false };
  m = /Transactions? ([\d, and-]+) of (\d+) (?:was|were) applied \(\d+ changes?\); ([\d, and-]+) failed(?:; ([\d, and-]+) (?:was|were) not sent)?\./.exec(line);
  assert.ok(m, `the line should name the applied transactions: ${line}`);
  return { applied: parseRanges(m[1]!), failed: parseRanges(m[3]!), notSent: m[4] ? parseRanges(m[4]) : [], ranged: true };
}

describe('journals apply (acceptance, 3 Go brokers)', { timeout: 300_000 }, () => {
  let cluster: Cluster;
  let dir: string;
  let cleanupDir = () => {};
  const timings: string[] = [];

  before(async () => {
    const lap = stopwatch();
    cluster = await startCluster({ brokers: 3 });
    timings.push(`cluster start ${lap()}`);
    ({ dir, cleanup: cleanupDir } = tempDir('gazctl-apply-'));
  });
  after(async () => {
    await cluster?.stop();
    cleanupDir();
  });

  describe('a hierarchy of 1,000 journals', () => {
    const ROOT = 'acc/';
    const big = bigHierarchy(ROOT);
    let specsPath: string;
    let withoutFlag: GazctlResult;
    let countBefore: number;
    let countAfterFailure: number;
    let withFlag: GazctlResult;

    before(async () => {
      assert.equal(big.names.length, 1000);
      specsPath = join(dir, 'big.yaml');
      writeFileSync(specsPath, big.yaml);
      countBefore = (await listJson(cluster)).length;
      const lap = stopwatch();
      withoutFlag = await gz(cluster, ['journals', 'apply', '--specs', specsPath], { timeoutMs: 60_000 });
      timings.push(`apply 1,000 without --max-txn-size ${lap()}`);
      countAfterFailure = (await listJson(cluster)).length;
      const lap2 = stopwatch();
      withFlag = await gz(cluster, ['journals', 'apply', '--specs', specsPath, '--max-txn-size', '100'], { timeoutMs: 120_000 });
      timings.push(`apply 1,000 with --max-txn-size 100 ${lap2()}`);
    });

    test('without --max-txn-size: exit 1, one line on stderr naming --max-txn-size, nothing applied', async () => {
      const args = ['journals', 'apply', '--specs', specsPath];
      assert.equal(withoutFlag.code, 1, describeResult(args, withoutFlag));
      const line = oneStderrLine(args, withoutFlag);
      assert.match(line, /--max-txn-size/, line);
      assert.match(line, /nothing (was )?applied/i, `the line should say that nothing was applied: ${line}`);
      assert.equal(withoutFlag.stdout.length, 0, describeResult(args, withoutFlag));
      assert.equal(countAfterFailure, countBefore, 'list count must be unchanged by the failed apply');
    });

    test('with --max-txn-size 100: exit 0, one summary line, every journal applied', async (t) => {
      const args = ['journals', 'apply', '--specs', specsPath, '--max-txn-size', '100'];
      assert.equal(withFlag.code, 0, describeResult(args, withFlag));
      const line = oneStderrLine(args, withFlag);
      assert.match(line, /\b1000\b/, `summary should count the 1000 changes: ${line}`);
      assert.match(line, /\b10 transactions\b/, `summary should count 10 transactions: ${line}`);
      assert.equal(withFlag.stdout.length, 0);
      for (const d of timings) t.diagnostic(d);
      // The brokers assign them (replication 1): spot-check a few.
      await waitForJournalsAssigned(cluster, [big.names[0]!, big.names[499]!, big.names[999]!], 60_000);
    });

    test('journals list shows all 1,000 with the hierarchy\'s specs', async () => {
      const all = await listJson(cluster, `name:prefix=${ROOT}`);
      assert.equal(all.length, 1000);
      assert.deepEqual(all.map((j) => j.spec.name).sort(), [...big.names].sort());
      const byName = new Map(all.map((j) => [j.spec.name, j]));
      const j0 = byName.get(`${ROOT}r2/t3/s4/j0`)!;
      assert.deepEqual(labelsOf(j0), ['app=acceptance', 'region=r2', 'team=t3', 'tier=hot']);
      assert.equal(j0.spec.replication, 1);
      const j1 = byName.get(`${ROOT}r3/t0/s9/j1`)!;
      assert.deepEqual(labelsOf(j1), ['app=acceptance', 'region=r3', 'team=t0']);
      // Labels select what the hierarchy says.
      assert.equal((await listJson(cluster, 'region=r2')).length, 250);
      assert.equal((await listJson(cluster, 'team=t1,tier=hot')).length, REGIONS * SERVICES);
      // And the table has one row per journal plus the header.
      const table = await gzOk(cluster, ['journals', 'list', '-l', `name:prefix=${ROOT}`]);
      const rows = table.stdout.toString('utf8').split('\n').filter((l) => l.includes(ROOT));
      assert.equal(rows.length, 1000);
    });

    test('list -o yaml re-applied (with --max-txn-size 100) succeeds and changes no spec', async (t) => {
      const before = await listJson(cluster, `name:prefix=${ROOT}`);
      const yaml = await gzOk(cluster, ['journals', 'list', '-l', `name:prefix=${ROOT}`, '-o', 'yaml']);
      const path = join(dir, 'listed.yaml');
      writeFileSync(path, yaml.stdout);
      const lap = stopwatch();
      const args = ['journals', 'apply', '--specs', path, '--max-txn-size', '100'];
      const r = await gz(cluster, args, { timeoutMs: 120_000 });
      t.diagnostic(`re-apply of the listed yaml took ${lap()}`);
      assert.equal(r.code, 0, describeResult(args, r));
      const after = await listJson(cluster, `name:prefix=${ROOT}`);
      assert.equal(after.length, 1000);
      assert.deepEqual(specsByName(after), specsByName(before));
    });
  });

  describe('--parallel', () => {
    test('1,000 journals with --max-txn-size 100 --parallel 4: all created, one summary line', async () => {
      const { yaml, names } = flatHierarchy('par/ok/', 1000);
      const path = join(dir, 'par-ok.yaml');
      writeFileSync(path, yaml);
      const args = ['journals', 'apply', '--specs', path, '--max-txn-size', '100', '--parallel', '4'];
      const r = await gz(cluster, args, { timeoutMs: 120_000 });
      assert.equal(r.code, 0, describeResult(args, r));
      const line = oneStderrLine(args, r);
      assert.match(line, /^applied 1000 journal changes in 10 transactions \(etcd revision \d+\)$/, line);
      const listed = await listJson(cluster, 'name:prefix=par/ok/');
      assert.deepEqual(listed.map((j) => j.spec.name).sort(), names);
      // The summary's revision is the run's highest: that of the newest journal.
      const newest = listed.map((j) => BigInt(j.mod_revision)).reduce((a, b) => (b > a ? b : a));
      assert.match(line, new RegExp(`etcd revision ${newest}\\)$`), line);
    });

    for (const parallel of ['4', '1']) {
      test(`a refused transaction in the middle (--parallel ${parallel}): exit 1, one line naming the applied transactions, exactly their journals exist`, async (t) => {
        const root = `par/refused${parallel}/`;
        const { yaml, names } = flatHierarchy(root, 1000);
        // Another client creates a journal of the sixth transaction (changes 500-599) first.
        const taken = names[550]!;
        await gzOk(cluster, ['journals', 'apply'], { input: flatHierarchy(root, 0).yaml.replace('children:\n', `children:\n- name: ${taken}\n`) });
        const path = join(dir, `par-refused${parallel}.yaml`);
        writeFileSync(path, yaml);
        const args = ['journals', 'apply', '--specs', path, '--max-txn-size', '100', '--parallel', parallel];
        const r = await gz(cluster, args, { timeoutMs: 120_000 });
        assert.equal(r.code, 1, describeResult(args, r));
        const line = oneStderrLine(args, r);
        t.diagnostic(line);
        assert.match(line, /^gazctl: apply refused: /, line);
        assert.match(line, new RegExp(`Conflicts: ${taken} already exists at revision \\d+\\.$`), line);
        assert.equal(r.stdout.length, 0);
        const said = appliedTransactions(line);
        assert.equal(said.failed[0], 5, `transaction 6 is the one refused: ${line}`);
        assert.deepEqual(said.applied.filter((b) => b < 5), [0, 1, 2, 3, 4], `every transaction before it was applied: ${line}`);
        if (parallel === '1') {
          assert.match(line, /Transaction 6 of 10 failed; the 500 changes of the transactions before it were applied\./, line);
        } else {
          // No later transaction is bounded by the window: while the 6th is in flight, each of the
          // others that answers lets the next one go, so any of them may have been applied before
          // the refusal came back. What the line must do is say exactly which (checked against the
          // listing below), and account for every transaction once.
          if (said.ranged) assert.deepEqual([...said.applied, ...said.failed, ...said.notSent].sort((a, b) => a - b), Array.from({ length: 10 }, (_, i) => i), line);
        }
        const expected = [taken, ...said.applied.flatMap((b) => names.slice(b * 100, b * 100 + 100))].sort();
        const listed = await listJson(cluster, `name:prefix=${root}`);
        assert.deepEqual(listed.map((j) => j.spec.name).sort(), expected, `exactly the journals of the applied transactions exist: ${line}`);
      });
    }
  });

  test('a stale revision is refused with one line naming it, and nothing of that apply is applied', async () => {
    const names = ['stale/a', 'stale/b', 'stale/c'];
    await gzOk(cluster, ['journals', 'apply'], {
      input: `name: stale/\nreplication: 1\nlabels:\n- name: app\n  value: stale\nfragment:\n  length: 1048576\n  compression_codec: NONE\n  stores:\n  - file:///\n  refresh_interval: 1m\nchildren:\n${names.map((n) => `- name: ${n}\n`).join('')}`,
    });
    const old = (await gzOk(cluster, ['journals', 'list', '-l', 'app=stale', '-o', 'yaml'])).stdout.toString('utf8');
    assert.match(old, /revision: \d+/);

    // Someone else changes stale/b.
    await gzOk(cluster, ['journals', 'apply'], { input: editTerminals(old, ['stale/b'], 'max_append_rate', 2000) });
    const current = await listJson(cluster, 'app=stale');
    const b = current.find((j) => j.spec.name === 'stale/b')!;
    assert.equal(String(b.spec.max_append_rate), '2000');

    // Our edit of the old listing changes stale/a and stale/c, and carries b's old revision.
    const attempts: [string, string][] = [
      ['edited old listing', editTerminals(old, ['stale/a', 'stale/c'], 'max_append_rate', 1000)],
      ['old listing as is', old],
    ];
    for (const [what, yaml] of attempts) {
      const args = ['journals', 'apply'];
      const r = await gz(cluster, args, { input: yaml });
      assert.equal(r.code, 1, `${what}: ${describeResult(args, r)}`);
      const line = oneStderrLine(args, r);
      assert.match(line, /revision/i, `${what}: the line should name the revision problem: ${line}`);
      assert.match(line, /nothing (was )?applied/i, `${what}: the line should say nothing was applied: ${line}`);
      const now = await listJson(cluster, 'app=stale');
      assert.deepEqual(
        now.map((j) => [j.spec.name, j.mod_revision, JSON.stringify(j.spec)]),
        current.map((j) => [j.spec.name, j.mod_revision, JSON.stringify(j.spec)]),
        `${what}: no journal may change`,
      );
    }
  });

  test('--dry-run prints the plan and applies nothing', async () => {
    await gzOk(cluster, ['journals', 'apply'], {
      input: 'name: dry/\nreplication: 1\nfragment:\n  length: 1048576\n  compression_codec: NONE\n  stores:\n  - file:///\n  refresh_interval: 1m\nchildren:\n- name: dry/gone\n- name: dry/keep\n- name: dry/same\n',
    });
    const before = await listJson(cluster, 'name:prefix=dry/');
    const rev = (n: string) => before.find((j) => j.spec.name === n)!.mod_revision;
    const plan =
      'name: dry/\nreplication: 1\nfragment:\n  length: 1048576\n  compression_codec: NONE\n  stores:\n  - file:///\n  refresh_interval: 1m\nchildren:\n' +
      `- name: dry/gone\n  delete: true\n  revision: ${rev('dry/gone')}\n` +
      `- name: dry/keep\n  max_append_rate: 4096\n  revision: ${rev('dry/keep')}\n` +
      `- name: dry/new\n` +
      `- name: dry/same\n  revision: ${rev('dry/same')}\n`;
    const path = join(dir, 'dry.yaml');
    writeFileSync(path, plan);
    const args = ['journals', 'apply', '--specs', path, '--dry-run'];
    const r = await gzOk(cluster, args);
    const out = r.stdout.toString('utf8');
    assert.match(out, /^create\s+dry\/new\b/m, out);
    assert.match(out, new RegExp(`^update\\s+dry/keep\\b.*\\brevision ${rev('dry/keep')}\\b`, 'm'), out);
    assert.match(out, new RegExp(`^delete\\s+dry/gone\\b.*\\brevision ${rev('dry/gone')}\\b`, 'm'), out);
    assert.doesNotMatch(out, /^(create|update|upsert|delete)\s+dry\/same\b/m, `an unchanged journal is not a change:\n${out}`);
    assert.match(out, /\b3 journal changes\b/, `the plan counts the 3 changes:\n${out}`);
    assert.match(out, /\b1 transaction\b/, `the plan counts the transactions:\n${out}`);
    assert.match(out, /nothing applied/i, out);

    const after = await listJson(cluster, 'name:prefix=dry/');
    assert.deepEqual(
      after.map((j) => [j.spec.name, j.mod_revision, JSON.stringify(j.spec)]),
      before.map((j) => [j.spec.name, j.mod_revision, JSON.stringify(j.spec)]),
    );

    // The same specs applied for real do what the plan said (so the plan was about them).
    await gzOk(cluster, ['journals', 'apply', '--specs', path]);
    const applied = await listJson(cluster, 'name:prefix=dry/');
    assert.deepEqual(applied.map((j) => j.spec.name), ['dry/keep', 'dry/new', 'dry/same']);
  });
});
