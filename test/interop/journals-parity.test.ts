// Parity of our gazctl with the reference Go gazctl (v0.103.0), side by side on one 3-broker
// cluster: the same commands must print the same bytes. A varied hierarchy (nested directories,
// shared and multi-valued labels, every codec, several stores, retention, flush interval, flags,
// an empty store list, a fully suspended journal) is applied with the Go gazctl and filled with a
// little data; then list (yaml/json/tables), fragments (json/table), read (+ offsets files) are
// compared, YAML is exchanged between the two tools, and both apply the same YAML.
//
// Where docs/divergences.md lists a deliberate difference, the documented behaviour is asserted
// instead (D6: fully suspended journals skipped by `fragments -o json`; D9: apply's summary line).
//
// Outputs that depend on cluster state are compared "sandwiched": Go, ours, Go. If the two Go
// runs differ the state moved meanwhile and the comparison is retried; if they agree, ours must
// equal them. This keeps e.g. the "Persisted" column (seconds) and List headers (etcd revision)
// comparable without masking anything.

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import {
  delay,
  pollUntil,
  runGoGazctl,
  startCluster,
  waitForJournalsAssigned,
  type Cluster,
  type GoGazctlResult,
} from '../../src/testing/index.js';
import { describeResult, runGazctl, type GazctlResult } from '../helpers/cli.js';

// ---- the hierarchy --------------------------------------------------------------------------

/** The parity hierarchy under `p` (a directory name ending in `/`). */
function hierarchy(p: string): string {
  return `name: ${p}
replication: 3
labels:
- name: app
  value: parity
- name: team
  value: core
fragment:
  length: 1048576
  compression_codec: NONE
  stores:
  - file:///primary/
  refresh_interval: 24h
children:
- name: ${p}archive
  flags: O_RDONLY
  fragment:
    stores: []
    retention: 8760h
- name: ${p}events/
  labels:
  - name: content-type
    value: application/x-ndjson
  fragment:
    compression_codec: SNAPPY
    retention: 720h
  children:
  - name: ${p}events/clicks
    labels:
    - name: region
      value: eu
    - name: region
      value: us
    flags: O_RDWR
  - name: ${p}events/views
    labels:
    - name: region
      value: us
    fragment:
      compression_codec: ZSTANDARD
    max_append_rate: 1048576
- name: ${p}logs/
  replication: 2
  labels:
  - name: tier
    value: ""
  fragment:
    length: 1024
    compression_codec: GZIP
    stores:
    - file:///logs/
    - file:///backup/
    refresh_interval: 1s
    flush_interval: 2h
  children:
  - name: ${p}logs/a
  - name: ${p}logs/b
    suspend:
      level: FULL
  - name: ${p}logs/c
    fragment:
      path_postfix_template: date={{.Spool.FirstAppendTime.Format "2006-01-02"}}
- name: ${p}raw
  replication: 1
  labels:
  - name: app.gazette.dev/message-type
    value: Raw
  - name: content-type
    value: text/plain
  fragment:
    compression_codec: GZIP_OFFLOAD_DECOMPRESSION
    stores:
    - s3://bucket/prefix/?profile=x
`;
}

const P = 'parity/';
/** Journals that get brokers assigned (parity/logs/b is fully suspended and has none). */
const ASSIGNED = ['archive', 'events/clicks', 'events/views', 'logs/a', 'logs/c', 'raw'].map((n) => P + n);
/** Journals persisting within a second (refresh_interval 1s). */
const PERSISTING = [`${P}logs/a`, `${P}logs/c`];

// ---- running both tools ---------------------------------------------------------------------

let cluster: Cluster | undefined;
let work = '';

type Result = { code: number | null; stdout: Buffer; stderr: string };

function go(args: string[], input?: string, extraEnv: Record<string, string> = {}): Promise<GoGazctlResult> {
  return runGoGazctl(args, { brokerAddress: cluster!.brokerAddress, input, env: extraEnv, cwd: work, timeoutMs: 30_000 });
}

function ours(args: string[], input?: string): Promise<GazctlResult> {
  return runGazctl(args, { env: { BROKER_ADDRESS: cluster!.brokerAddress }, input, timeoutMs: 30_000 });
}

