// Acceptance: `gazctl journals append` and `gazctl journals read` against three reference Go
// brokers + etcd.
//
// * 100 MiB of `--framing lines` appended across 8 journals with each mapping:
//   random, modulo, rendezvous and direct (keyed input: a key line before each record line).
//   For the keyed mappings the expected bytes of every journal are computed here (32-bit
//   FNV-1a; modulo = h mod n over the journals in name order; rendezvous = argmax of
//   h XOR fnv1a(name), ties → lowest index; direct = the key names the journal) and compared by
//   sha256 journal by journal; for random, the multiset of records and the byte count.
// * `--framing none` appends a file atomically to one journal; `--framing fixed` keeps frames.
// * `read --block --tail` streams appends made after it started and writes --offsets-out on
//   SIGINT; offsets files round-trip (--offsets = --offsets-out resumes exactly, `.previous`);
//   `--tail` without `--block` records the current write heads.

import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { delay, startCluster, waitForJournalsAssigned, type Cluster } from '../../src/testing/index.js';
import { describeResult, spawnGazctl } from '../helpers/cli.js';
import {
  brokerEnv,
  filler,
  fnv1a32,
  gz,
  gzOk,
  moduloIndex,
  multisetDigest,
  prng,
  rendezvousIndex,
  sha256,
  splitLines,
  stopwatch,
  tempDir,
} from '../helpers/journals.js';
import { mapLimit } from '../../src/lib/concurrency.js';

const MiB = 1024 * 1024;
const PER_MAPPING = 100 * MiB; // per mapping
const JOURNALS_PER_SET = 8;

/** YAML creating journals `<prefix>j0..j<n-1>` labelled `set=<set>`, replication 3, 1 MiB fragments. */
function setYaml(prefix: string, set: string, n: number, replication = 3): string {
  const children = Array.from({ length: n }, (_, i) => `- name: ${prefix}j${i}\n`).join('');
  return (
    `name: ${prefix}\nreplication: ${replication}\nlabels:\n- name: set\n  value: ${set}\n` +
    'fragment:\n  length: 1048576\n  compression_codec: NONE\n  stores:\n  - file:///\n  refresh_interval: 1m\n' +
    `children:\n${children}`
  );
}

function names(prefix: string, n: number): string[] {
  return Array.from({ length: n }, (_, i) => `${prefix}j${i}`);
}

interface Generated {
  /** The input file's content. */
  input: Buffer;
  /** Records (lines including their newline), in input order. */
  records: Buffer[];
  /** The key line (without newline) preceding each record, when keyed. */
  keys: string[];
}

/** About `bytes` of newline-terminated records `<tag>-<seq> <filler>\n`, each preceded by a key line when `keyOf` is given. */
function generateLines(seed: number, bytes: number, tag: string, keyOf?: (rand: () => number) => string): Generated {
  const rand = prng(seed);
  const pool = filler(rand, MiB);
  const parts: Buffer[] = [];
  const records: Buffer[] = [];
  const keys: string[] = [];
  let size = 0;
  for (let seq = 0; size < bytes; seq++) {
    const len = Math.floor(rand() * 4000);
    const at = Math.floor(rand() * (pool.length - len));
    const rec = Buffer.concat([Buffer.from(`${tag}-${seq} `), pool.subarray(at, at + len), Buffer.from('\n')]);
    if (keyOf) {
      const k = keyOf(rand);
      keys.push(k);
      parts.push(Buffer.from(k + '\n'));
    }
    parts.push(rec);
    records.push(rec);
    size += rec.length;
  }
  return { input: Buffer.concat(parts), records, keys };
}

/** Per-journal expected content: records grouped by `indexOf(key)`, in input order. */
function expectedByJournal(g: Generated, journals: string[], indexOf: (key: string) => number): { sha: string[]; bytes: number[]; counts: number[] } {
  const groups: Buffer[][] = journals.map(() => []);
  g.records.forEach((rec, i) => groups[indexOf(g.keys[i]!)]!.push(rec));
  return {
    sha: groups.map((g) => sha256(g)),
    bytes: groups.map((g) => g.reduce((n, b) => n + b.length, 0)),
    counts: groups.map((g) => g.length),
  };
}


