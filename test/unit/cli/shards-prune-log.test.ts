// shards prune-log (and its alias shards prune) in-process against a scripted consumer (shards and
// their hints) and a scripted broker (log specs, store health, fragment listings), deleting in
// file:// stores under a temp --file-root: the plan, every reason a log is skipped, dry runs, the
// exact set deleted, refused and failed deletes, and the JSON audit.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import type { sendUnaryData, ServerUnaryCall, ServerWritableStream } from '@grpc/grpc-js';

import {
  FragmentStoreHealthResponse,
  FragmentsResponse,
  JournalSpec_Suspend_Level,
  ListResponse,
  Status,
  type Fragment,
  type FragmentStoreHealthRequest,
  type FragmentsRequest,
  type ListRequest,
  type ListResponse_Journal,
} from '../../../src/lib/protocol/gen/broker/protocol.js';
import { Status as ConsumerStatus } from '../../../src/lib/protocol/gen/consumer/protocol.js';
import type { FSMHints } from '../../../src/lib/protocol/gen/recoverylog/recorded_op.js';
import { fragmentContentPath, sumFromHex } from '../../../src/lib/protocol/fragment.js';
import { startJournalStub, stubHeader, type StubServer } from '../../../src/testing/stubs.js';
import { describeInProcess, runInProcess } from '../../helpers/inproc.js';
import { fromStubShards, startStubConsumer, type StubShard } from '../../helpers/stub-consumer.js';

const STORE = 'file:///store/';
const BAD_STORE = 'file:///bad/';
const AUTHOR = 0x1234;

/** Hints of `log` with one live node per entry: [fnode, first offset, last seq no, last offset]. */
function hints(log: string, nodes: [number, number, number, number][]): FSMHints {
  return {
    log,
    live_nodes: nodes.map(([fnode, fo, ls, lo]) => ({
      fnode: BigInt(fnode),
      segments: [{ author: AUTHOR, first_seq_no: BigInt(fnode), first_offset: BigInt(fo), first_checksum: 0, last_seq_no: BigInt(ls), last_offset: BigInt(lo), log: '' }],
    })),
    properties: [],
  };
}

function frag(journal: string, begin: number, end: number, opts: { modTime?: number; store?: string } = {}): Fragment {
  return {
    journal,
    begin: BigInt(begin),
    end: BigInt(end),
    sum: sumFromHex((begin.toString(16) + 'ab').padStart(40, '0')),
    compression_codec: 1, // NONE
    backing_store: opts.store ?? STORE,
    mod_time: BigInt(opts.modTime ?? 1_700_000_000),
    path_postfix: '',
  };
}

interface Log {
  stores: string[];
  suspended?: boolean;
  fragments: Fragment[];
}

// good-a: primary live [1000,2000) [3000,head); backup.0 live [500,2000) [3000,head).
// Delete [0,400) and [2000,3000); keep the rest.
const GOOD_A = 'recovery/good-a';
const goodAPrimary = hints(GOOD_A, [[10, 1000, 20, 2000], [30, 3000, 35, 3500]]);
const goodABackup = hints(GOOD_A, [[5, 500, 9, 1000], [10, 1000, 20, 2000], [30, 3000, 35, 3500]]);
const GOOD_B = 'recovery/good-b';

