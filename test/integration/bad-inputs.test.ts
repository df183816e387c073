// Bad inputs: every case runs our gazctl against a running cluster (or an unreachable address)
// and must fail cleanly (docs/divergences.md D1): a non-zero exit status (2 for usage errors,
// 1 for other failures), exactly one line `gazctl: …` on stderr that names the problem, nothing
// on stdout — and nothing changed: the listing (`journals list -o json`, taken with the reference
// Go gazctl, etcd revision included) and every journal's write head are the same before and after.
//
// The cases are a table: adding one is one entry in CASES.

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { runGoGazctl, startCluster, waitForJournalsAssigned, type Cluster } from '../../src/testing/index.js';
import { describeResult, runGazctl } from '../helpers/cli.js';

interface BadInput {
  name: string;
  /** Arguments after `gazctl`; `{dir}` is replaced by the case's own temp dir (also its cwd). */
  args: string[];
  /** stdin (empty when absent). */
  input?: string;
  /** Files to create in the case's dir first (a `gazctl.ini` there is picked up). */
  files?: Record<string, string>;
  /** Directories to create in the case's dir first. */
  dirs?: string[];
  /** Expected exit status: 2 for usage errors (a bad flag value included), 1 for other failures (D1). */
  code: 1 | 2;
  /** What the one stderr line must say (each pattern must match). */
  says: RegExp[];
  /** Upper bound on the run time (default 20 s). */
  maxMs?: number;
}

const FRAG = 'fragment: {length: 1024, compression_codec: NONE, refresh_interval: 1m}';
const yaml = (...lines: string[]) => lines.join('\n') + '\n';
const apply = ['journals', 'apply'];