describe('journals append / read (acceptance, 3 Go brokers)', { timeout: 480_000 }, () => {
  let cluster: Cluster;
  let dir: string;
  let cleanupDir = () => {};

  before(async () => {
    cluster = await startCluster({ brokers: 3 });
    ({ dir, cleanup: cleanupDir } = tempDir('gazctl-append-read-'));
  });
  after(async () => {
    await cluster?.stop();
    cleanupDir();
  });

  /** Creates a set of journals and waits until they are assigned. */
  async function createSet(prefix: string, set: string, n: number, replication = 3): Promise<string[]> {
    await gzOk(cluster, ['journals', 'apply'], { input: setYaml(prefix, set, n, replication) });
    const js = names(prefix, n);
    await waitForJournalsAssigned(cluster, js, 60_000);
    return js;
  }

  /** Reads one journal with our CLI (non-blocking, from offset 0). */
  async function readJournal(journal: string): Promise<Buffer> {
    const args = ['journals', 'read', '-l', `name=${journal}`];
    const r = await gz(cluster, args, { timeoutMs: 120_000 });
    assert.equal(r.code, 0, describeResult(args, r));
    return r.stdout;
  }

  async function appendFile(selector: string, input: Buffer, extra: string[], file: string): Promise<void> {
    const path = join(dir, file);
    writeFileSync(path, input);
    const args = ['journals', 'append', '-l', selector, '-i', path, ...extra];
    const r = await gz(cluster, args, { timeoutMs: 180_000 });
    assert.equal(r.code, 0, describeResult(args, r));
  }

  for (const mapping of ['modulo', 'rendezvous', 'direct'] as const) {
    test(`--framing lines --mapping ${mapping}: 100 MiB of keyed records land on the computed journals`, async (t) => {
      const prefix = `ar/${mapping}/`;
      const journals = await createSet(prefix, mapping, JOURNALS_PER_SET);
      const seed = fnv1a32(mapping);
      const g =
        mapping === 'direct'
          ? generateLines(seed, PER_MAPPING, mapping, (rand) => journals[Math.floor(rand() * journals.length)]!)
          : generateLines(seed, PER_MAPPING, mapping, (rand) => `key-${Math.floor(rand() * 1e9)}`);
      const indexOf =
        mapping === 'modulo'
          ? (k: string) => moduloIndex(k, journals.length)
          : mapping === 'rendezvous'
            ? (k: string) => rendezvousIndex(k, journals)
            : (k: string) => journals.indexOf(k);
      const want = expectedByJournal(g, journals, indexOf);
      assert.ok(want.counts.every((c) => c > 0), `every journal should get records: ${want.counts}`);

      const lap = stopwatch();
      await appendFile(`set=${mapping}`, g.input, ['--framing', 'lines', '--mapping', mapping], `${mapping}.in`);
      t.diagnostic(`append of ${(g.input.length / MiB).toFixed(1)} MiB (keys included) took ${lap()}`);

      const lap2 = stopwatch();
      const got = await mapLimit(journals, 2, (j) => readJournal(j));
      t.diagnostic(`8 reads took ${lap2()}`);
      for (let i = 0; i < journals.length; i++) {
        assert.equal(got[i]!.length, want.bytes[i], `${journals[i]}: bytes`);
        assert.equal(sha256(got[i]!), want.sha[i], `${journals[i]}: sha256 of the content`);
      }
    });
  }

  test('--framing lines --mapping random: 100 MiB of records are all there, once', async (t) => {
    const journals = await createSet('ar/random/', 'random', JOURNALS_PER_SET);
    const g = generateLines(fnv1a32('random'), PER_MAPPING, 'random');
    const lap = stopwatch();
    await appendFile('set=random', g.input, ['--framing', 'lines'], 'random.in');
    t.diagnostic(`append of ${(g.input.length / MiB).toFixed(1)} MiB took ${lap()}`);

    const args = ['journals', 'read', '-l', 'set=random'];
    const r = await gzOk(cluster, args, { timeoutMs: 120_000 });
    assert.equal(r.stdout.length, g.input.length, 'total bytes read');
    assert.equal(multisetDigest(splitLines(r.stdout)), multisetDigest(g.records), 'sorted multiset of records');
    // Random spreads ~6,000 records over every journal, each holding whole records only.
    const per = await mapLimit(journals, 2, (j) => readJournal(j));
    let total = 0;
    for (let i = 0; i < journals.length; i++) {
      assert.ok(per[i]!.length > 0, `${journals[i]} got no records`);
      splitLines(per[i]!);
      total += per[i]!.length;
    }
    assert.equal(total, g.input.length);
  });

  test('--framing none appends a whole file atomically to one journal, byte-identical', async () => {
    const journals = await createSet('ar/none/', 'none', 3);
    const rand = prng(7);
    const data = Buffer.alloc(5 * MiB + 12345);
    for (let i = 0; i < data.length; i++) data[i] = Math.floor(rand() * 256); // any bytes, no final newline
    await appendFile('set=none', data, [], 'none.in');

    const got = await Promise.all(journals.map((j) => readJournal(j)));
    const hit = got.map((b, i) => [b.length, i] as const).filter(([n]) => n > 0);
    assert.equal(hit.length, 1, `exactly one journal gets the file: ${got.map((b) => b.length)}`);
    const i = hit[0]![1];
    assert.equal(got[i]!.length, data.length);
    assert.ok(got[i]!.equals(data), 'byte-identical');
    // One append: a single fragment holds all of it (the spool never splits an append).
    const frags = await gzOk(cluster, ['journals', 'fragments', '-l', `name=${journals[i]}`, '-o', 'json']);
    const lines = frags.stdout.toString('utf8').trim().split('\n').map((l) => JSON.parse(l) as { spec: { begin?: number; end?: number } });
    assert.deepEqual(lines.map((f) => [f.spec.begin ?? 0, f.spec.end]), [[0, data.length]], 'one fragment covering the whole append');
  });

  test('--framing lines to a single journal is byte-identical, with lines longer than the input chunks', async () => {
    const [journal] = await createSet('ar/single/', 'single', 1);
    const rand = prng(5);
    const pool = filler(rand, 4 * MiB);
    const parts: Buffer[] = [];
    let size = 0;
    for (let i = 0; size < 12 * MiB; i++) {
      const len = i % 40 === 20 ? MiB + Math.floor(rand() * 2 * MiB) : Math.floor(rand() * 5000);
      const at = Math.floor(rand() * (pool.length - len));
      const line = Buffer.concat([Buffer.from(`single-${i} `), pool.subarray(at, at + len), Buffer.from('\n')]);
      parts.push(line);
      size += line.length;
    }
    const input = Buffer.concat(parts);
    await appendFile('set=single', input, ['--framing', 'lines'], 'single.in');
    const got = await readJournal(journal!);
    assert.equal(got.length, input.length);
    assert.equal(sha256(got), sha256(input));
  });

  test('--framing fixed keeps frames whole (keyed with --mapping modulo)', async () => {
    const journals = await createSet('ar/fixed/', 'fixed', 4);
    const rand = prng(11);
    const frame = (payload: Buffer) => {
      const h = Buffer.alloc(8);
      h.set([0x66, 0x33, 0x93, 0x36]);
      h.writeUInt32LE(payload.length, 4);
      return Buffer.concat([h, payload]);
    };
    const parts: Buffer[] = [];
    const groups: Buffer[][] = journals.map(() => []);
    let size = 0;
    for (let i = 0; size < 4 * MiB; i++) {
      const key = Buffer.from(`fixed-key-${Math.floor(rand() * 1e9)}`);
      // Mostly small frames, and a few bigger than the CLI's 1 MiB input chunks.
      const payload = Buffer.alloc(i % 150 === 75 ? MiB + Math.floor(rand() * MiB) : Math.floor(rand() * 3000));
      for (let b = 0; b < payload.length; b++) payload[b] = Math.floor(rand() * 256); // newlines and magic bytes included
      const rec = frame(payload);
      parts.push(frame(key), rec);
      groups[moduloIndex(key, journals.length)]!.push(rec);
      size += rec.length;
    }
    await appendFile('set=fixed', Buffer.concat(parts), ['--framing', 'fixed', '--mapping', 'modulo'], 'fixed.in');
    const got = await Promise.all(journals.map((j) => readJournal(j)));
    for (let i = 0; i < journals.length; i++) {
      const want = Buffer.concat(groups[i]!);
      assert.equal(got[i]!.length, want.length, `${journals[i]}: bytes`);
      assert.equal(sha256(got[i]!), sha256(want), `${journals[i]}: sha256`);
    }
  });

  test('read --block --tail streams appends made after it started; SIGINT exits 0 and writes --offsets-out', async () => {
    const [journal] = await createSet('ar/tail/', 'tail', 1);
    const old = Buffer.from(Array.from({ length: 1000 }, (_, i) => `old-${i}\n`).join(''));
    await appendFile(`name=${journal}`, old, [], 'tail-old.in');
    let written = old.length;

    const offsetsOut = join(dir, 'tail-offsets.json');
    const args = ['journals', 'read', '-l', `name=${journal}`, '--block', '--tail', '--offsets-out', offsetsOut];
    const reader = spawnGazctl(args, { env: brokerEnv(cluster), timeoutMs: 120_000 });
    try {
      // Ticks until the reader shows one (it starts at the write head as of its first request).
      const ticks: string[] = [];
      const deadline = Date.now() + 60_000;
      while (reader.stdoutBytes() === 0) {
        assert.ok(Date.now() < deadline, `the reader never showed an append\n${reader.stderrText()}`);
        assert.equal(reader.child.exitCode, null, `the reader exited early\n${reader.stderrText()}`);
        const tick = `tick-${ticks.length}\n`;
        await gzOk(cluster, ['journals', 'append', '-l', `name=${journal}`], { input: tick });
        ticks.push(tick);
        written += tick.length;
        await delay(300);
      }
      const fresh = Buffer.from(Array.from({ length: 500 }, (_, i) => `new-${i}\n`).join(''));
      await gzOk(cluster, ['journals', 'append', '-l', `name=${journal}`], { input: fresh });
      written += fresh.length;
      // Wait for the new bytes to arrive.
      while (!reader.stdoutText().endsWith('new-499\n')) {
        assert.ok(Date.now() < deadline, `the reader never showed the new appends; it has:\n${reader.stdoutText().slice(-500)}`);
        await delay(100);
      }
      reader.child.kill('SIGINT');
      const r = await reader.result;
      assert.equal(r.code, 0, describeResult(args, r));
      const out = r.stdout.toString('utf8');
      assert.ok(!out.includes('old-'), 'content from before the reader started is not read');
      const first = ticks.findIndex((tk) => out.startsWith(tk));
      assert.ok(first >= 0, `the output starts with a tick: ${out.slice(0, 100)}`);
      assert.equal(out, ticks.slice(first).join('') + fresh.toString('utf8'), 'exactly the appends made after the reader started, in order');
      assert.ok(existsSync(offsetsOut), '--offsets-out written');
      assert.deepEqual(JSON.parse(readFileSync(offsetsOut, 'utf8')), { [journal!]: written });
    } finally {
      reader.child.kill('SIGKILL');
    }
  });

  test('--tail without --block reads nothing and records the current write heads', async () => {
    const journals = await createSet('ar/heads/', 'heads', 3);
    const sizes = [1234, 0, 98765];
    for (let i = 0; i < journals.length; i++) {
      if (sizes[i]) await appendFile(`name=${journals[i]}`, Buffer.from('h'.repeat(sizes[i]! - 1) + '\n'), [], `heads-${i}.in`);
    }
    const out = join(dir, 'heads.json');
    const r = await gzOk(cluster, ['journals', 'read', '-l', 'set=heads', '--tail', '--offsets-out', out]);
    assert.equal(r.stdout.length, 0, 'nothing read');
    assert.deepEqual(JSON.parse(readFileSync(out, 'utf8')), Object.fromEntries(journals.map((j, i) => [j, sizes[i]])));
    assert.match(readFileSync(out, 'utf8'), /^\{.*\}\n$/, 'compact JSON with a trailing newline');
  });

  test('--offsets and --offsets-out on the same path resume exactly; .previous keeps the input', async () => {
    const journals = await createSet('ar/off/', 'off', 2);
    const state = join(dir, 'state.json');
    const prev = state + '.previous';
    let seq = 0;
    const appendRound = async (round: number): Promise<Buffer[]> => {
      const lines: Buffer[] = [];
      for (const j of journals) {
        const body = Array.from({ length: 200 + round * 37 }, () => `round-${round}-${j}-${seq++}\n`).join('');
        await appendFile(`name=${j}`, Buffer.from(body), [], `off-${round}.in`);
        lines.push(...splitLines(Buffer.from(body)));
      }
      return lines;
    };

    // Content from before the state was initialised is never read.
    await appendRound(0);
    const heads = await gzOk(cluster, ['journals', 'read', '-l', 'set=off', '--tail', '--offsets-out', state]);
    assert.equal(heads.stdout.length, 0);
    // An entry for a journal outside the selector must be carried through.
    const init = JSON.parse(readFileSync(state, 'utf8')) as Record<string, number>;
    writeFileSync(state, JSON.stringify({ ...init, 'other/journal': 42 }) + '\n');

    let expectedState: Record<string, number> = { ...init, 'other/journal': 42 };
    for (let round = 1; round <= 3; round++) {
      const want = await appendRound(round);
      const before = readFileSync(state);
      const outPath = join(dir, `round-${round}.out`);
      const args = ['journals', 'read', '-l', 'set=off', '--offsets', state, '--offsets-out', state, '-o', outPath];
      await gzOk(cluster, args);
      const got = readFileSync(outPath);
      assert.equal(multisetDigest(splitLines(got)), multisetDigest(want), `round ${round}: exactly this round's records, none repeated or missing`);
      assert.ok(readFileSync(prev).equals(before), `round ${round}: ${prev} holds the offsets the run started from`);
      for (const j of journals) expectedState[j] = expectedState[j]! + want.filter((l) => l.includes(`-${j}-`)).reduce((n, l) => n + l.length, 0);
      assert.deepEqual(JSON.parse(readFileSync(state, 'utf8')), expectedState, `round ${round}: offsets after the run`);
    }

    // A run that fails leaves the path missing (not stale) and the input in .previous.
    const good = readFileSync(state);
    const bad = await gz(cluster, ['journals', 'read', '-l', 'set=off', '--offsets', state, '--offsets-out', state, '-o', join(dir, 'bad.out'), '--timeout', '1s'], {
      env: { BROKER_ADDRESS: 'http://127.0.0.1:1' },
    });
    assert.notEqual(bad.code, 0, describeResult(['journals', 'read', '…unreachable broker'], bad));
    assert.ok(!existsSync(state), 'after a failed run the offsets path is missing');
    assert.ok(readFileSync(prev).equals(good), '.previous holds the last good offsets');

    // Restoring .previous resumes exactly where the last good run stopped.
    writeFileSync(state, readFileSync(prev));
    const want = await appendRound(4);
    const outPath = join(dir, 'round-4.out');
    await gzOk(cluster, ['journals', 'read', '-l', 'set=off', '--offsets', state, '--offsets-out', state, '-o', outPath]);
    assert.equal(multisetDigest(splitLines(readFileSync(outPath))), multisetDigest(want));
  });
});