function describeAny(who: string, args: string[], r: Result): string {
  return `${who}: ${describeResult(args, r as GazctlResult)}`;
}

async function goOk(args: string[], input?: string): Promise<GoGazctlResult> {
  const r = await go(args, input);
  assert.equal(r.code, 0, describeAny('Go gazctl', args, r));
  return r;
}

async function oursOk(args: string[], input?: string): Promise<GazctlResult> {
  const r = await ours(args, input);
  assert.equal(r.code, 0, describeAny('our gazctl', args, r));
  return r;
}

/**
 * Runs `args` with Go, ours, Go. Retries while the two Go outputs differ (cluster state moved);
 * once they agree, ours must print exactly the same bytes. Returns the common output.
 */
async function assertSameOutput(args: string[], tries = 5, alignToSecond = false): Promise<string> {
  for (let i = 0; i < tries; i++) {
    // Relative times ("3 seconds ago") change on whole seconds: start just after one.
    if (alignToSecond) await delay(1020 - (Date.now() % 1000));
    const g1 = await goOk(args);
    const o = await oursOk(args);
    const g2 = await goOk(args);
    if (!g1.stdout.equals(g2.stdout)) {
      await delay(300);
      continue;
    }
    assert.equal(o.stdout.toString('utf8'), g1.stdout.toString('utf8'), `stdout of "gazctl ${args.join(' ')}" differs from the Go gazctl's`);
    assert.ok(o.stdout.equals(g1.stdout), `stdout bytes of "gazctl ${args.join(' ')}" differ`);
    return g1.stdout.toString('utf8');
  }
  assert.fail(`the Go gazctl's output of "gazctl ${args.join(' ')}" never settled over ${tries} tries`);
}

// ---- helpers over outputs -------------------------------------------------------------------

interface FragmentLine {
  spec: { journal: string; begin?: number; end: number; mod_time?: number; backing_store?: string };
}

function fragmentLines(stdout: Buffer | string): FragmentLine[] {
  return stdout
    .toString()
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as FragmentLine);
}

/** Splits read output (newline-terminated JSON records {"j": journal, ...}) by journal. */
function byJournal(out: Buffer): Map<string, string[]> {
  const m = new Map<string, string[]>();
  const text = out.toString('utf8');
  assert.ok(text === '' || text.endsWith('\n'), 'read output must end with a whole record');
  for (const line of text.split('\n').slice(0, -1)) {
    const j = (JSON.parse(line) as { j: string }).j;
    if (!m.has(j)) m.set(j, []);
    m.get(j)!.push(line);
  }
  return m;
}

interface ListedJournal {
  spec: Record<string, unknown> & { name: string };
  mod_revision: string;
}

/** The specs of a `list -o json` output, with `prefix` replaced by `<P>/` in names. */
function specsOf(stdout: Buffer, prefix: string): unknown[] {
  const doc = JSON.parse(stdout.toString('utf8')) as { journals: ListedJournal[] };
  return doc.journals.map((j) => ({ ...j.spec, name: j.spec.name.replace(prefix, '<P>/') }));
}

/** `count` newline-terminated JSON records of `journal`, numbered from `from`. */
function records(journal: string, from: number, count: number): string {
  let out = '';
  for (let n = from; n < from + count; n++) out += JSON.stringify({ j: journal, n, pad: 'x'.repeat(20 + (n % 7)) }) + '\n';
  return out;
}

/** Waits until every fragment of `journals` is persisted and they cover `ends[journal]` bytes. */
async function waitPersisted(ends: Map<string, number>): Promise<void> {
  const sel = `name in (${[...ends.keys()].join(',')})`;
  await pollUntil(
    `fragments of ${[...ends.keys()].join(', ')} to be persisted`,
    async () => {
      const r = await go(['journals', 'fragments', '-l', sel, '-o', 'json']);
      if (r.code !== 0) return false;
      const frags = fragmentLines(r.stdout);
      for (const [j, end] of ends) {
        const fs = frags.filter((f) => f.spec.journal === j);
        if (fs.length === 0 || fs.some((f) => !f.spec.mod_time)) return false;
        if (Math.max(...fs.map((f) => f.spec.end)) !== end) return false;
      }
      return true;
    },
    { timeoutMs: 30_000, intervalMs: 250 },
  );
}