const CASES: BadInput[] = [
  // ---- YAML syntax and decoding (journals apply) ----
  { name: 'malformed YAML: unclosed flow sequence', args: apply, input: yaml('name: bad/x', 'replication: [1, 2', FRAG), code: 1, says: [/stdin/, /line \d+/, /YAML/i] },
  { name: 'malformed YAML: tab indentation', args: apply, input: yaml('name: bad/x', 'replication: 1', '\tfragment: 2'), code: 1, says: [/line 3\b/, /tab/i] },
  { name: 'unknown field', args: apply, input: yaml('name: bad/x', 'replication: 1', 'bogus: 1', FRAG), code: 1, says: [/line 3\b/, /unknown field "bogus"/] },
  { name: 'duplicate key', args: apply, input: yaml('name: bad/x', 'replication: 1', 'replication: 2', FRAG), code: 1, says: [/line 3\b/, /duplicate key "replication"/] },
  { name: 'wrong type', args: apply, input: yaml('name: bad/x', 'replication: three', FRAG), code: 1, says: [/line 2\b/, /replication/, /"three"/] },
  { name: 'bad codec name', args: apply, input: yaml('name: bad/x', 'replication: 1', 'fragment: {length: 1024, compression_codec: LZ4, refresh_interval: 1m}'), code: 1, says: [/line 3\b/, /compression_codec/, /"LZ4"/] },
  { name: 'bad duration', args: apply, input: yaml('name: bad/x', 'replication: 1', 'fragment: {length: 1024, compression_codec: NONE, refresh_interval: 1 minute}'), code: 1, says: [/refresh_interval/, /"1 minute"/] },
  { name: 'empty input', args: apply, input: '', code: 1, says: [/stdin/, /empty/] },
  { name: 'whitespace-only input', args: apply, input: '  \n\n', code: 1, says: [/empty/] },

  // ---- spec validation ----
  { name: 'invalid journal name', args: apply, input: yaml('name: bad//x', 'replication: 1', FRAG), code: 1, says: [/"bad\/\/x"/, /clean path/] },
  { name: 'journal name too short', args: apply, input: yaml('name: a/b', 'replication: 1', FRAG), code: 1, says: [/"a\/b"/, /length/] },
  { name: 'invalid label name', args: apply, input: yaml('name: bad/x', 'replication: 1', 'labels: [{name: "b@d", value: v}]', FRAG), code: 1, says: [/"b@d"/, /"@"/] },
  { name: 'invalid label value', args: apply, input: yaml('name: bad/x', 'replication: 1', 'labels: [{name: ok, value: "sp ace"}]', FRAG), code: 1, says: [/"sp ace"/] },
  { name: 'unsorted labels', args: apply, input: yaml('name: bad/x', 'replication: 1', 'labels: [{name: zz, value: a}, {name: aa, value: b}]', FRAG), code: 1, says: [/not sorted/, /"aa"/] },
  { name: 'reserved label', args: apply, input: yaml('name: bad/x', 'replication: 1', 'labels: [{name: name, value: x}]', FRAG), code: 1, says: [/"name"/, /reserved/] },
  { name: 'single-valued label with two values', args: apply, input: yaml('name: bad/x', 'replication: 1', 'labels: [{name: content-type, value: a/b}, {name: content-type, value: c/d}]', FRAG), code: 1, says: [/content-type/, /one value/] },
  { name: 'replication out of range', args: apply, input: yaml('name: bad/x', 'replication: 6', FRAG), code: 1, says: [/replication/, /\b6\b/, /range/] },
  { name: 'fragment length out of range', args: apply, input: yaml('name: bad/x', 'replication: 1', 'fragment: {length: 100, compression_codec: NONE, refresh_interval: 1m}'), code: 1, says: [/length/, /\b100\b/] },
  { name: 'bad store URL', args: apply, input: yaml('name: bad/x', 'replication: 1', 'fragment: {length: 1024, compression_codec: NONE, refresh_interval: 1m, stores: ["ftp://host/x/"]}'), code: 1, says: [/stores\[0\]/, /ftp/] },

  // ---- tree validation ----
  { name: 'directory without children', args: apply, input: yaml('name: bad/', 'replication: 1', FRAG), code: 1, says: [/children/, /"bad\/"/] },
  { name: 'child name not under parent', args: apply, input: yaml('name: bad/', 'replication: 1', FRAG, 'children:', '- name: other/x'), code: 1, says: [/bad\//, /other\/x/, /prefix/] },
  { name: 'children out of order', args: apply, input: yaml('name: bad/', 'replication: 1', FRAG, 'children:', '- name: bad/y', '- name: bad/x'), code: 1, says: [/order/, /bad\/y/, /bad\/x/] },
  { name: 'revision on a directory', args: apply, input: yaml('name: bad/', 'revision: 3', 'replication: 1', FRAG, 'children:', '- name: bad/x'), code: 1, says: [/revision/, /directory/, /"bad\/"/] },
  { name: 'delete without revision', args: apply, input: yaml('name: bad/a', 'delete: true'), code: 1, says: [/delete/, /"bad\/a"/, /revision/] },

  // ---- revisions checked by etcd ----
  { name: 'stale revision of an existing journal', args: apply, input: yaml('name: bad/a', 'replication: 1', FRAG, 'revision: 1'), code: 1, says: [/revision/, /bad\/a/, /[Nn]othing was applied/] },
  { name: 'create of an existing journal (revision omitted)', args: apply, input: yaml('name: bad/a', 'replication: 1', FRAG), code: 1, says: [/bad\/a/, /exists/] },
  { name: 'delete of a missing journal', args: apply, input: yaml('name: bad/missing', 'delete: true', 'revision: 5'), code: 1, says: [/bad\/missing/, /not exist|missing|not found/] },
  {
    name: 'one bad change in a batch applies nothing',
    args: apply,
    input: yaml('name: bad/', 'replication: 1', FRAG, 'children:', '- name: bad/a', '  revision: 1', '- name: bad/new'),
    code: 1,
    says: [/bad\/a/, /[Nn]othing was applied/],
  },

  // ---- input files ----
  { name: 'missing --specs file', args: [...apply, '--specs', '{dir}/nope.yaml'], code: 1, says: [/nope\.yaml/, /no such file/] },
  // Tests run as root, so chmod 000 cannot provoke a read error: a directory does.
  { name: 'unreadable --specs (a directory)', args: [...apply, '--specs', '{dir}/specs.d'], dirs: ['specs.d'], code: 1, says: [/specs\.d/, /directory/] },
  { name: 'missing --offsets file', args: ['journals', 'read', '-l', 'name=bad/a', '--offsets', '{dir}/nope.json'], code: 1, says: [/--offsets/, /nope\.json/, /no such file/] },
  { name: 'malformed --offsets JSON', args: ['journals', 'read', '-l', 'name=bad/a', '--offsets', '{dir}/o.json'], files: { 'o.json': '{"bad/a": 1,' }, code: 1, says: [/--offsets/, /o\.json/] },
  { name: '--offsets not an object', args: ['journals', 'read', '-l', 'name=bad/a', '--offsets', '{dir}/o.json'], files: { 'o.json': '[1, 2]' }, code: 1, says: [/--offsets/, /object/] },
  { name: '--offsets with a negative offset', args: ['journals', 'read', '-l', 'name=bad/a', '--offsets', '{dir}/o.json'], files: { 'o.json': '{"bad/a": -5}' }, code: 1, says: [/"bad\/a"/, /non-negative/] },
  { name: 'malformed gazctl.ini in cwd', args: ['journals', 'list'], files: { 'gazctl.ini': '[journals.Broker\nAddress = http://127.0.0.1:1\n' }, code: 1, says: [/gazctl\.ini:1\b/, /section header/] },
  { name: 'FromUnix in gazctl.ini is not a number', args: ['journals', 'read', '-l', 'name=bad/a'], files: { 'gazctl.ini': '[journals.read]\nFromUnix = abc\n' }, code: 2, says: [/--from/, /"abc"/, /gazctl\.ini/] },
  { name: 'negative MaxTxnSize in gazctl.ini', args: apply, input: yaml('name: bad/x', 'replication: 1', FRAG), files: { 'gazctl.ini': '[journals.apply]\nMaxTxnSize = -3\n' }, code: 2, says: [/--max-txn-size/, /-3/, /gazctl\.ini/] },
  { name: 'bad value in gazctl.ini', args: ['journals', 'list'], files: { 'gazctl.ini': '[journals.Logging]\nLevel = loud\n' }, code: 2, says: [/log\.level/, /"loud"/, /gazctl\.ini/] },

  // ---- selectors ----
  { name: 'selector: unclosed set', args: ['journals', 'list', '-l', 'app in (b'], code: 2, says: [/"app in \(b"/, /"\)"/] },
  { name: 'selector: empty set', args: ['journals', 'list', '-l', 'app in ()'], code: 2, says: [/"app in \(\)"/] },
  { name: 'selector: leading comma', args: ['journals', 'list', '-l', ',app=b'], code: 2, says: [/",app=b"/] },
  { name: 'selector: empty clause', args: ['journals', 'list', '-l', 'app=b,,team=c'], code: 2, says: [/"app=b,,team=c"/] },
  { name: 'selector: unknown modifier', args: ['journals', 'list', '-l', 'app:suffix=x'], code: 2, says: [/"app:suffix=x"/, /column 4\b/] },
  { name: 'selector: one-letter label name', args: ['journals', 'read', '-l', 'x=y'], code: 2, says: [/"x=y"/, /label name/] },
  { name: 'selector: trailing word', args: ['journals', 'fragments', '-l', 'app=b c'], code: 2, says: [/"app=b c"/] },
  { name: 'selector: dangling negation', args: ['journals', 'append', '-l', 'app=b,!'], input: 'x', code: 2, says: [/"app=b,!"/] },

  // ---- flags ----
  { name: 'missing -l on read', args: ['journals', 'read'], code: 2, says: [/-l\/--selector/] },
  { name: 'missing -l on append', args: ['journals', 'append'], input: 'x', code: 2, says: [/-l\/--selector/] },
  { name: 'missing -l on edit', args: ['journals', 'edit'], code: 2, says: [/-l\/--selector/] },
  { name: 'unknown flag', args: ['journals', 'list', '--bogus'], code: 2, says: [/--bogus/] },
  { name: 'bad -o choice', args: ['journals', 'list', '-o', 'xml'], code: 2, says: [/format/, /xml/, /yaml/] },
  { name: 'flag without its value', args: ['journals', 'list', '-L'], code: 2, says: [/--label-columns/, /value/] },
  { name: 'negative --max-txn-size (D10)', args: [...apply, '--max-txn-size', '-1'], input: yaml('name: bad/x', 'replication: 1', FRAG), code: 2, says: [/--max-txn-size/, /-1|>= ?0|greater than or equal to 0|negative/] },
  { name: 'non-integer --max-txn-size', args: [...apply, '--max-txn-size', 'abc'], code: 2, says: [/--max-txn-size/, /abc|integer/] },
  { name: '--parallel 0', args: [...apply, '--max-txn-size', '1', '--parallel', '0'], input: yaml('name: bad/x', 'replication: 1', FRAG), code: 2, says: [/--parallel/, />= ?1/, /\b0\b/] },
  { name: 'negative --parallel', args: [...apply, '--parallel', '-1'], input: yaml('name: bad/x', 'replication: 1', FRAG), code: 2, says: [/--parallel/, /-1/] },
  { name: 'non-integer --parallel', args: [...apply, '--parallel', 'abc'], input: yaml('name: bad/x', 'replication: 1', FRAG), code: 2, says: [/--parallel/, /"abc"/, /integer/] },
  { name: '--parallel 0 on edit', args: ['journals', 'edit', '-l', 'name=bad/a', '--parallel', '0'], code: 2, says: [/--parallel/, />= ?1/] },
  { name: 'negative --from', args: ['journals', 'read', '-l', 'name=bad/a', '--from', '-5'], code: 2, says: [/--from/, /-5|>= ?0|greater than or equal to 0|negative/] },
  { name: 'bad --timeout', args: ['journals', 'list', '--timeout', 'banana'], code: 2, says: [/--timeout/, /"banana"/] },
  { name: 'bad --url-ttl', args: ['journals', 'fragments', '--url-ttl', 'forever'], code: 2, says: [/--url-ttl/, /"forever"/] },
  { name: '--framing none with --mapping modulo', args: ['journals', 'append', '-l', 'name=bad/a', '--framing', 'none', '--mapping', 'modulo'], input: 'k\nv\n', code: 2, says: [/--framing none/, /--mapping/] },
  { name: '--base64 without lines framing', args: ['journals', 'append', '-l', 'name=bad/a', '--framing', 'fixed', '--mapping', 'modulo', '--base64'], code: 2, says: [/--base64/, /--framing lines/] },
  { name: '--base64 with random mapping', args: ['journals', 'append', '-l', 'name=bad/a', '--framing', 'lines', '--base64'], input: 'x\n', code: 2, says: [/--base64/, /--mapping/] },

  // ---- connections ----
  {
    name: 'unreachable broker fails within --timeout',
    args: ['journals', 'list', '--broker.address', 'http://127.0.0.1:1', '--timeout', '2s'],
    code: 1,
    says: [/127\.0\.0\.1:1\b/, /unreachable/],
    maxMs: 8000,
  },
  { name: 'bad --broker.address URL', args: ['journals', 'list', '--broker.address', 'not a url'], code: 2, says: [/"not a url"/, /URL/] },
  { name: 'unsupported --broker.address scheme', args: ['journals', 'list', '--broker.address', 'ftp://127.0.0.1:1'], code: 2, says: [/ftp/, /scheme/] },

  // ---- append input ----
  { name: 'append --mapping direct to a journal not matched', args: ['journals', 'append', '-l', 'prefix=bad/', '--framing', 'lines', '--mapping', 'direct'], input: 'bad/nope\nrecord\n', code: 1, says: [/"bad\/nope"/, /not found/] },
  { name: 'append -i of a missing file', args: ['journals', 'append', '-l', 'name=bad/a', '-i', '{dir}/missing'], code: 1, says: [/cannot read .*missing: no such file$/m] },
  { name: 'append to a selector matching nothing', args: ['journals', 'append', '-l', 'app=nothing'], input: 'x', code: 1, says: [/no journals match/] },
  { name: 'append lines: input ends inside a record', args: ['journals', 'append', '-l', 'name=bad/a', '--framing', 'lines'], input: 'no newline', code: 1, says: [/ends inside a record/] },
  { name: 'append fixed: bad magic word', args: ['journals', 'append', '-l', 'name=bad/a', '--framing', 'fixed'], input: 'garbage!garbage!', code: 1, says: [/magic/, /offset 0\b/] },
  { name: 'append --base64: key is not base64', args: ['journals', 'append', '-l', 'prefix=bad/', '--framing', 'lines', '--mapping', 'modulo', '--base64'], input: '!!!\nrecord\n', code: 1, says: [/base64/, /"!!!"/] },

  // ---- edit ----
  { name: 'edit of a selector matching nothing (D4)', args: ['journals', 'edit', '-l', 'app=nothing'], code: 1, says: [/no journals match selector "app=nothing"/] },
];

// ---- the cluster and snapshots ----------------------------------------------------------------

const SPECS = `name: bad/
replication: 1
labels:
- name: app
  value: bad-inputs
fragment:
  length: 1048576
  compression_codec: NONE
  stores:
  - file:///
  refresh_interval: 1m
children:
- name: bad/a
- name: bad/b
`;

let cluster: Cluster | undefined;
let work = '';

async function goGazctl(args: string[], input?: string): Promise<Buffer> {
  const r = await runGoGazctl(args, { brokerAddress: cluster!.brokerAddress, input, cwd: work, timeoutMs: 20_000 });
  assert.equal(r.code, 0, `Go gazctl ${args.join(' ')} failed (code ${r.code}):\n${r.stderr}`);
  return r.stdout;
}

/** What must not change: the whole listing (with its etcd revision) and every write head. */
async function snapshot(): Promise<{ listing: string; heads: string }> {
  const listing = (await goGazctl(['journals', 'list', '-o', 'json'])).toString('utf8');
  const f = join(work, 'heads.json');
  await goGazctl(['journals', 'read', '-l', 'prefix=bad/', '--tail', '--offsets-out', f]);
  return { listing, heads: readFileSync(f, 'utf8') };
}

describe('bad inputs: one clear line, a trustworthy exit status, nothing changed', { timeout: 300_000 }, () => {
  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'gazctl-bad-inputs-'));
    cluster = await startCluster({ brokers: 1 });
    await goGazctl(['journals', 'apply'], SPECS);
    await waitForJournalsAssigned(cluster, ['bad/a', 'bad/b'], 30_000);
    await goGazctl(['journals', 'append', '-l', 'name=bad/a'], 'some data\n');
    await goGazctl(['journals', 'append', '-l', 'name=bad/b'], 'more data\n');
  });
  after(async () => {
    await cluster?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  test('the table has at least 30 cases with distinct names', () => {
    assert.ok(CASES.length >= 30, `${CASES.length} cases`);
    assert.equal(new Set(CASES.map((c) => c.name)).size, CASES.length);
  });

  // The state after one case is the state before the next.
  let last: { listing: string; heads: string } | undefined;
  let n = 0;
  for (const c of CASES) {
    const id = ++n;
    test(c.name, async () => {
      const dir = join(work, `case-${id}`);
      mkdirSync(dir, { recursive: true });
      for (const d of c.dirs ?? []) mkdirSync(join(dir, d), { recursive: true });
      for (const [f, text] of Object.entries(c.files ?? {})) writeFileSync(join(dir, f), text);
      const args = c.args.map((a) => a.replaceAll('{dir}', dir));

      const before = last ?? (await snapshot());
      last = undefined;
      const t0 = Date.now();
      const r = await runGazctl(args, {
        cwd: dir,
        input: c.input,
        env: { BROKER_ADDRESS: cluster!.brokerAddress, GAZ_EDITOR: 'false' },
        timeoutMs: 30_000,
      });
      const ms = Date.now() - t0;
      const afterSnap = await snapshot();
      last = afterSnap;
      const what = describeResult(args, r);

      assert.equal(r.code, c.code, what);
      assert.equal(r.stdout.length, 0, `nothing on stdout\n${what}`);
      assert.match(r.stderr, /^gazctl: [^\n]+\n$/, `exactly one line "gazctl: …" on stderr\n${what}`);
      for (const re of c.says) assert.match(r.stderr, re, what);
      assert.ok(ms < (c.maxMs ?? 20_000), `took ${ms} ms\n${what}`);
      assert.equal(afterSnap.listing, before.listing, 'the listing changed');
      assert.equal(afterSnap.heads, before.heads, 'a write head moved');
    });
  }

  test('read of a selector matching nothing: exit 0, one warning, no output', async () => {
    for (const extra of [[], ['--block']]) {
      const args = ['journals', 'read', '-l', 'app=nothing', ...extra];
      const before = await snapshot();
      const r = await runGazctl(args, { env: { BROKER_ADDRESS: cluster!.brokerAddress }, timeoutMs: 30_000 });
      const what = describeResult(args, r);
      assert.equal(r.code, 0, what);
      assert.equal(r.stdout.length, 0, what);
      assert.match(r.stderr, /^[^\n]*no journals were matched by the selector[^\n]*\n$/, what);
      const afterSnap = await snapshot();
      assert.deepEqual(afterSnap, before);
    }
  });
});