const shards: StubShard[] = [
  { id: 'good-a', labels: { app: 'good' }, primary: goodAPrimary, backups: [goodABackup] },
  { id: 'good-b', labels: { app: 'good' }, primary: hints(GOOD_B, [[1, 0, 4, 100]]), backups: [] },
  { id: 'no-log', labels: { app: 'good' }, recoveryLogPrefix: '' },
  { id: 'miss', labels: { kind: 'skips' }, primary: hints('recovery/miss', [[1, 0, 4, 100]]), backups: [undefined] },
  { id: 'nolive', labels: { kind: 'skips' }, primary: hints('recovery/nolive', []), backups: [] },
  { id: 'sick', labels: { kind: 'skips' }, primary: hints('recovery/sick', [[1, 500, 4, 600]]), backups: [] },
  { id: 'susp', labels: { kind: 'skips' }, primary: hints('recovery/susp', [[1, 500, 4, 600]]), backups: [] },
  { id: 'ghost', labels: { kind: 'skips' }, primary: hints('recovery/ghost', [[1, 500, 4, 600]]), backups: [] },
  { id: 'broken', labels: { app: 'broken' }, primary: hints('recovery/broken', [[1, 500, 4, 600]]), backups: [], hintsStatus: ConsumerStatus.SHARD_NOT_FOUND },
  { id: 'unp', labels: { app: 'unp' }, primary: hints('recovery/unp', [[1, 1000, 4, 1100]]), backups: [] },
  { id: 'deny', labels: { app: 'deny' }, primary: hints('recovery/deny', [[1, 1000, 4, 1100]]), backups: [] },
  { id: 'fail', labels: { app: 'fail' }, primary: hints('recovery/fail', [[1, 1000, 4, 1100]]), backups: [] },
];

const logs = new Map<string, Log>([
  [GOOD_A, { stores: [STORE], fragments: [frag(GOOD_A, 0, 400), frag(GOOD_A, 400, 1000), frag(GOOD_A, 1000, 2000), frag(GOOD_A, 2000, 3000), frag(GOOD_A, 3000, 4000), frag(GOOD_A, 4000, 5000)] }],
  [GOOD_B, { stores: [STORE], fragments: [frag(GOOD_B, 0, 100), frag(GOOD_B, 100, 200)] }],
  ['recovery/miss', { stores: [STORE], fragments: [frag('recovery/miss', 200, 300)] }],
  ['recovery/nolive', { stores: [STORE], fragments: [frag('recovery/nolive', 0, 300)] }],
  ['recovery/sick', { stores: [BAD_STORE], fragments: [frag('recovery/sick', 0, 300, { store: BAD_STORE })] }],
  ['recovery/susp', { stores: [STORE], suspended: true, fragments: [frag('recovery/susp', 0, 300)] }],
  // [0,500) is persisted and prunable, [500,900) is not persisted yet and overlaps no segment.
  ['recovery/unp', { stores: [STORE], fragments: [frag('recovery/unp', 0, 500), frag('recovery/unp', 500, 900, { modTime: 0 }), frag('recovery/unp', 900, 1200, { modTime: 0 })] }],
  ['recovery/deny', { stores: [STORE], fragments: [frag('recovery/deny', 0, 500), frag('recovery/deny', 1000, 1200)] }],
  // [0,500)'s object is a directory (its delete fails); [500,900)'s delete works.
  ['recovery/fail', { stores: [STORE], fragments: [frag('recovery/fail', 0, 500), frag('recovery/fail', 500, 900), frag('recovery/fail', 1000, 1200)] }],
]);

let fileRoot = '';
const objectFile = (f: Fragment) => join(fileRoot, 'store', fragmentContentPath(f));

function writeObjects(): void {
  for (const l of logs.values()) {
    for (const f of l.fragments) {
      if (f.backing_store !== STORE || f.mod_time === 0n) continue;
      const file = objectFile(f);
      mkdirSync(dirname(file), { recursive: true });
      if (f.journal === 'recovery/fail' && f.begin === 0n) mkdirSync(file, { recursive: true });
      else if (!existsSync(file)) writeFileSync(file, 'x'.repeat(Number(f.end - f.begin)));
    }
  }
}

const present = (log: string) => logs.get(log)!.fragments.filter((f) => f.mod_time !== 0n && f.backing_store === STORE && existsSync(objectFile(f))).map((f) => `${f.begin}-${f.end}`);

let broker: StubServer;
let consumer: StubServer;
let healthRequests: FragmentStoreHealthRequest[] = [];
let lockedDir = '';

