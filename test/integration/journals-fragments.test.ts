// Acceptance: `gazctl journals fragments` against three reference Go brokers + etcd.
//
// Journals with 1 KiB fragments get appends of known sizes, so every append is one fragment
// (the spool rolls before the next append, and rolled spools are persisted to the file://
// store); the last append of each journal stays unpersisted. The table and `-o json` must list
// exactly those fragments (offsets, lengths, SHA1 sums, persisted or not); --from/--to filter
// persisted vs unpersisted ones; a FULL-suspended journal is skipped without error.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { pollUntil, runGoGazctl, startCluster, waitForJournalsAssigned, type Cluster } from '../../src/testing/index.js';
import { describeResult } from '../helpers/cli.js';
import { gz, gzOk, listFragmentsAt, listJson, prng, tempDir } from '../helpers/journals.js';

const SPECS = `name: frag/
replication: 3
fragment:
  length: 1024
  compression_codec: NONE
  stores:
  - file:///
  refresh_interval: 1s
children:
- name: frag/a
  labels:
  - name: set
    value: data
- name: frag/b
  labels:
  - name: set
    value: data
- name: frag/idle
  labels:
  - name: set
    value: idle
`;

/** Append sizes per journal: one fragment each; the last one stays unpersisted. */
const SIZES: Record<string, number[]> = { 'frag/a': [3000, 5000, 7000], 'frag/b': [2048, 1500] };

interface Want {
  journal: string;
  begin: number;
  end: number;
  sha1: string;
  persisted: boolean;
}

interface JsonFragment {
  spec: {
    journal: string;
    begin?: string;
    end?: string;
    sum: { part1?: string; part2?: string; part3?: string };
    compression_codec?: string;
    backing_store?: string;
    mod_time?: string;
    path_postfix?: string;
  };
  signed_url?: string;
}

/** Parses `-o json` output: one object per line, numbers kept as exact decimal strings. */
function parseJsonLines(out: Buffer): JsonFragment[] {
  const text = out.toString('utf8');
  if (text === '') return [];
  assert.ok(text.endsWith('\n'), 'output ends with a newline');
  return text
    .slice(0, -1)
    .split('\n')
    .map((line) => JSON.parse(line.replace(/:(-?\d+)([,}])/g, ':"$1"$2')) as JsonFragment);
}

/** SHA1 as upstream's sum: part1 = bytes 0-7, part2 = bytes 8-15 (big-endian uint64), part3 = bytes 16-19 (uint32). */
function sumOf(sha1hex: string): { part1: string; part2: string; part3: string } {
  return {
    part1: BigInt('0x' + sha1hex.slice(0, 16)).toString(),
    part2: BigInt('0x' + sha1hex.slice(16, 32)).toString(),
    part3: BigInt('0x' + sha1hex.slice(32, 40)).toString(),
  };
}

/** IEC humanized size as go-humanize IBytes prints these small values. */
function iec(n: number): string {
  return n < 1024 ? `${n} B` : `${(n / 1024).toFixed(1)} KiB`;
}

/** Table rows (cells trimmed) of a rendered table, header excluded. */
function tableRows(out: Buffer): string[][] {
  const lines = out.toString('utf8').split('\n').filter((l) => l.includes('│'));
  const cells = lines.map((l) => l.split('│').slice(1, -1).map((c) => c.trim()));
  assert.ok(cells.length >= 1, `a header row:\n${out.toString('utf8')}`);
  return cells.slice(1);
}

