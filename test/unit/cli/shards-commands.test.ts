// `shards list`, `shards apply` and `shards edit`, run in-process against a stub consumer
// (test/helpers/stub-consumer.ts) and a stub broker holding the journals shards name
// (test/helpers/stub-broker.ts): what they print, what they send, and what they refuse.
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';

import { describeInProcess, runInProcess, type InProcessOptions } from '../../helpers/inproc.js';
import { startStubBroker, type StubBroker } from '../../helpers/stub-broker.js';
import { startStubConsumer, stubShard, stubShardSpec, type StubConsumer } from '../../helpers/stub-consumer.js';
import { ApplyResponse, ReplicaStatus_Code, Status, type ListResponse_Shard } from '../../../src/lib/protocol/gen/consumer/protocol.js';
import { stubHeader } from '../../../src/testing/stubs.js';

const { IDLE, BACKFILL, STANDBY, PRIMARY, FAILED } = ReplicaStatus_Code;
const ok = (code: ReplicaStatus_Code) => ({ code, errors: [] });

let broker: StubBroker;
let consumer: StubConsumer;

function fixture(): ListResponse_Shard[] {
  return [
    stubShard(stubShardSpec('shard-000', { recovery_log_prefix: 'rec', hint_prefix: '/gazette/hints' }), 11n, [['c-1', ok(PRIMARY)], ['c-2', ok(STANDBY)]]),
    stubShard(stubShardSpec('shard-001', { sources: [{ journal: 'in/b', min_offset: 0n }], labels: { labels: [{ name: 'app', value: 'word-count', prefix: false }, { name: 'tier', value: 'hot', prefix: false }] } }), 12n, [
      ['c-2', ok(BACKFILL)],
      ['c-3', { code: FAILED, errors: ['runTransactions: consumer transaction:\n  boom'] }],
    ]),
    stubShard(stubShardSpec('shard-002', { disable: true }), 13n),
  ];
}

const env = (): Record<string, string> => ({ CONSUMER_ADDRESS: consumer.address, BROKER_ADDRESS: broker.address });

const run = async (args: string[], opts: InProcessOptions = {}) => {
  const r = await runInProcess(args, { ...opts, env: { ...env(), ...opts.env } });
  return { ...r, what: describeInProcess(args, r) };
};

/**
 * Interrupts a running command as Ctrl-C would: calls the SIGINT listeners the command added
 * (those not in `outside`), not the test runner's own.
 */
function interrupt(outside: Set<(...args: unknown[]) => void>): void {
  for (const l of process.listeners('SIGINT')) if (!outside.has(l as (...args: unknown[]) => void)) (l as () => void)();
}
const sigintListeners = () => new Set(process.listeners('SIGINT') as ((...args: unknown[]) => void)[]);

const cells = (line: string) => line.split('│').map((c) => c.trim()).filter(Boolean);