function entry(name: string, l: Log): ListResponse_Journal {
  return {
    spec: {
      name,
      replication: 1,
      labels: { labels: [] },
      fragment: { length: 1024n, compression_codec: 1, stores: l.stores, refresh_interval: { seconds: 60n, nanos: 0 }, retention: undefined, flush_interval: undefined, path_postfix_template: '' },
      flags: 0,
      max_append_rate: 0n,
      suspend: l.suspended ? { level: JournalSpec_Suspend_Level.FULL, offset: 300n } : undefined,
    },
    mod_revision: 10n,
    route: { members: [{ zone: 'local', suffix: 'stub' }], primary: 0, endpoints: [] },
    create_revision: 1n,
  };
}

before(async () => {
  fileRoot = mkdtempSync(join(tmpdir(), 'prune-log-'));
  mkdirSync(join(fileRoot, 'store'), { recursive: true });
  writeObjects();
  lockedDir = join(fileRoot, 'store', 'recovery', 'deny');
  execFileSync('chattr', ['+a', lockedDir]);
  broker = await startJournalStub({
    list: (call: ServerWritableStream<ListRequest, ListResponse>) => {
      const names = (call.request.selector?.include?.labels ?? []).filter((l) => l.name === 'name').map((l) => l.value);
      const picked = [...logs].filter(([n]) => names.includes(n)).map(([n, l]) => entry(n, l));
      call.write(ListResponse.fromPartial({ status: Status.OK, header: stubHeader(), journals: picked }));
      call.end();
    },
    listFragments: (call: ServerUnaryCall<FragmentsRequest, FragmentsResponse>, cb: sendUnaryData<FragmentsResponse>) => {
      const l = logs.get(call.request.journal);
      if (!l) return cb(null, FragmentsResponse.fromPartial({ status: Status.JOURNAL_NOT_FOUND, header: stubHeader() }));
      if (l.suspended) return cb(null, FragmentsResponse.fromPartial({ status: Status.SUSPENDED, header: stubHeader() }));
      cb(null, FragmentsResponse.fromPartial({ status: Status.OK, header: stubHeader(), fragments: l.fragments.map((spec) => ({ spec, signed_url: '' })) }));
    },
    fragmentStoreHealth: (call: ServerUnaryCall<FragmentStoreHealthRequest, FragmentStoreHealthResponse>, cb: sendUnaryData<FragmentStoreHealthResponse>) => {
      healthRequests.push(call.request);
      const bad = call.request.fragment_store === BAD_STORE;
      cb(null, FragmentStoreHealthResponse.fromPartial({ status: bad ? Status.FRAGMENT_STORE_UNHEALTHY : Status.OK, header: stubHeader(), store_health_error: bad ? 'PUT .test/health-check: access denied' : '' }));
    },
  } as never);
  const listed = fromStubShards(shards);
  consumer = await startStubConsumer(listed.shards, listed.hints);
});
after(async () => {
  if (lockedDir) execFileSync('chattr', ['-a', lockedDir]);
  await broker?.stop();
  await consumer?.stop();
  rmSync(fileRoot, { recursive: true, force: true });
});
beforeEach(() => {
  writeObjects();
  healthRequests = [];
});

const run = async (args: string[], env: Record<string, string> = {}) => {
  const r = await runInProcess(args, { env: { BROKER_ADDRESS: broker.address, CONSUMER_ADDRESS: consumer.address, ...env } });
  return { ...r, what: describeInProcess(args, r) };
};

const ALL_GOOD_A = ['0-400', '400-1000', '1000-2000', '2000-3000', '3000-4000', '4000-5000'];

interface AuditFragment {
  begin: number;
  end: number;
  action: string;
  reason: string;
  result: string;
  path: string;
  backing_store: string;
  error?: string;
}
interface AuditLog {
  log: string;
  status: string;
  reason?: string;
  problem?: string;
  shards: string[];
  hints: { shard: string; source: string; hints: { log: string; live_nodes: unknown[] } }[];
  live_segments: { first_offset: number; last_offset: number; log: string }[];
  fragments: AuditFragment[];
  bytes: { total: number; delete: number; keep: number };
}
interface Audit {
  dry_run: boolean;
  deleted: boolean;
  logs: AuditLog[];
  totals: Record<string, number>;
  problems: string[];
}