// ---- the suite ------------------------------------------------------------------------------

describe('journals: our gazctl vs the reference Go gazctl', { timeout: 300_000 }, () => {
  /** Appended content per journal, in order. */
  const content = new Map<string, string>();
  /** End offset of the first append of parity/logs/a (a fragment boundary). */
  let logsAFirstEnd = 0;

  async function append(journal: string, data: string): Promise<void> {
    await goOk(['journals', 'append', '-l', `name=${journal}`], data);
    content.set(journal, (content.get(journal) ?? '') + data);
  }

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'gazctl-parity-'));
    cluster = await startCluster({ brokers: 3 });
    // file:// stores must exist before the brokers' first health check.
    for (const d of ['primary', 'logs', 'backup']) mkdirSync(join(cluster.fileRoot, d), { recursive: true });
    await goOk(['journals', 'apply'], hierarchy(P));
    await waitForJournalsAssigned(cluster, ASSIGNED, 30_000);

    // parity/logs/* roll a fragment once it exceeds 1 KiB, at the next append, and refresh their
    // index every second: two appends of > 1 KiB and an empty append to roll the last one give
    // two persisted fragments, the second at offset > 0. parity/events/* keep theirs spooled.
    const a1 = records(`${P}logs/a`, 1, 25);
    await append(`${P}logs/a`, a1);
    logsAFirstEnd = Buffer.byteLength(a1);
    await append(`${P}logs/a`, records(`${P}logs/a`, 26, 25));
    await append(`${P}logs/c`, records(`${P}logs/c`, 1, 30));
    await append(`${P}events/clicks`, records(`${P}events/clicks`, 1, 2));
    await append(`${P}events/views`, records(`${P}events/views`, 1, 1));
    await append(`${P}events/views`, records(`${P}events/views`, 2, 1));
    for (const j of PERSISTING) await append(j, '');
    await waitPersisted(new Map(PERSISTING.map((j) => [j, Buffer.byteLength(content.get(j)!)])));
  });

  after(async () => {
    await cluster?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  // ---- journals list ------------------------------------------------------------------------

  test('list -o yaml, whole hierarchy and with selectors', async () => {
    const all = await assertSameOutput(['journals', 'list', '-o', 'yaml']);
    // The output really is the varied hierarchy (not two empty documents).
    for (const s of ['name: parity/', 'compression_codec: ZSTANDARD', 'level: FULL', 'flush_interval: 2h0m0s', 'value: ""', 'flags: O_RDONLY']) {
      assert.ok(all.includes(s), `expected ${JSON.stringify(s)} in\n${all}`);
    }
    for (const sel of [
      'name:prefix=parity/events/',
      'prefix=parity/logs/',
      'region=us',
      'region in (eu,us)',
      'region notin (eu)',
      'team=core,!content-type',
      'app:prefix=par,name!=parity/raw',
      'tier',
      'name=parity/raw', // one journal: a bare terminal document
      'app=nothing', // no journal: {}
    ]) {
      await assertSameOutput(['journals', 'list', '-l', sel, '-o', 'yaml']);
    }
    assert.equal((await oursOk(['journals', 'list', '-l', 'app=nothing', '-o', 'yaml'])).stdout.toString(), '{}\n');
  });

  test('list -o json, whole listing and with selectors', async () => {
    const all = await assertSameOutput(['journals', 'list', '-o', 'json']);
    assert.ok(!all.endsWith('\n'), 'a compact JSON document without a trailing newline');
    assert.equal((JSON.parse(all) as { journals: unknown[] }).journals.length, 7);
    for (const sel of ['name:prefix=parity/logs/', 'region=us', 'name=parity/logs/b', 'app=nothing']) {
      await assertSameOutput(['journals', 'list', '-l', sel, '-o', 'json']);
    }
  });

  test('list tables: -p -r --rf --stores -L region', async () => {
    await assertSameOutput(['journals', 'list']);
    const t = await assertSameOutput(['journals', 'list', '-p', '-r', '--rf', '--stores', '-L', 'region']);
    assert.match(t, /<none> <S>/, 'the suspended journal is marked');
    await assertSameOutput(['journals', 'list', '-l', 'name:prefix=parity/events/', '--rf', '-L', 'region', '-L', 'app', '-L', 'tier']);
    await assertSameOutput(['journals', 'list', '-pr', '--stores']);
  });

  test('list tables: label columns whose names hold "-", "." and "/"', async () => {
    // tablewriter titles a header by splitting it into character classes:
    // content-type → "CONTENT - TYPE", app.gazette.dev/message-type → "APP . GAZETTE . DEV / MESSAGE - TYPE".
    await assertSameOutput(['journals', 'list', '-L', 'content-type', '-L', 'app.gazette.dev/message-type']);
  });

  test('list table of an empty selection', async () => {
    // tablewriter prints no header separator when there are no rows.
    await assertSameOutput(['journals', 'list', '-l', 'app=nothing']);
    await assertSameOutput(['journals', 'list', '-l', 'app=nothing', '-p', '-r', '--rf', '--stores', '-L', 'region']);
  });

  // ---- journals fragments -------------------------------------------------------------------

  test('fragments -o json: spooled, persisted (gzip, path postfix) and signed URLs', async () => {
    const ev = await assertSameOutput(['journals', 'fragments', '-l', 'name:prefix=parity/events/', '-o', 'json']);
    const evf = fragmentLines(ev);
    assert.ok(evf.length >= 2 && evf.every((f) => !f.spec.mod_time && !f.spec.backing_store), ev);
    const logs = await assertSameOutput(['journals', 'fragments', '-l', 'name in (parity/logs/a,parity/logs/c)', '-o', 'json']);
    const lf = fragmentLines(logs);
    assert.ok(lf.filter((f) => f.spec.journal === `${P}logs/a`).length >= 2, logs);
    assert.ok(lf.every((f) => f.spec.mod_time && f.spec.backing_store === 'file:///logs/'), logs);
    assert.match(logs, /"path_postfix":"date=\d{4}-\d\d-\d\d"/);
    await assertSameOutput(['journals', 'fragments', '-l', 'name in (parity/logs/c,parity/archive)', '--url-ttl', '1h', '-o', 'json']);
  });

  test('fragments -o json skips a fully suspended journal (D6; Go crashes)', async () => {
    const args = ['journals', 'fragments', '-l', 'name in (parity/logs/b,parity/logs/c)', '-o', 'json'];
    const o = await oursOk(args);
    const g = await goOk(['journals', 'fragments', '-l', 'name=parity/logs/c', '-o', 'json']);
    assert.equal(o.stdout.toString(), g.stdout.toString());
    // The documented upstream behaviour this divergence fixes: a nil-pointer panic, exit 2.
    const crash = await go(args);
    assert.equal(crash.code, 2, describeAny('Go gazctl', args, crash));
  });

  test('fragments table, with and without URLs', async () => {
    const t = await assertSameOutput(['journals', 'fragments', '-l', 'team=core,name!=parity/raw'], 5, true);
    assert.match(t, /│ (now|\d+ seconds? ago|\d+ minutes? ago) +│/, 'persisted fragments show their age');
    await assertSameOutput(['journals', 'fragments', '-l', 'name=parity/logs/c', '--url-ttl', '10m'], 5, true);
    await assertSameOutput(['journals', 'fragments', '-l', 'name:prefix=parity/events/']);
  });

  test('fragments table of an empty selection', async () => {
    await assertSameOutput(['journals', 'fragments', '-l', 'name=parity/logs/b']);
  });

  // ---- journals read ------------------------------------------------------------------------

  test('read: one journal over persisted gzip fragments, proxied and direct', async () => {
    const args = ['journals', 'read', '-l', 'name=parity/logs/a'];
    const g = await goOk(args);
    const o = await oursOk(args);
    assert.equal(g.stdout.toString(), content.get(`${P}logs/a`));
    assert.equal(o.stdout.toString(), g.stdout.toString());
    // Direct reads: signed file:// URLs fetched by the client under --file-root.
    const direct = [...args, '--broker.cache.size', '16', '--file-root', cluster!.fileRoot];
    const gd = await goOk(direct);
    const od = await oursOk(direct);
    assert.equal(gd.stdout.toString(), content.get(`${P}logs/a`));
    assert.equal(od.stdout.toString(), gd.stdout.toString());
  });

  test('read: a selector over several journals, with --offsets-out', async () => {
    const sel = 'team=core,name!=parity/raw'; // incl. an empty journal and a suspended one
    const gOff = join(work, 'go-offsets.json');
    const oOff = join(work, 'our-offsets.json');
    const g = await goOk(['journals', 'read', '-l', sel, '--offsets-out', gOff]);
    const o = await oursOk(['journals', 'read', '-l', sel, '--offsets-out', oOff]);
    // Journals interleave a fragment at a time in arrival order: compare per journal.
    const gj = byJournal(g.stdout);
    const oj = byJournal(o.stdout);
    assert.deepEqual([...oj.keys()].sort(), [...gj.keys()].sort());
    for (const [j, lines] of gj) {
      assert.equal(lines.join('\n') + '\n', content.get(j), `Go read of ${j}`);
      assert.deepEqual(oj.get(j), lines, `our read of ${j}`);
    }
    assert.equal(o.stdout.length, g.stdout.length);
    const goOffsets = readFileSync(gOff, 'utf8');
    assert.equal(readFileSync(oOff, 'utf8'), goOffsets);
    assert.match(goOffsets, /^\{"parity\/archive":0,"parity\/events\/clicks":\d+,/);
    assert.ok(!goOffsets.includes('parity/logs/b'), 'a suspended journal is not read');
  });

  test('read: resume from --offsets into the same --offsets-out file', async () => {
    const start = JSON.stringify({ 'parity/logs/a': logsAFirstEnd, 'gone/journal': 7 });
    const runs: { out: string; offsets: string; previous: string }[] = [];
    for (const run of [go, ours]) {
      const f = join(work, `resume-${runs.length}.json`);
      writeFileSync(f, start);
      const args = ['journals', 'read', '-l', 'name=parity/logs/a', '--offsets', f, '--offsets-out', f];
      const r = await run(args);
      assert.equal(r.code, 0, describeAny(run === go ? 'Go gazctl' : 'our gazctl', args, r));
      runs.push({ out: r.stdout.toString(), offsets: readFileSync(f, 'utf8'), previous: readFileSync(f + '.previous', 'utf8') });
    }
    const [g, o] = runs as [(typeof runs)[0], (typeof runs)[0]];
    assert.equal(g.out, content.get(`${P}logs/a`)!.slice(logsAFirstEnd));
    assert.deepEqual(o, g);
    assert.equal(g.previous, start);
  });

  test('read --tail --offsets-out records the write heads', async () => {
    const gOff = join(work, 'go-heads.json');
    const oOff = join(work, 'our-heads.json');
    const sel = 'name:prefix=parity/events/';
    const g = await goOk(['journals', 'read', '-l', sel, '--tail', '--offsets-out', gOff]);
    const o = await oursOk(['journals', 'read', '-l', sel, '--tail', '--offsets-out', oOff]);
    assert.equal(g.stdout.length, 0);
    assert.equal(o.stdout.length, 0);
    const want = `{"parity/events/clicks":${Buffer.byteLength(content.get(`${P}events/clicks`)!)},"parity/events/views":${Buffer.byteLength(content.get(`${P}events/views`)!)}}\n`;
    assert.equal(readFileSync(gOff, 'utf8'), want);
    assert.equal(readFileSync(oOff, 'utf8'), want);
  });

  // ---- YAML exchanged between the tools, and apply ------------------------------------------

  test('the same YAML applied by each tool gives the same specs', async () => {
    const goP = 'eqgo/';
    const tsP = 'eqts/';
    const listBoth = async () => {
      const g = await goOk(['journals', 'list', '-l', `prefix=${goP}`, '-o', 'json']);
      const o = await goOk(['journals', 'list', '-l', `prefix=${tsP}`, '-o', 'json']);
      return { g: specsOf(g.stdout, goP), o: specsOf(o.stdout, tsP) };
    };

    // 1. Create.
    const gc = await goOk(['journals', 'apply'], hierarchy(goP));
    const oc = await oursOk(['journals', 'apply'], hierarchy(tsP));
    assert.equal(gc.stderr, '', 'the Go gazctl is silent on success');
    // D9: ours prints one summary line.
    assert.match(oc.stderr, /^applied 7 journal changes in 1 transaction \(etcd revision \d+\)\n$/);
    let s = await listBoth();
    assert.equal(s.g.length, 7);
    assert.deepEqual(s.o, s.g);

    // 2. Update through each tool's own listing: same edit, with revisions.
    const edit = (yaml: string) =>
      yaml
        .replace(/^  replication: 2$/m, '  replication: 1')
        .replace('max_append_rate: 1048576', 'max_append_rate: 2097152')
        .replace(/(- name: region\n {6}value:) eu\n/, '$1 asia\n');
    const gy = (await goOk(['journals', 'list', '-l', `prefix=${goP}`, '-o', 'yaml'])).stdout.toString();
    const oy = (await oursOk(['journals', 'list', '-l', `prefix=${tsP}`, '-o', 'yaml'])).stdout.toString();
    assert.equal(oy.replaceAll(tsP, goP).replace(/revision: \d+/g, 'revision: N'), gy.replace(/revision: \d+/g, 'revision: N'));
    assert.notEqual(edit(gy), gy, 'the edit changes the YAML');
    await goOk(['journals', 'apply'], edit(gy));
    await oursOk(['journals', 'apply'], edit(oy));
    s = await listBoth();
    assert.deepEqual(s.o, s.g);
    const views = s.g.find((j) => (j as { name: string }).name === '<P>/events/views') as { max_append_rate: string };
    assert.equal(views.max_append_rate, '2097152', 'the edit was applied');
    assert.ok(JSON.stringify(s.g).includes('"value":"asia"'), 'the label value was changed');

    // 3. Delete one journal by name and revision, from a hand-written document.
    const rev = async (name: string) => {
      const r = await goOk(['journals', 'list', '-l', `name=${name}`, '-o', 'json']);
      return (JSON.parse(r.stdout.toString()) as { journals: ListedJournal[] }).journals[0]!.mod_revision;
    };
    await goOk(['journals', 'apply'], `name: ${goP}raw\ndelete: true\nrevision: ${await rev(`${goP}raw`)}\n`);
    await oursOk(['journals', 'apply'], `name: ${tsP}raw\ndelete: true\nrevision: ${await rev(`${tsP}raw`)}\n`);
    s = await listBoth();
    assert.equal(s.g.length, 6);
    assert.deepEqual(s.o, s.g);
  });

  test('YAML listed by ours is applied by Go, and YAML listed by Go is applied by ours', async () => {
    // Ours lists, Go applies an edited copy (retention of a directory, a new journal).
    const oy = (await oursOk(['journals', 'list', '-l', 'name:prefix=eqts/events/', '-o', 'yaml'])).stdout.toString();
    const ox = oy.replace('retention: 720h0m0s', 'retention: 48h0m0s') + '';
    assert.notEqual(ox, oy);
    const gApply = await go(['journals', 'apply'], ox);
    assert.equal(gApply.code, 0, describeAny('Go gazctl', ['journals', 'apply'], gApply));
    const after1 = (await goOk(['journals', 'list', '-l', 'name:prefix=eqts/events/', '-o', 'yaml'])).stdout.toString();
    assert.match(after1, /retention: 48h0m0s/);

    // Go lists, ours applies an edited copy.
    const gy = (await goOk(['journals', 'list', '-l', 'name:prefix=eqgo/logs/', '-o', 'yaml'])).stdout.toString();
    const gx = gy.replace('refresh_interval: 1s', 'refresh_interval: 5m0s');
    assert.notEqual(gx, gy);
    await oursOk(['journals', 'apply'], gx);
    const after2 = (await oursOk(['journals', 'list', '-l', 'name:prefix=eqgo/logs/', '-o', 'yaml'])).stdout.toString();
    assert.match(after2, /refresh_interval: 5m0s/);

    // Both now see the same listings; a listing of ours re-applied unchanged by Go is accepted.
    await assertSameOutput(['journals', 'list', '-l', 'name:prefix=eq', '-o', 'yaml']);
    const now = (await oursOk(['journals', 'list', '-l', 'prefix=eqts/', '-o', 'yaml'])).stdout.toString();
    await goOk(['journals', 'apply'], now);
    await assertSameOutput(['journals', 'list', '-l', 'prefix=eqts/', '-o', 'json']);
  });
});