describe('shards commands in-process', () => {
  before(async () => {
    broker = await startStubBroker([
      { name: 'in/a', labels: { 'content-type': 'application/x-ndjson' }, content: '0123456789' },
      { name: 'in/b', labels: { 'content-type': 'text/csv' }, content: '01234' },
      { name: 'in/c', labels: { 'content-type': 'application/x-protobuf-fixed' } },
      { name: 'in/plain', labels: { 'content-type': 'text/plain' } },
      { name: 'in/bare' },
      { name: 'rec/shard-000', labels: { 'content-type': 'application/x-gazette-recoverylog' } },
      { name: 'rec/shard-001', labels: { 'content-type': 'application/x-ndjson' } },
    ]);
    consumer = await startStubConsumer(fixture());
  });
  after(async () => {
    await consumer.stop();
    await broker.stop();
  });
  beforeEach(() => {
    consumer.shards = fixture();
    consumer.applied.length = 0;
    consumer.answer = undefined;
    consumer.onList = undefined;
    consumer.lists = 0;
    consumer.readThrough.clear();
    consumer.hints.clear();
  });

  describe('shards list', () => {
    it('prints the table of upstream with every column, in its fixed order', async () => {
      const r = await run(['shards', 'list', '-p', '-r', '--rf', '-L', 'tier', '-L', 'app']);
      assert.equal(r.code, 0, r.what);
      assert.equal(r.stderr, '', r.what);
      assert.equal(
        r.stdout,
        [
          '┌───────────┬─────────────────────────────────────────────────────┬────┬──────────────┬─────────────┬────────┬────────────┐',
          '│    ID     │                       STATUS                        │ RF │   PRIMARY    │  REPLICAS   │  TIER  │    APP     │',
          '├───────────┼─────────────────────────────────────────────────────┼────┼──────────────┼─────────────┼────────┼────────────┤',
          '│ shard-000 │ PRIMARY                                             │ 2  │ c-1:PRIMARY  │ c-2:STANDBY │ <none> │ word-count │',
          '│ shard-001 │ FAILED: runTransactions: consumer transaction: boom │ 2  │ c-2:BACKFILL │ c-3:FAILED  │ hot    │ word-count │',
          '│ shard-002 │ IDLE                                                │ 0  │ <none>       │             │ <none> │ word-count │',
          '└───────────┴─────────────────────────────────────────────────────┴────┴──────────────┴─────────────┴────────┴────────────┘',
          '',
        ].join('\n'),
        r.what,
      );
    });

    it('reduces the status over the route members: the largest code wins, IDLE without members', async () => {
      const cases: [ReplicaStatus_Code[], string][] = [
        [[], 'IDLE'],
        [[IDLE, IDLE], 'IDLE'],
        [[IDLE, BACKFILL], 'BACKFILL'],
        [[BACKFILL, STANDBY, IDLE], 'STANDBY'],
        [[STANDBY, PRIMARY], 'PRIMARY'],
        [[PRIMARY, STANDBY, BACKFILL], 'PRIMARY'],
      ];
      consumer.shards = cases.map(([codes], i) =>
        stubShard(stubShardSpec(`shard-${i}00`), 5n, codes.map((c, j) => [`m-${j}`, ok(c)] as [string, { code: ReplicaStatus_Code; errors: string[] }])),
      );
      const r = await run(['shards', 'list']);
      assert.equal(r.code, 0, r.what);
      const rows = r.stdout.trimEnd().split('\n').slice(3, -1).map(cells);
      assert.deepEqual(rows, cases.map(([, want], i) => [`shard-${i}00`, want]));
    });

    it('shows every distinct error of a FAILED shard, cut to 200 characters each', async () => {
      const long = 'x'.repeat(300);
      consumer.shards = [
        stubShard(stubShardSpec('shard-900'), 5n, [
          ['m-1', { code: FAILED, errors: ['disk full'] }],
          ['m-2', { code: FAILED, errors: ['disk full', long] }],
          ['m-3', ok(PRIMARY)],
        ]),
      ];
      const r = await run(['shards', 'list']);
      assert.equal(r.code, 0, r.what);
      const status = cells(r.stdout.split('\n')[3]!)[1]!;
      assert.equal(status, `FAILED: disk full; ${'x'.repeat(199)}…`);
    });

    it('--lag: per journal the write head minus the read-through offset, sorted by journal; then the backlog age', async () => {
      consumer.readThrough.set('shard-000', { 'in/b': 1n, 'in/a': 4n });
      consumer.readThrough.set('shard-001', { 'in/b;derived': 5n });
      consumer.readThrough.set('shard-002', {});
      const r = await run(['shards', 'list', '--lag', '-L', 'tier']);
      assert.equal(r.code, 0, r.what);
      const lines = r.stdout.trimEnd().split('\n');
      assert.deepEqual(cells(lines[1]!), ['ID', 'STATUS', 'TIER', 'LAG', 'BACKLOG AGE']);
      // The stub's journals hold no messages and no persisted fragments: the age is unknown ("-")
      // where there is a lag, 0s where there is none.
      assert.deepEqual(cells(lines[3]!), ['shard-000', 'PRIMARY', '<none>', 'in/a:6, in/b:4', 'in/a:-, in/b:-']);
      assert.deepEqual(cells(lines[4]!).slice(-2), ['in/b;derived:0', 'in/b;derived:0s']);
      assert.deepEqual(cells(lines[5]!), ['shard-002', 'IDLE', '<none>']);
      const stats = consumer.requests.filter((q) => q.method === 'stat').map((q) => (q.request as { shard: string }).shard);
      assert.deepEqual(stats.sort(), ['shard-000', 'shard-001', 'shard-002']);
      const reads = broker.requests.filter((q) => q.method === 'read').map((q) => q.request as { journal: string; offset: bigint; block: boolean });
      assert.ok(reads.every((q) => !q.block), 'lag and age reads do not block');
      // One read at the write head per journal (the lag), one at the read-through offset per journal with a lag (the age).
      assert.deepEqual(
        reads.map((q) => `${q.journal}@${q.offset}`).sort(),
        ['in/a@-1', 'in/a@4', 'in/b;derived@-1', 'in/b@-1', 'in/b@1'],
      );
    });

    it('--lag fails with one line when a shard cannot be stat-ed', async () => {
      consumer.readThrough.set('shard-000', {});
      const r = await run(['shards', 'list', '--lag', '-l', 'id in (shard-000, shard-001)']);
      assert.equal(r.code, 1, r.what);
      assert.equal(r.stdout, '', r.what);
      assert.equal(r.stderr.split('\n').filter(Boolean).length, 1, r.what);
      assert.match(r.stderr, /stat of shard shard-001: SHARD_NOT_FOUND/, r.what);
    });

    it('-o yaml prints the hoisted shard set', async () => {
      const r = await run(['shards', 'list', '-o', 'yaml']);
      assert.equal(r.code, 0, r.what);
      assert.equal(
        r.stdout,
        `common:
  max_txn_duration: 1s
  hot_standbys: 1
  labels:
  - name: app
    value: word-count
shards:
- id: shard-000
  sources:
  - journal: in/a
  recovery_log_prefix: rec
  hint_prefix: /gazette/hints
  revision: 11
- id: shard-001
  sources:
  - journal: in/b
  labels:
  - name: tier
    value: hot
  revision: 12
- id: shard-002
  sources:
  - journal: in/a
  disable: true
  revision: 13
`,
        r.what,
      );
    });

    it('-o yaml of no shards is an empty set', async () => {
      const r = await run(['shards', 'list', '-o', 'yaml', '-l', 'app=nothing']);
      assert.equal(r.code, 0, r.what);
      assert.equal(r.stdout, 'common: {}\nshards: []\n');
    });

    it('-o json is the whole List response in proto3 JSON, without a trailing newline', async () => {
      const r = await run(['shards', 'list', '-o', 'json', '-l', 'tier=hot']);
      assert.equal(r.code, 0, r.what);
      assert.ok(!r.stdout.endsWith('\n'));
      const parsed = JSON.parse(r.stdout);
      assert.equal(parsed.status, 'OK');
      assert.equal(parsed.header.etcd.cluster_id, '1234');
      assert.equal(parsed.shards.length, 1);
      const s = parsed.shards[0];
      assert.equal(s.spec.id, 'shard-001');
      assert.equal(s.spec.max_txn_duration, '1s');
      assert.equal(s.mod_revision, '12');
      assert.deepEqual(s.status, [
        { code: 'BACKFILL', errors: [] },
        { code: 'FAILED', errors: ['runTransactions: consumer transaction:\n  boom'] },
      ]);
      assert.deepEqual(s.route.members.map((m: { suffix: string }) => m.suffix), ['c-2', 'c-3']);
    });

    it('sends the selector, with the id meta-label', async () => {
      const r = await run(['shards', 'list', '-l', 'id in (shard-000, shard-002)']);
      assert.equal(r.code, 0, r.what);
      assert.deepEqual(r.stdout.trimEnd().split('\n').slice(3, -1).map((l) => cells(l)[0]), ['shard-000', 'shard-002']);
    });

    it('--watch prints a listing when it changes, not when it does not, and Ctrl-C ends it with 0', async () => {
      const outside = sigintListeners();
      consumer.onList = (n) => {
        if (n === 2) consumer.shards = consumer.shards.slice(0, 2); // changed: printed
        if (n >= 4) interrupt(outside); // the third listing equals the second: not printed
      };
      const r = await run(['shards', 'list', '--watch']);
      assert.equal(r.code, 0, r.what);
      const tables = r.stdout.split('┌').slice(1);
      assert.equal(tables.length, 2, r.what);
      assert.match(tables[0]!, /shard-002/);
      assert.doesNotMatch(tables[1]!, /shard-002/);
    });

    it('--watch stopped while it waits for the next poll ends at once with 0, lists no more and removes its signal listeners', async () => {
      const outside = sigintListeners();
      consumer.readThrough.set('shard-000', { 'in/a': 4n });
      consumer.readThrough.set('shard-001', {});
      consumer.readThrough.set('shard-002', {});
      // The listing is written just before the command starts waiting: Ctrl-C comes in that wait.
      const r = await run(['shards', 'list', '--watch', '--lag'], { onStdout: () => setImmediate(() => interrupt(outside)) });
      assert.equal(r.code, 0, r.what);
      assert.equal(r.stdout.split('┌').length - 1, 1, r.what);
      assert.deepEqual(cells(r.stdout.split('\n')[3]!), ['shard-000', 'PRIMARY', 'in/a:6', 'in/a:-'], r.what);
      assert.equal(consumer.lists, 1, 'no listing after the interrupt');
      assert.deepEqual(sigintListeners(), outside, 'the command removed its SIGINT listener');
      assert.equal(process.listeners('SIGTERM').length, 0, 'and its SIGTERM listener');
    });

    it('--watch -o json prints one document per line', async () => {
      const outside = sigintListeners();
      consumer.onList = (n) => {
        if (n === 2) consumer.shards = consumer.shards.slice(1);
        if (n >= 3) interrupt(outside);
      };
      const r = await run(['shards', 'list', '--watch', '-o', 'json']);
      assert.equal(r.code, 0, r.what);
      const docs = r.stdout.trimEnd().split('\n').map((l) => JSON.parse(l));
      assert.deepEqual(docs.map((d) => d.shards.length), [3, 2]);
    });
  });

  describe('gazctl.ini and the environment', () => {
    const withIni = (ini: string) => {
      const dir = mkdtempSync(join(tmpdir(), 'gazctl-shards-ini-'));
      writeFileSync(join(dir, 'gazctl.ini'), ini);
      return dir;
    };

    it('[shards.Consumer] Address and [shards.Broker] Address reach the services (over the environment)', async () => {
      const cwd = withIni(`[shards.Consumer]\nAddress = ${consumer.address}\n[shards.Broker]\nAddress = ${broker.address}\n`);
      consumer.readThrough.set('shard-000', { 'in/a': 10n });
      const r = await run(['shards', 'list', '--lag', '-l', 'id=shard-000'], { cwd, env: { CONSUMER_ADDRESS: 'http://127.0.0.1:1', BROKER_ADDRESS: 'http://127.0.0.1:1' } });
      assert.equal(r.code, 0, r.what);
      assert.deepEqual(cells(r.stdout.split('\n')[3]!), ['shard-000', 'PRIMARY', 'in/a:0', 'in/a:0s']);
    });

    it('[shards] takes namespaced keys; [shards.list] the list options', async () => {
      const cwd = withIni(`[shards]\nconsumer.address = ${consumer.address}\n[shards.list]\nFormat = yaml\nSelector = tier=hot\n`);
      const r = await run(['shards', 'list'], { cwd, env: { CONSUMER_ADDRESS: '' } });
      assert.equal(r.code, 0, r.what);
      assert.match(r.stdout, /^common:\n/);
      assert.match(r.stdout, /- id: shard-001\n/);
      assert.doesNotMatch(r.stdout, /shard-000/);
    });

    it('CONSUMER_ADDRESS is used without gazctl.ini, and the command line beats both', async () => {
      const r = await run(['shards', 'list', '-o', 'json']);
      assert.equal(r.code, 0, r.what);
      const cwd = withIni(`[shards.Consumer]\nAddress = http://127.0.0.1:1\n`);
      const c = await run(['shards', 'list', '-o', 'json', '--consumer.address', consumer.address], { cwd });
      assert.equal(c.code, 0, c.what);
    });

    it('[shards.apply] DryRun and SpecsPath are read', async () => {
      const dir = withIni('');
      writeFileSync(join(dir, 'set.yaml'), 'common:\n  max_txn_duration: 1s\nshards:\n- id: shard-new\n  sources:\n  - journal: in/a\n');
      writeFileSync(join(dir, 'gazctl.ini'), `[shards.apply]\nDryRun = true\nSpecsPath = set.yaml\n`);
      const r = await run(['shards', 'apply'], { cwd: dir });
      assert.equal(r.code, 0, r.what);
      assert.equal(r.stdout, 'create  shard-new\n1 shard change in 1 transaction; nothing applied (--dry-run).\n');
      assert.equal(consumer.applied.length, 0);
    });

    it('shards edit does not take its selector from gazctl.ini', async () => {
      const cwd = withIni(`[shards.edit]\nSelector = app=word-count\n`);
      const r = await run(['shards', 'edit'], { cwd, env: { GAZ_EDITOR: 'true' } });
      assert.equal(r.code, 2, r.what);
      assert.match(r.stderr, /missing required flag -l\/--selector/);
    });
  });

  describe('shards apply', () => {
    const SET = `common:
  max_txn_duration: 1s
  hot_standbys: 1
  labels:
  - name: app
    value: word-count
shards:
- id: shard-000
  sources:
  - journal: in/a
  recovery_log_prefix: rec
  hint_prefix: /gazette/hints
  revision: 11
- id: shard-001
  sources:
  - journal: in/b
  hot_standbys: 2
  labels:
  - name: tier
    value: hot
  revision: 12
- delete: true
  id: shard-002
  revision: 13
- id: shard-new
  sources:
  - journal: in/c
`;

    it('--dry-run prints the plan after checking the journals, and applies nothing', async () => {
      const r = await run(['shards', 'apply', '--dry-run'], { input: SET });
      assert.equal(r.code, 0, r.what);
      assert.equal(
        r.stdout,
        [
          'unchanged  shard-000',
          'update  shard-001  (at revision 12)',
          'delete  shard-002  (at revision 13)',
          'create  shard-new',
          '3 shard changes in 1 transaction, 1 unchanged; nothing applied (--dry-run).',
          '',
        ].join('\n'),
        r.what,
      );
      assert.equal(consumer.applied.length, 0);
      assert.equal(consumer.calls.filter((c) => c.method === 'apply').length, 0);
      const listed = broker.requests.filter((q) => q.method === 'list').at(-1)!.request as { selector: { include: { labels: { value: string }[] } } };
      assert.deepEqual(listed.selector.include.labels.map((l) => l.value), ['in/a', 'in/b', 'in/c', 'rec/shard-000']);
    });

    it('--dry-run names the conflicts the consumer would refuse', async () => {
      const r = await run(['shards', 'apply', '--dry-run'], { input: SET.replace('revision: 12', 'revision: 9') });
      assert.equal(r.code, 0, r.what);
      assert.match(r.stdout, /^update {2}shard-001 {2}\(at revision 9\) {2}CONFLICT: shard-001 is at revision 12$/m);
      assert.match(r.stdout, /1 conflict: the apply would be refused; nothing applied \(--dry-run\)\.\n$/);
    });

    it('applies the changes that change something, in one transaction', async () => {
      const r = await run(['shards', 'apply'], { input: SET });
      assert.equal(r.code, 0, r.what);
      assert.equal(r.stderr, 'applied 3 shard changes in 1 transaction (etcd revision 200); 1 unchanged\n');
      assert.equal(consumer.applied.length, 1);
      const changes = consumer.applied[0]!.changes;
      assert.deepEqual(changes.map((c) => (c.upsert ? `upsert ${c.upsert.id} @${c.expect_mod_revision}` : `delete ${c.delete} @${c.expect_mod_revision}`)), [
        'upsert shard-001 @12',
        'delete shard-002 @13',
        'upsert shard-new @0',
      ]);
      const s1 = changes[0]!.upsert!;
      assert.equal(s1.hot_standbys, 2);
      assert.deepEqual(s1.labels!.labels.map((l) => `${l.name}=${l.value}`), ['app=word-count', 'tier=hot']);
      assert.equal(s1.max_txn_duration!.seconds, 1n);
    });

    it('--max-txn-size cuts batches; --parallel 1 sends them one after another', async () => {
      const creates = `common:\n  max_txn_duration: 1s\n  sources:\n  - journal: in/a\nshards:\n${Array.from({ length: 5 }, (_, i) => `- id: shard-n${i}\n`).join('')}`;
      const r = await run(['shards', 'apply', '--max-txn-size', '2', '--parallel', '1'], { input: creates });
      assert.equal(r.code, 0, r.what);
      assert.deepEqual(consumer.applied.map((a) => a.changes.map((c) => c.upsert!.id)), [['shard-n0', 'shard-n1'], ['shard-n2', 'shard-n3'], ['shard-n4']]);
      assert.equal(r.stderr, 'applied 5 shard changes in 3 transactions (etcd revision 202)\n');
    });

    it('a refused batch names what was applied, exit 1', async () => {
      consumer.answer = (_req, i) =>
        i === 1 ? ApplyResponse.fromPartial({ status: Status.ETCD_TRANSACTION_FAILED, header: stubHeader() }) : ApplyResponse.fromPartial({ status: Status.OK, header: stubHeader({ revision: 300n }) });
      const creates = `common:\n  max_txn_duration: 1s\n  sources:\n  - journal: in/a\nshards:\n${Array.from({ length: 4 }, (_, i) => `- id: shard-n${i}\n`).join('')}`;
      const r = await run(['shards', 'apply', '--max-txn-size', '2', '--parallel', '1'], { input: creates });
      assert.equal(r.code, 1, r.what);
      assert.equal(r.stderr.split('\n').filter(Boolean).length, 1, r.what);
      assert.match(r.stderr, /^gazctl: apply refused: .*Transaction 2 of 2 failed; the 2 changes of the transactions before it were applied\./, r.what);
    });

    it('delete: true under common deletes exactly the listed shards', async () => {
      const r = await run(['shards', 'apply'], { input: 'common:\n  delete: true\nshards:\n- id: shard-000\n  revision: 11\n- id: shard-002\n  revision: 13\n' });
      assert.equal(r.code, 0, r.what);
      assert.equal(consumer.applied.length, 1);
      assert.deepEqual(consumer.applied[0]!.changes.map((c) => [c.delete, c.expect_mod_revision, c.upsert]), [
        ['shard-000', 11n, undefined],
        ['shard-002', 13n, undefined],
      ]);
    });

    it('an empty set applies nothing and says so', async () => {
      const r = await run(['shards', 'apply'], { input: 'common: {}\nshards: []\n' });
      assert.equal(r.code, 0, r.what);
      assert.equal(r.stderr, 'nothing to apply: 0 shards unchanged\n');
      assert.equal(consumer.applied.length, 0);
    });

    // Each bad input: one line on stderr, exit 1 (or 2 for the command line), nothing applied.
    const VALID = 'common:\n  max_txn_duration: 1s\nshards:\n- id: shard-new\n  sources:\n  - journal: in/a\n';
    const bad: [string, string, RegExp, string[]?][] = [
      ['malformed YAML', 'shards: [\n- id: x', /^gazctl: stdin: .*/],
      ['a tab-indented document', 'shards:\n\t- id: shard-000\n', /^gazctl: stdin: /],
      ['an unknown top-level field', 'common: {}\nshard: []\n', /^gazctl: stdin: line 2: unknown field "shard" in shard set$/],
      ['an unknown shard field', VALID + '  hot_standby: 2\n', /^gazctl: stdin: line 7: unknown field "hot_standby" in shard$/],
      ['a bad shard id', VALID.replace('shard-new', 'a b'), /^gazctl: stdin: shards\[0\]\.id: .*shard "a b"/],
      ['a too short shard id', VALID.replace('shard-new', 'ab'), /^gazctl: stdin: shards\[0\]\.id: /],
      ['a duplicate shard id', VALID + '- id: shard-new\n', /^gazctl: stdin: shards\[1\]: duplicate shard id "shard-new"$/],
      ['a bad duration', VALID.replace('1s', 'soon'), /^gazctl: stdin: line 2: max_txn_duration: invalid duration "soon"/],
      ['a missing max_txn_duration', VALID.replace('  max_txn_duration: 1s\n', ''), /^gazctl: stdin: .*max_txn_duration: 0s must be > 0/],
      ['a negative min_txn_duration', VALID.replace('1s\n', '1s\n  min_txn_duration: -1s\n'), /^gazctl: stdin: .*min_txn_duration: -1s must be >= 0/],
      ['unsorted sources', VALID.replace('  - journal: in/a\n', '  - journal: in/b\n  - journal: in/a\n'), /^gazctl: stdin: .*sources\[1\]: journal "in\/a" must sort after "in\/b"/],
      ['an invalid source journal name', VALID.replace('in/a', '/in/a'), /^gazctl: stdin: .*sources\[0\].*journal "\/in\/a"/],
      ['a negative min_offset', VALID + '    min_offset: -5\n', /^gazctl: stdin: .*min_offset: -5 must be >= 0/],
      ['a hint_prefix without a recovery log', VALID + '  hint_prefix: /hints\n', /^gazctl: stdin: .*hint_prefix "\/hints": must be empty when recovery_log_prefix is empty/],
      ['a relative hint_prefix', VALID + '  recovery_log_prefix: rec\n  hint_prefix: hints\n', /^gazctl: stdin: .*hint_prefix "hints": must be an absolute path/],
      ['a hint_prefix that is a directory', VALID + '  recovery_log_prefix: rec\n  hint_prefix: /hints/\n', /^gazctl: stdin: .*hint_prefix "\/hints\/": must be a clean path/],
      ['a revision under common', 'common:\n  revision: 4\n' + VALID.slice('common:\n'.length), /^gazctl: stdin: line 2: unknown field "revision" in common/],
      ['a delete without a revision', VALID + '  delete: true\n', /^gazctl: stdin: .*expect_mod_revision 0 is invalid for a delete/],
      ['the reserved label id', VALID + '  labels:\n  - name: id\n    value: x\n', /^gazctl: stdin: .*label "id" is reserved/],
      ['a missing source journal', VALID.replace('in/a', 'in/missing'), /^gazctl: shard "shard-new": source journal "in\/missing" does not exist$/],
      ['a source journal of no framing', VALID.replace('in/a', 'in/plain'), /^gazctl: shard "shard-new": source journal "in\/plain" has content-type text\/plain, which is not a message framing/],
      ['a source journal without content-type', VALID.replace('in/a', 'in/bare'), /^gazctl: shard "shard-new": source journal "in\/bare" has no content-type label/],
      ['a missing recovery log', VALID + '  recovery_log_prefix: rec\n  hint_prefix: /hints\n', /^gazctl: shard "shard-new": recovery log journal "rec\/shard-new" does not exist$/],
      ['a recovery log with the wrong content-type', VALID.replace('shard-new', 'shard-001') + '  recovery_log_prefix: rec\n  hint_prefix: /hints\n', /^gazctl: shard "shard-001": recovery log journal "rec\/shard-001" has content-type application\/x-ndjson \(expected content-type application\/x-gazette-recoverylog\)$/],
      ['a shard set that is a sequence', '- id: shard-new\n', /^gazctl: stdin: line 1: expected a mapping for shard set, got a sequence$/],
      ['two YAML documents', VALID + '---\n' + VALID, /^gazctl: stdin: line 7: invalid YAML: more than one document/],
      ['a duplicate key', VALID + '  hot_standbys: 1\n  hot_standbys: 2\n', /^gazctl: stdin: line 8: duplicate key "hot_standbys" in shard$/],
      ['a shard without an id', VALID.replace('- id: shard-new\n', '- hot_standbys: 1\n'), /^gazctl: stdin: shards\[0\]\.id: shard "": id length 0 is out of range/],
      ['a word where hot_standbys is an integer', VALID + '  hot_standbys: many\n', /^gazctl: stdin: line 7: hot_standbys: expected an integer, got "many"$/],
      ['a negative hot_standbys', VALID + '  hot_standbys: -1\n', /^gazctl: stdin: line 7: hot_standbys: integer -1 out of range/],
      ['sources given as a scalar', VALID.replace('  sources:\n  - journal: in/a\n', '  sources: in/a\n'), /^gazctl: stdin: line 5: sources: expected a sequence, got "in\/a"$/],
      ['labels given as a mapping', VALID + '  labels:\n    tier: hot\n', /^gazctl: stdin: line 8: labels: expected a sequence, got a mapping$/],
      ['an unknown source field', VALID + '    selector: app=x\n', /^gazctl: stdin: line 7: unknown field "selector" in source$/],
      ['a source named twice', VALID.replace('  - journal: in/a\n', '  - journal: in/a\n  - journal: in/a\n'), /^gazctl: stdin: .*sources\[1\]: journal "in\/a" must sort after "in\/a"/],
      ['a label name with a space', VALID + '  labels:\n  - name: bad label\n    value: x\n', /^gazctl: stdin: .*labels\[0\]: name "bad label": invalid character " "/],
      ['a label value with a space', VALID + '  labels:\n  - name: tier\n    value: a b\n', /^gazctl: stdin: .*labels\[0\]: label "tier" value "a b": invalid character " "/],
      ['a label given twice', VALID + '  labels:\n  - name: tier\n    value: a\n  - name: tier\n    value: a\n', /^gazctl: stdin: .*labels\[1\]: duplicate label "tier"="a"$/],
      ['a prefix label', VALID + '  labels:\n  - name: tier\n    value: a\n    prefix: true\n', /^gazctl: stdin: .*labels\[0\]: label "tier"="a" has prefix=true, which is only allowed in selectors$/],
      ['a recovery_log_prefix without a hint_prefix', VALID + '  recovery_log_prefix: rec\n', /^gazctl: stdin: .*hint_prefix "": length 0 is out of range/],
      ['an absolute recovery_log_prefix', VALID + '  recovery_log_prefix: /rec\n  hint_prefix: /hints\n', /^gazctl: stdin: .*recovery_log_prefix "\/rec": recovery log "\/rec\/shard-new" must not begin with "\/"$/],
      ['a negative hint_backups', VALID + '  recovery_log_prefix: rec\n  hint_prefix: /hints\n  hint_backups: -1\n', /^gazctl: stdin: .*hint_backups: -1 must be >= 0$/],
      ['a negative revision', VALID + '  revision: -3\n', /^gazctl: stdin: .*expect_mod_revision -3 is invalid/],
      ['a delete that is not a boolean', 'shards:\n- id: shard-000\n  delete: maybe\n  revision: 11\n', /^gazctl: stdin: line 3: delete: expected a boolean, got "maybe"$/],
      ['delete: true under common for a shard without its revision', 'common:\n  delete: true\nshards:\n- id: shard-000\n', /^gazctl: stdin: .*delete shard "shard-000": expect_mod_revision 0 is invalid for a delete/],
      ['a bad --max-txn-size', VALID, /^gazctl: .*max-txn-size/, ['--max-txn-size', '-3']],
      ['an unknown flag', VALID, /^gazctl: /, ['--bogus']],
    ];
    for (const [what, input, says, extra] of bad) {
      it(`refuses ${what}: one line, nothing applied`, async () => {
        for (const dry of [false, true]) {
          const args = ['shards', 'apply', ...(extra ?? []), ...(dry ? ['--dry-run'] : [])];
          const r = await run(args, { input });
          assert.ok(r.code === 1 || r.code === 2, r.what);
          if (extra) assert.equal(r.code, 2, r.what);
          assert.equal(r.stdout, '', r.what);
          const lines = r.stderr.split('\n').filter(Boolean);
          assert.equal(lines.length, 1, r.what);
          assert.match(lines[0]!, says, r.what);
          assert.equal(consumer.applied.length, 0, r.what);
        }
      });
    }

    it('reads --specs from a file and names it in errors', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'gazctl-shards-specs-'));
      const path = join(dir, 'set.yaml');
      writeFileSync(path, 'shards:\n- id: shard-x\n  bogus: 1\n');
      const r = await run(['shards', 'apply', '--specs', path]);
      assert.equal(r.code, 1, r.what);
      assert.equal(r.stderr, `gazctl: ${path}: line 3: unknown field "bogus" in shard\n`);
    });
  });

  describe('shards edit', () => {
    /** An editor (a shell script) that saves each pass's content in turn and keeps what it was shown. */
    function scriptedEditor(passes: ((shown: string) => string)[]) {
      const dir = mkdtempSync(join(tmpdir(), 'gazctl-shards-editor-'));
      passes.forEach((_, i) => writeFileSync(join(dir, `pass-${i}.js`), `module.exports = ${passes[i]!.toString()};`));
      const script = join(dir, 'edit.sh');
      writeFileSync(
        script,
        `#!/bin/sh
n=$(cat "${dir}/count" 2>/dev/null || echo 0)
echo $((n + 1)) > "${dir}/count"
cp "$1" "${dir}/shown-$n.yaml"
exec node -e 'const fs = require("fs"); const f = require(process.argv[2]); fs.writeFileSync(process.argv[1], f(fs.readFileSync(process.argv[1], "utf8")));' "$1" "${dir}/pass-$n.js"
`,
      );
      chmodSync(script, 0o755);
      return {
        editor: script,
        passes: () => Number(existsSync(join(dir, 'count')) ? readFileSync(join(dir, 'count'), 'utf8') : 0),
        shown: (n: number) => readFileSync(join(dir, `shown-${n}.yaml`), 'utf8'),
      };
    }

    it('opens the hoisted set, reopens with the error of a missing journal, then applies the fixed edit', async () => {
      const ed = scriptedEditor([(s) => s.replace('hot_standbys: 1', 'hot_standbys: 3').replace('journal: in/b', 'journal: in/nope'), (s) => s.replace('journal: in/nope', 'journal: in/c')]);
      const r = await run(['shards', 'edit', '-l', 'app=word-count'], { env: { GAZ_EDITOR: ed.editor } });
      assert.equal(r.code, 0, r.what);
      assert.equal(ed.passes(), 2);
      const first = ed.shown(0);
      assert.match(first, /^#⚙ /);
      assert.match(first, /\ncommon:\n {2}max_txn_duration: 1s\n {2}hot_standbys: 1\n/);
      assert.match(first, /\n- id: shard-001\n {2}sources:\n {2}- journal: in\/b\n/);
      const second = ed.shown(1);
      assert.match(second, /^#⚠ shard "shard-001": source journal "in\/nope" does not exist$/m);
      assert.match(second, /hot_standbys: 3/, 'the edit is kept');
      assert.match(r.stderr, /source journal "in\/nope" does not exist \(reopening the editor\)/);
      assert.match(r.stderr, /applied 3 shard changes in 1 transaction/);
      assert.equal(consumer.applied.length, 1, 'nothing was applied by the failed pass');
      const changes = consumer.applied[0]!.changes;
      assert.deepEqual(changes.map((c) => [c.upsert!.id, c.upsert!.hot_standbys, c.expect_mod_revision]), [
        ['shard-000', 3, 11n],
        ['shard-001', 3, 12n],
        ['shard-002', 3, 13n],
      ]);
      assert.deepEqual(changes[1]!.upsert!.sources.map((s) => s.journal), ['in/c']);
    });

    it('reopens on invalid YAML and on a refused apply; an unchanged retry cancels with 0', async () => {
      consumer.answer = () => ApplyResponse.fromPartial({ status: Status.ETCD_TRANSACTION_FAILED, header: stubHeader() });
      const ed = scriptedEditor([(s) => s.replace('hot_standbys: 1', 'hot_standbys: [1'), (s) => s.replace('hot_standbys: [1', 'hot_standbys: 2'), (s) => s]);
      // --parallel 1: the second batch is sent only once the first is applied (never, here).
      const r = await run(['shards', 'edit', '-l', 'app=word-count', '--max-txn-size', '2', '--parallel', '1'], { env: { GAZ_EDITOR: ed.editor } });
      assert.equal(r.code, 0, r.what);
      assert.equal(ed.passes(), 3);
      assert.match(ed.shown(1), /^#⚠ edited specs: /m);
      assert.match(ed.shown(2), /^#⚠ apply refused: /m);
      assert.match(r.stderr, /Cancelled; no changes to invalid file\. Last edits saved to /);
      assert.equal(consumer.applied.length, 1, 'the refused first batch stopped the run');
    });

    it('an empty file cancels, applying nothing', async () => {
      const ed = scriptedEditor([() => '']);
      const r = await run(['shards', 'edit', '-l', 'id=shard-000'], { env: { GAZ_EDITOR: ed.editor } });
      assert.equal(r.code, 0, r.what);
      assert.equal(r.stderr, 'Cancelled; empty file.\n');
      assert.equal(consumer.applied.length, 0);
    });

    it('a selector matching nothing fails with one line before any editor runs', async () => {
      const ed = scriptedEditor([(s) => s]);
      const r = await run(['shards', 'edit', '-l', 'app=nothing'], { env: { GAZ_EDITOR: ed.editor } });
      assert.equal(r.code, 1, r.what);
      assert.equal(r.stderr, 'gazctl: no shards match selector "app=nothing"\n');
      assert.equal(ed.passes(), 0);
    });
  });
});
