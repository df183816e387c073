// `gazctl journals flush` end to end. On a cluster of our brokers: a flush over 100 journals (at
// replication 1, and 100 more at replication 3) returns only once every journal's spool is in
// the file store, which the test checks by reading the store's directory itself, not through
// the brokers; and a cron-style "flush, then process the previous day" run finds every byte
// appended before it persisted. Against the reference Go brokers, which lack the flush service,
// the command fails with one line that says so.

import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { JournalClient, appendOnce } from '../../src/lib/client/index.js';
import { goBroker, startCluster, tsBroker, waitForJournalsAssigned, type Cluster } from '../../src/testing/index.js';
import { gz, gzOk, oneStderrLine } from '../helpers/journals.js';

const FRAGMENT_FILE = /^([0-9a-f]{16})-([0-9a-f]{16})-[0-9a-f]{40}\.raw$/;

/** Specs of `count` journals `<prefix>jNNN` at `replication`, with a file:// store. */
function specs(prefix: string, count: number, replication: number, fragment = 'length: 1048576\n  flush_interval: 24h\n'): string {
  const children = Array.from({ length: count }, (_, i) => `- name: ${prefix}j${String(i).padStart(3, '0')}\n`).join('');
  return `name: ${prefix}\nreplication: ${replication}\nlabels:\n- name: suite\n  value: flush\nfragment:\n  ${fragment}  compression_codec: NONE\n  stores:\n  - file:///\n  refresh_interval: 1h\nchildren:\n${children}`;
}

function names(prefix: string, count: number): string[] {
  return Array.from({ length: count }, (_, i) => `${prefix}j${String(i).padStart(3, '0')}`);
}

interface Stored {
  begin: bigint;
  end: bigint;
  content: Buffer;
}

/** The fragment files of `journal` in the cluster's file store, read from disk, in offset order. */
function storedFragments(cluster: Cluster, journal: string): Stored[] {
  const dir = join(cluster.fileRoot, journal);
  if (!existsSync(dir)) return [];
  const out: Stored[] = [];
  for (const f of readdirSync(dir)) {
    const m = FRAGMENT_FILE.exec(f);
    if (!m) continue;
    out.push({ begin: BigInt('0x' + m[1]!), end: BigInt('0x' + m[2]!), content: readFileSync(join(dir, f)) });
  }
  return out.sort((a, b) => (a.begin < b.begin ? -1 : a.begin > b.begin ? 1 : Number(a.end - b.end)));
}

/**
 * Asserts that the stored fragments of `journal` cover [0, content.length) with no gap, each
 * holding exactly its slice of `content`.
 */
function assertStoreCovers(cluster: Cluster, journal: string, content: Buffer): void {
  const frags = storedFragments(cluster, journal);
  let covered = 0n;
  for (const f of frags) {
    assert.equal(f.content.length, Number(f.end - f.begin), `${journal}: stored fragment [${f.begin}, ${f.end}) has ${f.content.length} bytes`);
    assert.ok(f.content.equals(content.subarray(Number(f.begin), Number(f.end))), `${journal}: stored fragment [${f.begin}, ${f.end}) holds other bytes than appended`);
    assert.ok(f.begin <= covered, `${journal}: the store has a gap at [${covered}, ${f.begin})`);
    if (f.end > covered) covered = f.end;
  }
  assert.equal(covered, BigInt(content.length), `${journal}: the store covers [0, ${covered}) of ${content.length} appended bytes (${frags.map((f) => `[${f.begin},${f.end})`).join(' ')})`);
}

interface FlushLine {
  journal: string;
  result: string;
  write_head?: number;
  error?: string;
  fragment?: { name: string; begin: number; end: number; backing_store: string; mod_time: number };
}