describe('journals fragments (acceptance, 3 Go brokers)', { timeout: 180_000 }, () => {
  let cluster: Cluster;
  let cleanupDir = () => {};
  const want: Want[] = [];
  /** Unix seconds of the persisted fragments. */
  let modTimes: number[] = [];

  before(async () => {
    cluster = await startCluster({ brokers: 3 });
    const tmp = tempDir('gazctl-fragments-');
    cleanupDir = tmp.cleanup;
    await gzOk(cluster, ['journals', 'apply'], { input: SPECS });
    await waitForJournalsAssigned(cluster, ['frag/a', 'frag/b', 'frag/idle'], 30_000);
    const rand = prng(42);
    for (const [journal, sizes] of Object.entries(SIZES)) {
      let at = 0;
      sizes.forEach((size, i) => {
        const data = Buffer.alloc(size);
        for (let b = 0; b < size; b++) data[b] = Math.floor(rand() * 256);
        want.push({ journal, begin: at, end: at + size, sha1: createHash('sha1').update(data).digest('hex'), persisted: i < sizes.length - 1 });
        writeFileSync(join(tmp.dir, `${journal.replace('/', '_')}-${i}`), data);
        at += size;
      });
      for (let i = 0; i < sizes.length; i++) {
        await gzOk(cluster, ['journals', 'append', '-l', `name=${journal}`, '-i', join(tmp.dir, `${journal.replace('/', '_')}-${i}`)]);
      }
    }
    // Rolled spools are persisted in the background: wait until every broker's listing shows it.
    await pollUntil(
      'rolled fragments to be persisted',
      async () => {
        const times: number[] = [];
        for (const b of cluster.brokers) {
          for (const journal of Object.keys(SIZES)) {
            const fs = await listFragmentsAt(b.endpoint, journal);
            const persisted = fs.filter((f) => f.mod_time !== 0n);
            if (persisted.length !== SIZES[journal]!.length - 1) return false;
            times.push(...persisted.map((f) => Number(f.mod_time)));
          }
        }
        modTimes = times;
        return true;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
  });
  after(async () => {
    await cluster?.stop();
    cleanupDir();
  });

  test('-o json: one object per line per fragment, with exact offsets, SHA1 sums, codec and persistence', async () => {
    const r = await gzOk(cluster, ['journals', 'fragments', '-l', 'set=data', '-o', 'json']);
    const got = parseJsonLines(r.stdout);
    assert.equal(got.length, want.length, r.stdout.toString('utf8'));
    got.forEach((f, i) => {
      const w = want[i]!;
      const s = f.spec;
      assert.equal(s.journal, w.journal);
      assert.equal(s.begin ?? '0', String(w.begin), `${w.journal} fragment ${i}: begin (omitted when 0)`);
      assert.equal(s.end, String(w.end), `${w.journal} fragment ${i}: end`);
      assert.deepEqual(s.sum, sumOf(w.sha1), `${w.journal} [${w.begin}, ${w.end}): SHA1 sum of the appended bytes`);
      assert.equal(s.compression_codec, '1', 'codec NONE as its number');
      if (w.persisted) {
        assert.equal(s.backing_store, 'file:///');
        assert.ok(Number(s.mod_time) > 0, `persisted [${w.begin}, ${w.end}) has a mod_time`);
      } else {
        assert.equal(s.mod_time, undefined, `unpersisted [${w.begin}, ${w.end}) has no mod_time`);
      }
      assert.equal(f.signed_url, undefined, 'no URL without --url-ttl');
    });
  });

  test('table: a row per fragment with offset, IEC length, persisted time, SHA1 prefix, codec', async () => {
    const r = await gzOk(cluster, ['journals', 'fragments', '-l', 'set=data']);
    const rows = tableRows(r.stdout);
    assert.equal(rows.length, want.length, r.stdout.toString('utf8'));
    rows.forEach((row, i) => {
      const w = want[i]!;
      assert.equal(row.length, 6, `six columns: ${row}`);
      const [journal, offset, length, persisted, sha1, codec] = row as [string, string, string, string, string, string];
      assert.equal(journal, w.journal);
      assert.equal(offset, String(w.begin));
      assert.equal(length, iec(w.end - w.begin));
      if (w.persisted) assert.match(persisted, /^(now|1 second ago|\d+ seconds ago|1 minute ago)$/, `persisted [${w.begin}, ${w.end}) moments ago: ${persisted}`);
      else assert.equal(persisted, '', `unpersisted [${w.begin}, ${w.end})`);
      assert.equal(sha1, w.sha1.slice(0, 12) + '...');
      assert.equal(codec, 'NONE');
    });
  });

  test('--url-ttl adds signed URLs for persisted fragments only (json and a URL column)', async () => {
    const r = await gzOk(cluster, ['journals', 'fragments', '-l', 'set=data', '-o', 'json', '--url-ttl', '1h']);
    const got = parseJsonLines(r.stdout);
    assert.equal(got.length, want.length);
    got.forEach((f, i) => {
      const w = want[i]!;
      if (w.persisted) {
        assert.match(f.signed_url ?? '', new RegExp(`^file:///${w.journal}/0*${w.begin.toString(16)}-0*${w.end.toString(16)}-${w.sha1}\\.raw$`), `${w.journal} [${w.begin}, ${w.end})`);
      } else {
        assert.equal(f.signed_url, undefined, `unpersisted ${w.journal} [${w.begin}, ${w.end}) has no URL`);
      }
    });
    const table = await gzOk(cluster, ['journals', 'fragments', '-l', 'set=data', '--url-ttl', '1h']);
    const header = table.stdout.toString('utf8').split('\n').find((l) => l.includes('JOURNAL'));
    assert.match(header ?? '', /\bURL\b/, 'a URL column');
    const rows = tableRows(table.stdout);
    rows.forEach((row, i) => assert.equal(row[6] !== '', want[i]!.persisted, `URL cell of row ${i}: ${row[6]}`));
  });

  test('--from / --to select persisted vs unpersisted fragments by store modification time', async () => {
    const min = Math.min(...modTimes);
    const max = Math.max(...modTimes);
    const now = Math.floor(Date.now() / 1000);
    const persisted = want.filter((w) => w.persisted).map((w) => `${w.journal}@${w.begin}`);
    const unpersisted = want.filter((w) => !w.persisted).map((w) => `${w.journal}@${w.begin}`);
    const all = want.map((w) => `${w.journal}@${w.begin}`);
    const cases: [string[], string[], string][] = [
      [['--to', String(now + 3600)], persisted, '--to drops fragments not yet persisted'],
      [['--to', String(max)], persisted, '--to is inclusive of its second'],
      [['--to', String(min - 1)], [], '--to before every persist leaves nothing'],
      [['--from', String(min)], all, '--from keeps persisted fragments at or after it, and unpersisted ones'],
      [['--from', String(max + 1)], unpersisted, '--from after every persist leaves the unpersisted fragments'],
      [['--from', String(min), '--to', String(max)], persisted, '--from and --to together'],
      [['--from', String(max + 1), '--to', String(now + 3600)], [], 'a window with no persist'],
    ];
    for (const [flags, expect, what] of cases) {
      const args = ['journals', 'fragments', '-l', 'set=data', '-o', 'json', ...flags];
      const r = await gz(cluster, args);
      assert.equal(r.code, 0, describeResult(args, r));
      const got = parseJsonLines(r.stdout).map((f) => `${f.spec.journal}@${f.spec.begin ?? '0'}`);
      assert.deepEqual(got, expect, `${what} (${flags.join(' ')})`);
    }
  });

  test('a FULL-suspended journal is skipped without error, in json and table', async () => {
    const s = await runGoGazctl(['journals', 'suspend', '-l', 'name=frag/idle', '-f'], { brokerAddress: cluster.brokerAddress, timeoutMs: 30_000 });
    assert.equal(s.code, 0, `Go gazctl journals suspend failed:\n${s.stderr}`);
    await pollUntil(
      'frag/idle to be FULL-suspended',
      async () => {
        const [j] = await listJson(cluster, 'name=frag/idle');
        return j?.spec.suspend?.level === 'FULL';
      },
      { timeoutMs: 20_000, intervalMs: 200 },
    );

    const dataOnly = await gzOk(cluster, ['journals', 'fragments', '-l', 'set=data', '-o', 'json']);
    const withSuspended = await gzOk(cluster, ['journals', 'fragments', '-l', 'name:prefix=frag/', '-o', 'json']);
    assert.equal(withSuspended.stderr, '');
    assert.equal(withSuspended.stdout.toString('utf8'), dataOnly.stdout.toString('utf8'), 'the same fragments as without the suspended journal');

    const table = await gzOk(cluster, ['journals', 'fragments', '-l', 'name:prefix=frag/']);
    assert.equal(table.stderr, '');
    const rows = tableRows(table.stdout);
    assert.equal(rows.length, want.length);
    assert.ok(rows.every((r) => r[0] !== 'frag/idle'));

    const only = await gzOk(cluster, ['journals', 'fragments', '-l', 'name=frag/idle', '-o', 'json']);
    assert.equal(only.stdout.length, 0, 'nothing listed for the suspended journal alone');
    assert.equal(only.stderr, '');
  });
});