describe('shards prune-log', () => {
  it('--dry-run prints the plan per log and deletes nothing', async () => {
    const r = await run(['shards', 'prune-log', '-l', 'app=good', '--dry-run', '--file-root', fileRoot]);
    assert.equal(r.code, 0, r.what);
    const rows = r.stdout.split('\n').map((l) => l.split('│').map((c) => c.trim()).filter(Boolean));
    const a = rows.find((c) => c[0] === GOOD_A);
    assert.ok(a, r.what);
    // Log, Shards, Hints, Live Ranges, Delete, Bytes, Keep, Bytes
    assert.deepEqual(a.slice(0, 8), [GOOD_A, 'good-a', 'good-a:backup.0, good-a:primary', '[500, 2000) [3000, head)', '2', '1.4 KiB', '4', '3.5 KiB']);
    const b = rows.find((c) => c[0] === GOOD_B);
    assert.deepEqual(b?.slice(4, 8), ['0', '0 B', '2', '200 B'], r.what);
    assert.match(r.stdout, /^plan: delete 2 fragment\(s\), 1\.4 KiB of content, of 1 log\(s\); 0 log\(s\) skipped$/m);
    assert.match(r.stdout, /dry run: nothing deleted\n$/);
    assert.deepEqual(present(GOOD_A), ALL_GOOD_A);
    // The stores were checked without the delete probe.
    assert.ok(healthRequests.length > 0);
    assert.ok(healthRequests.every((h) => !h.check_delete && h.fragment_store === STORE));
  });

  it('--yes deletes exactly the planned fragments', async () => {
    const r = await run(['shards', 'prune-log', '-l', 'app=good', '--yes', '--file-root', fileRoot]);
    assert.equal(r.code, 0, r.what);
    assert.deepEqual(present(GOOD_A), ['400-1000', '1000-2000', '3000-4000', '4000-5000']);
    assert.deepEqual(present(GOOD_B), ['0-100', '100-200']);
    assert.match(r.stdout, /^deleted 2 of 2 fragment\(s\), 1\.4 KiB of content$/m);
    assert.equal(r.stderr, '');
  });

  it('runs as shards prune too', async () => {
    const r = await run(['shards', 'prune', '-l', 'app=good', '--dry-run']);
    assert.equal(r.code, 0, r.what);
    assert.match(r.stdout, /plan: delete 2 fragment\(s\)/);
    assert.deepEqual(present(GOOD_A), ALL_GOOD_A);
  });

  it('-o json is an audit: hints used, live segments, each fragment with its action, reason and result', async () => {
    const r = await run(['shards', 'prune-log', '-l', 'app=good', '--yes', '-o', 'json', '--file-root', fileRoot]);
    assert.equal(r.code, 0, r.what);
    const doc = JSON.parse(r.stdout) as Audit;
    assert.equal(doc.dry_run, false);
    assert.equal(doc.deleted, true);
    assert.deepEqual(doc.logs.map((l) => [l.log, l.status]), [[GOOD_A, 'pruned'], [GOOD_B, 'nothing']]);
    const a = doc.logs[0]!;
    assert.deepEqual(a.shards, ['good-a']);
    assert.deepEqual(a.hints.map((h) => [h.shard, h.source, h.hints.log, h.hints.live_nodes.length]), [['good-a', 'backup.0', GOOD_A, 3], ['good-a', 'primary', GOOD_A, 2]]);
    // As the consumer stores them: Go's JSON, zero fields left out.
    assert.match(r.stdout, /"hints":\{"log":"recovery\/good-a","live_nodes":\[\{"fnode":10,"segments":\[\{"author":4660,"first_seq_no":10,"first_offset":1000,"last_seq_no":20,"last_offset":2000\}\]\}/);
    assert.ok(a.live_segments.length >= 2);
    assert.ok(a.live_segments.every((s) => s.log === GOOD_A));
    const byRange = new Map(a.fragments.map((f) => [`${f.begin}-${f.end}`, f]));
    assert.deepEqual([...byRange.keys()].sort(), [...ALL_GOOD_A].sort());
    for (const k of ['0-400', '2000-3000']) {
      const f = byRange.get(k)!;
      assert.equal(f.action, 'delete', k);
      assert.equal(f.result, 'deleted', k);
      assert.equal(f.backing_store, STORE);
      assert.equal(f.path, fragmentContentPath(logs.get(GOOD_A)!.fragments.find((x) => `${x.begin}-${x.end}` === k)!));
      assert.ok(f.reason.length > 0);
    }
    for (const k of ['400-1000', '1000-2000', '3000-4000', '4000-5000']) {
      assert.equal(byRange.get(k)!.action, 'keep', k);
      assert.equal(byRange.get(k)!.result, 'kept', k);
      assert.ok(byRange.get(k)!.reason.length > 0);
    }
    assert.deepEqual(a.bytes, { total: 5000, delete: 1400, keep: 3600 });
    assert.equal(doc.totals.fragments_deleted, 2);
    assert.equal(doc.totals.bytes_deleted, 1400);
    assert.deepEqual(doc.problems, []);
    // The plan went to stderr, leaving stdout to the document.
    assert.match(r.stderr, /plan: delete 2 fragment/);
  });

  it('--dry-run -o json marks planned deletes not run', async () => {
    const r = await run(['shards', 'prune-log', '-l', 'app=good', '--dry-run', '-o', 'json']);
    assert.equal(r.code, 0, r.what);
    const doc = JSON.parse(r.stdout) as Audit;
    assert.equal(doc.dry_run, true);
    assert.equal(doc.deleted, false);
    assert.deepEqual(doc.logs[0]!.fragments.filter((f) => f.action === 'delete').map((f) => f.result), ['not-run', 'not-run']);
    assert.deepEqual(present(GOOD_A), ALL_GOOD_A);
  });

  it('skips, with their reasons, logs with missing hints, hints without live files, an unhealthy store or a suspended journal', async () => {
    const r = await run(['shards', 'prune-log', '-l', 'kind=skips', '--yes', '-o', 'json', '--file-root', fileRoot]);
    assert.equal(r.code, 0, r.what);
    const doc = JSON.parse(r.stdout) as Audit;
    const by = new Map(doc.logs.map((l) => [l.log, l]));
    assert.deepEqual([...by.keys()].sort(), ['recovery/ghost', 'recovery/miss', 'recovery/nolive', 'recovery/sick', 'recovery/susp']);
    for (const l of by.values()) assert.equal(l.status, 'skipped', l.log);
    assert.match(by.get('recovery/miss')!.reason!, /backup\.0|hints/i);
    assert.match(by.get('recovery/nolive')!.reason!, /live/i);
    assert.match(by.get('recovery/sick')!.reason!, /file:\/\/\/bad\/ is unhealthy: PUT \.test\/health-check: access denied/);
    assert.match(by.get('recovery/susp')!.reason!, /suspended/);
    assert.equal(by.get('recovery/ghost')!.reason, 'the journal does not exist');
    assert.deepEqual(present('recovery/miss'), ['200-300']);
    assert.deepEqual(present('recovery/nolive'), ['0-300']);
    assert.deepEqual(present('recovery/susp'), ['0-300']);
    assert.equal(doc.deleted, false);
  });

  it('skipped logs show their reason in the table', async () => {
    const r = await run(['shards', 'prune-log', '-l', 'kind=skips', '--dry-run']);
    assert.equal(r.code, 0, r.what);
    assert.match(r.stdout, /recovery\/susp .*skipped: the journal is suspended/);
    assert.match(r.stdout, /; 5 log\(s\) skipped$/m);
  });

  it('an unpersisted fragment outside the live segments is a problem: nothing of its log is deleted, exit 1', async () => {
    const r = await run(['shards', 'prune-log', '-l', 'app=unp', '--yes', '--file-root', fileRoot]);
    assert.equal(r.code, 1, r.what);
    assert.match(r.stderr, /^gazctl: log recovery\/unp: 1 unpersisted fragment\(s\) overlap no live segment \(first: \[500, 900\)\): the selector does not include every shard that uses this log; nothing of it is deleted$/m);
    assert.deepEqual(present('recovery/unp'), ['0-500']);
  });

  it('a delete the store refuses is reported and the run goes on (exit 0)', async () => {
    const r = await run(['shards', 'prune-log', '-l', 'app=deny', '--yes', '-o', 'json', '--file-root', fileRoot]);
    assert.equal(r.code, 0, r.what);
    assert.match(r.stderr, /^gazctl: warning: log recovery\/deny: store file:\/\/\/store\/: no permission to delete; 1 fragment\(s\) left in place \(first: recovery\/deny\/0000000000000000-00000000000001f4-.*\)$/m);
    const doc = JSON.parse(r.stdout) as Audit;
    assert.equal(doc.logs[0]!.fragments.find((f) => f.begin === 0)!.result, 'denied');
    assert.equal(doc.totals.permission_denied, 1);
    assert.deepEqual(present('recovery/deny'), ['0-500', '1000-1200']);
  });

  it('other delete failures are reported, the other deletes still run, and the run exits 1', async () => {
    const r = await run(['shards', 'prune-log', '-l', 'app=fail', '--yes', '-o', 'json', '--file-root', fileRoot]);
    assert.equal(r.code, 1, r.what);
    assert.match(r.stderr, /^gazctl: log recovery\/fail: store file:\/\/\/store\/: 1 delete\(s\) failed; those fragments are left in place \(first: recovery\/fail\/0000000000000000-00000000000001f4-/m);
    const doc = JSON.parse(r.stdout) as Audit;
    const results = doc.logs[0]!.fragments.map((f) => [f.begin, f.result]);
    assert.deepEqual(results, [[0, 'failed'], [500, 'deleted'], [1000, 'kept']]);
    assert.equal(doc.totals.failed, 1);
    assert.equal(doc.problems.length, 1);
    assert.deepEqual(present('recovery/fail'), ['0-500', '1000-1200']);
  });

  it('refuses to delete without --yes when stdin is not a terminal (exit 2)', async () => {
    const r = await run(['shards', 'prune-log', '-l', 'app=good', '--file-root', fileRoot]);
    assert.equal(r.code, 2, r.what);
    assert.match(r.stderr, /^gazctl: refusing to delete fragments without confirmation/m);
    assert.deepEqual(present(GOOD_A), ALL_GOOD_A);
  });

  it('bad input is one line: no selector (2), --dry-run with --yes (2), no shards match, hints refused, unreachable consumer (1)', async () => {
    const cases: [string[], Record<string, string>, number, RegExp][] = [
      [['shards', 'prune-log'], {}, 2, /^gazctl: missing required flag -l\/--selector/],
      [['shards', 'prune-log', '-l', 'app=good', '--dry-run', '--yes'], {}, 2, /^gazctl: --dry-run and --yes contradict each other$/m],
      [['shards', 'prune-log', '-l', 'app=nothing'], {}, 1, /^gazctl: no shards match selector "app=nothing"$/m],
      [['shards', 'prune-log', '-l', 'app=broken', '--yes'], {}, 1, /^gazctl: fetching hints of shard broken: SHARD_NOT_FOUND$/m],
      [['shards', 'prune-log', '-l', 'app=good', '--timeout', '1s'], { CONSUMER_ADDRESS: 'http://127.0.0.1:1' }, 1, /^gazctl: .*(listing shards|UNAVAILABLE|ECONNREFUSED)/i],
    ];
    for (const [args, env, code, re] of cases) {
      const r = await run(args, env);
      assert.equal(r.code, code, r.what);
      assert.equal(r.stderr.trimEnd().split('\n').length, 1, r.what);
      assert.match(r.stderr, re, r.what);
    }
  });
});