function flushLines(stdout: Buffer): FlushLine[] {
  return stdout
    .toString('utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as FlushLine);
}

describe('journals flush on a cluster of our brokers', { timeout: 600_000 }, () => {
  let cluster: Cluster | undefined;
  let client: JournalClient | undefined;
  const content = new Map<string, Buffer>();

  const append = async (journal: string, text: string) => {
    await appendOnce(client!, journal, [Buffer.from(text)], { timeoutMs: 30_000 });
    content.set(journal, Buffer.concat([content.get(journal) ?? Buffer.alloc(0), Buffer.from(text)]));
  };

  before(async () => {
    cluster = await startCluster({ brokers: 3, impl: tsBroker });
    client = new JournalClient({ address: cluster.brokerAddress }, { timeoutMs: 30_000 });
  });
  after(async () => {
    client?.close();
    await cluster?.stop();
  });

  for (const replication of [1, 3]) {
    test(`over 100 journals at replication ${replication}, it returns only once every spool is in the store`, async () => {
      const c = cluster!;
      const prefix = `flush/r${replication}/`;
      await gzOk(c, ['journals', 'apply', '--specs', '-'], { input: specs(prefix, 100, replication) });
      const all = names(prefix, 100);
      const listed = await waitForJournalsAssigned(c, all, 120_000);
      for (const j of all) assert.equal(listed.get(j)!.route!.members.length, replication);
      // Several appends each, so every spool holds more than one commit.
      for (let round = 0; round < 3; round++) {
        await Promise.all(all.map((j) => append(j, `${j} round ${round}\n`)));
      }
      // Nothing rolled yet: the fragment length and flush interval are far off.
      for (const j of all) assert.deepEqual(storedFragments(c, j), [], `${j} has nothing in the store before the flush`);

      const r = await gzOk(c, ['journals', 'flush', '-l', `prefix=${prefix}`, '-o', 'json'], { timeoutMs: 120_000 });
      // Straight after the command returned, without waiting: the store holds every byte.
      for (const j of all) assertStoreCovers(c, j, content.get(j)!);

      const lines = flushLines(r.stdout);
      assert.deepEqual(lines.map((l) => l.journal).sort(), all);
      for (const l of lines) {
        const n = content.get(l.journal)!.length;
        assert.equal(l.result, 'flushed', JSON.stringify(l));
        assert.equal(l.write_head, n);
        assert.equal(l.fragment?.begin, 0);
        assert.equal(l.fragment?.end, n);
        assert.equal(l.fragment?.backing_store, 'file:///');
        assert.ok((l.fragment?.mod_time ?? 0) > 0, JSON.stringify(l));
        assert.ok(existsSync(join(c.fileRoot, l.fragment!.name)), `${l.fragment!.name} is in the store`);
      }

      // A second flush finds the spools empty and reports the fragment already stored.
      const again = flushLines((await gzOk(c, ['journals', 'flush', '-l', `prefix=${prefix}`, '-o', 'json'], { timeoutMs: 120_000 })).stdout);
      for (const l of again) {
        assert.equal(l.result, 'empty', JSON.stringify(l));
        assert.equal(l.fragment?.end, content.get(l.journal)!.length);
      }
    });
  }

  test('a cron-style run after the UTC day boundary finds every byte of the previous day persisted', async () => {
    // The clock cannot be moved, so the day boundary is stood in for by the moment the cron job
    // runs: what was appended before it is "the previous day", what is appended after it "the
    // new day". Each journal's fragments roll every 24 h on the UTC day (flush_interval) and on a
    // small length, so the previous day ends up in fragments persisted by length rolls (maybe
    // still uploading) and in an open spool. The job flushes, takes the time, and reads what
    // was persisted up to then: that must be every byte of the previous day, and the store
    // (read from disk) must cover it.
    const c = cluster!;
    const prefix = 'flush/cron/';
    await gzOk(c, ['journals', 'apply', '--specs', '-'], { input: specs(prefix, 10, 3, 'length: 1024\n  flush_interval: 24h\n') });
    const all = names(prefix, 10);
    await waitForJournalsAssigned(c, all, 60_000);
    for (let i = 0; i < 40; i++) await Promise.all(all.map((j) => append(j, `${j} previous day, event ${String(i).padStart(2, '0')} `.padEnd(99, '.') + '\n')));
    const previousDay = new Map(all.map((j) => [j, content.get(j)!]));

    await gzOk(c, ['journals', 'flush', '-l', `prefix=${prefix}`], { timeoutMs: 60_000 });
    const to = Math.ceil(Date.now() / 1000);
    for (const j of all) {
      assertStoreCovers(c, j, previousDay.get(j)!);
      // 4000 bytes at a fragment length of 1024: rolls on length, then the flush's.
      assert.ok(storedFragments(c, j).length >= 3, `${j}: the previous day spans several fragments`);
    }
    // The new day starts: appends after the job go to new spools, not into the store.
    await Promise.all(all.map((j) => append(j, `${j} new day\n`)));
    for (const j of all) assertStoreCovers(c, j, previousDay.get(j)!);

    // The batch job: everything persisted up to the time taken after the flush.
    for (const j of all) {
      const r = await gzOk(c, ['journals', 'read', '-l', `name=${j}`, '--to', String(to)], { timeoutMs: 60_000 });
      assert.ok(r.stdout.equals(previousDay.get(j)!), `${j}: read --to ${to} gives the previous day:\n${r.stdout.toString('utf8')}`);
    }
  });

  test('bad inputs: one line on stderr and the exit code', async () => {
    const c = cluster!;
    const none = await gz(c, ['journals', 'flush', '-l', 'prefix=flush/nothing-here/']);
    assert.equal(none.code, 1);
    assert.match(oneStderrLine(['journals', 'flush'], none), /no journals match selector/);
    const noSelector = await gz(c, ['journals', 'flush']);
    assert.equal(noSelector.code, 2);
    oneStderrLine(['journals', 'flush'], noSelector);
    const badFormat = await gz(c, ['journals', 'flush', '-l', 'prefix=flush/', '-o', 'yaml']);
    assert.equal(badFormat.code, 2);
    oneStderrLine(['journals', 'flush', '-o', 'yaml'], badFormat);
  });
});

describe('journals flush against the reference Go brokers', { timeout: 300_000 }, () => {
  let cluster: Cluster | undefined;

  before(async () => {
    cluster = await startCluster({ impl: goBroker });
  });
  after(() => cluster?.stop());

  test('exits 1 with one line naming the missing feature and fragment.flush_interval', async () => {
    const c = cluster!;
    await gzOk(c, ['journals', 'apply', '--specs', '-'], { input: specs('flush/go/', 2, 1) });
    await waitForJournalsAssigned(c, names('flush/go/', 2), 60_000);
    await gzOk(c, ['journals', 'append', '-l', 'name=flush/go/j000'], { input: 'held in a spool\n' });
    const args = ['journals', 'flush', '-l', 'prefix=flush/go/'];
    const r = await gz(c, args);
    assert.equal(r.code, 1);
    const line = oneStderrLine(args, r);
    assert.match(line, /lacks on-demand flush/);
    assert.match(line, /fragment\.flush_interval/);
    assert.equal(r.stdout.toString('utf8'), '');
  });
});
