// `gazctl shards unassign` in-process against a scripted consumer (the loopback Shard stub): the
// plan, the batches of 100, --failed, --dry-run, confirmation, -o json, and errors.
//
// The stub keeps shard assignments and answers Unassign as consumers do: it removes every FAILED
// assignment of a requested shard and, unless only_failed, its primary one, and lists the shards
// it changed; with dry_run it changes nothing but answers the same.

import assert from 'node:assert/strict';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { after, before, beforeEach, describe, it } from 'node:test';

import {
  ListResponse,
  ReplicaStatus_Code,
  Status,
  UnassignResponse,
  type ListRequest,
  type ListResponse_Shard,
  type UnassignRequest,
} from '../../../src/lib/protocol/gen/consumer/protocol.js';
import { startShardStub, stubHeader, type StubServer } from '../../../src/testing/stubs.js';
import { describeInProcess, runInProcess } from '../../helpers/inproc.js';

const { PRIMARY, STANDBY, FAILED } = ReplicaStatus_Code;

interface Shard {
  id: string;
  app: string;
  /** Route members in order (suffix, status); the primary is `primary` (-1: none). */
  members: { suffix: string; code: ReplicaStatus_Code }[];
  primary: number;
}

let shards: Shard[] = [];
let unassignAnswer: ((req: UnassignRequest) => UnassignResponse | { grpcError: string }) | undefined;
let listStatus = Status.OK;

function listed(s: Shard): ListResponse_Shard {
  return {
    spec: {
      id: s.id,
      sources: [],
      recovery_log_prefix: '',
      hint_prefix: '',
      hint_backups: 0,
      max_txn_duration: { seconds: 1n, nanos: 0 },
      min_txn_duration: undefined,
      disable: false,
      hot_standbys: 1,
      labels: { labels: [{ name: 'app', value: s.app, prefix: false }] },
      disable_wait_for_ack: false,
      ring_buffer_size: 0,
      read_channel_size: 0,
    },
    mod_revision: 5n,
    route: { members: s.members.map((m) => ({ zone: 'local', suffix: m.suffix })), primary: s.primary, endpoints: [] },
    status: s.members.map((m) => ({ code: m.code, errors: m.code === FAILED ? [`${s.id} crashed`] : [] })),
    create_revision: 1n,
  };
}

function matches(s: Shard, req: ListRequest): boolean {
  const have: Record<string, string> = { app: s.app, id: s.id };
  return (req.selector?.include?.labels ?? []).every((l) => (l.prefix ? (have[l.name] ?? '').startsWith(l.value) : have[l.name] === l.value));
}

/** What a consumer does with an Unassign request. */
function unassign(req: UnassignRequest): UnassignResponse {
  const changed: string[] = [];
  for (const id of req.shards) {
    const s = shards.find((x) => x.id === id);
    if (!s) continue;
    const keep = s.members.filter((m, i) => m.code !== FAILED && (req.only_failed || i !== s.primary));
    if (keep.length === s.members.length) continue;
    changed.push(id);
    if (!req.dry_run) {
      const primaryKept = req.only_failed && s.primary >= 0 && s.members[s.primary]!.code !== FAILED;
      const primaryMember = primaryKept ? s.members[s.primary] : undefined;
      s.members = keep;
      s.primary = primaryMember ? keep.indexOf(primaryMember) : -1;
    }
  }
  return UnassignResponse.fromPartial({ status: Status.OK, shards: changed });
}

let stub: StubServer;

function healthy(id: string, app = 'billing'): Shard {
  return { id, app, members: [{ suffix: 'c1', code: PRIMARY }, { suffix: 'c2', code: STANDBY }], primary: 0 };
}

function failing(id: string, app = 'billing'): Shard {
  return { id, app, members: [{ suffix: 'c1', code: PRIMARY }, { suffix: 'c3', code: FAILED }], primary: 0 };
}

const unassignRequests = () => stub.requests.filter((r) => r.method === 'unassign').map((r) => r.request as UnassignRequest);

async function run(args: string[]) {
  const full = ['shards', 'unassign', ...args];
  const r = await runInProcess(full, { env: { CONSUMER_ADDRESS: stub.address } });
  return { ...r, what: describeInProcess(full, r) };
}

/** Data rows of every table in `out`, as trimmed cells. */
function tableRows(out: string): string[][] {
  return out
    .split('\n')
    .filter((l) => l.startsWith('│'))
    .map((l) => l.split('│').slice(1, -1).map((c) => c.trim()));
}

describe('shards unassign', () => {
  before(async () => {
    stub = await startShardStub({
      list: (call, cb) =>
        cb(null, ListResponse.fromPartial({ status: listStatus, header: stubHeader(), shards: shards.filter((s) => matches(s, call.request)).map(listed) })),
      unassign: (call, cb) => {
        const a = unassignAnswer ? unassignAnswer(call.request) : unassign(call.request);
        if ('grpcError' in a) cb({ code: GrpcStatus.INTERNAL, details: a.grpcError });
        else cb(null, a);
      },
    });
  });
  after(() => stub.stop());
  beforeEach(() => {
    stub.requests.length = 0;
    unassignAnswer = undefined;
    listStatus = Status.OK;
    shards = [];
  });

  it('unassigns 250 shards in requests of 100, 100 and 50, printing the plan and each previous status and route', async () => {
    shards = Array.from({ length: 250 }, (_, i) => healthy(`shard-${String(i).padStart(3, '0')}`));
    shards.push(healthy('other', 'search'));
    const r = await run(['-l', 'app=billing', '--yes']);
    assert.equal(r.code, 0, r.what);
    assert.equal(r.stderr, '', r.what);
    const reqs = unassignRequests();
    assert.deepEqual(reqs.map((q) => q.shards.length), [100, 100, 50]);
    assert.deepEqual(reqs.flatMap((q) => q.shards), shards.slice(0, 250).map((s) => s.id));
    for (const q of reqs) assert.deepEqual([q.only_failed, q.dry_run], [false, false]);

    const rows = tableRows(r.stdout);
    assert.deepEqual(rows[0], ['ID', 'STATUS', 'ROUTE', 'WILL REMOVE']);
    assert.deepEqual(rows[1], ['shard-000', 'PRIMARY', 'c1:PRIMARY (primary), c2:STANDBY', 'c1 (primary)']);
    assert.deepEqual(rows[251], ['ID', 'PREVIOUS STATUS', 'PREVIOUS ROUTE', 'RESULT']);
    assert.deepEqual(rows[252], ['shard-000', 'PRIMARY', 'c1:PRIMARY (primary), c2:STANDBY', 'unassigned']);
    assert.equal(rows.length, 1 + 250 + 1 + 250);
    assert.match(r.stdout, /\n250 shards unassigned\n$/);
    // The consumer removed the primaries; the other application's shard is untouched.
    assert.ok(shards.slice(0, 250).every((s) => s.primary === -1 && s.members.length === 1));
    assert.equal(shards[250]!.primary, 0);
  });

  it('--failed takes only shards with a FAILED assignment and removes only those assignments', async () => {
    shards = [healthy('a'), failing('b'), failing('c'), { id: 'd', app: 'billing', members: [{ suffix: 'c9', code: FAILED }], primary: 0 }];
    const r = await run(['-l', 'app=billing', '--failed', '--yes']);
    assert.equal(r.code, 0, r.what);
    const reqs = unassignRequests();
    assert.equal(reqs.length, 1);
    assert.deepEqual(reqs[0], { shards: ['b', 'c', 'd'], only_failed: true, dry_run: false });
    const rows = tableRows(r.stdout);
    assert.deepEqual(rows.slice(1, 4).map((c) => [c[0], c[3]]), [
      ['b', 'c3 (failed)'],
      ['c', 'c3 (failed)'],
      ['d', 'c9 (failed)'],
    ]);
    assert.match(rows[1]![1]!, /^FAILED: b crashed$/);
    assert.deepEqual(shards.map((s) => s.members.map((m) => m.suffix).join(',')), ['c1,c2', 'c1', 'c1', '']);
    assert.equal(shards[1]!.primary, 0, 'a healthy primary stays');
  });

  it('--failed with no FAILED shard sends nothing and exits 0', async () => {
    shards = [healthy('a'), healthy('b')];
    const r = await run(['-l', 'app=billing', '--failed']);
    assert.equal(r.code, 0, r.what);
    assert.equal(r.stdout, 'no FAILED assignment among the 2 shards matched: nothing to unassign\n');
    assert.equal(unassignRequests().length, 0);
  });

  it('--dry-run sends dry_run, needs no confirmation, changes nothing and says what would go', async () => {
    shards = [healthy('a'), failing('b')];
    const r = await run(['-l', 'app=billing', '--dry-run']);
    assert.equal(r.code, 0, r.what);
    assert.deepEqual(unassignRequests(), [{ shards: ['a', 'b'], only_failed: false, dry_run: true }]);
    const rows = tableRows(r.stdout);
    assert.deepEqual(rows[2], ['b', 'FAILED: b crashed', 'c1:PRIMARY (primary), c3:FAILED', 'c1 (primary), c3 (failed)']);
    assert.deepEqual(rows.slice(4).map((c) => c[3]), ['would be unassigned (dry run)', 'would be unassigned (dry run)']);
    assert.match(r.stdout, /\ndry run: 2 shards would be unassigned, nothing changed\n$/);
    assert.deepEqual(shards.map((s) => s.members.length), [2, 2], 'nothing changed');
  });

  it('without --yes and without a terminal it prints the plan, refuses with exit 2 and sends nothing', async () => {
    shards = [healthy('a')];
    const r = await run(['-l', 'app=billing']);
    assert.equal(r.code, 2, r.what);
    assert.deepEqual(tableRows(r.stdout)[1]?.[0], 'a');
    assert.equal(r.stderr, 'gazctl: refusing to unassign shards without confirmation: stdin is not a terminal (pass --yes, or --dry-run to only see the plan)\n');
    assert.equal(unassignRequests().length, 0);
  });

  it('-o json prints one document with each shard, its route and statuses, the plan and the result', async () => {
    shards = [healthy('a'), failing('b')];
    shards[0]!.members[1]!.code = STANDBY;
    const r = await run(['-l', 'app=billing', '--failed', '--yes', '-o', 'json']);
    assert.equal(r.code, 0, r.what);
    const doc = JSON.parse(r.stdout) as {
      dry_run: boolean;
      only_failed: boolean;
      sent: boolean;
      shards: { id: string; route: { members: { suffix: string }[]; primary: number }; status: { code: string }[]; removes: unknown; result: string }[];
    };
    assert.deepEqual([doc.dry_run, doc.only_failed, doc.sent], [false, true, true]);
    assert.equal(doc.shards.length, 1);
    const b = doc.shards[0]!;
    assert.equal(b.id, 'b');
    assert.deepEqual(b.route.members.map((m) => m.suffix), ['c1', 'c3']);
    assert.deepEqual(b.status.map((s) => s.code), ['PRIMARY', 'FAILED']);
    assert.deepEqual(b.removes, [{ member: 'c3', why: 'failed' }]);
    assert.equal(b.result, 'unassigned');
  });

  it('a refused or failed Unassign is one line on stderr and exit 1', async () => {
    shards = [healthy('a')];
    unassignAnswer = () => UnassignResponse.fromPartial({ status: Status.ETCD_TRANSACTION_FAILED });
    const refused = await run(['-l', 'app=billing', '--yes']);
    assert.equal(refused.code, 1, refused.what);
    assert.equal(refused.stderr, 'gazctl: unassigning shards: ETCD_TRANSACTION_FAILED (batch 1 of 1, 1 shard)\n');

    unassignAnswer = () => ({ grpcError: 'boom' });
    const failed = await run(['-l', 'app=billing', '--yes']);
    assert.equal(failed.code, 1, failed.what);
    assert.equal(failed.stderr.split('\n').length, 2, failed.what);
    assert.match(failed.stderr, /^gazctl: .*boom.*\(batch 1 of 1, 1 shard\)\n$/);
  });

  it('a request failing after others took effect: the results so far, then one line and exit 1', async () => {
    shards = Array.from({ length: 250 }, (_, i) => healthy(`s${String(i).padStart(3, '0')}`));
    let n = 0;
    unassignAnswer = (req) => (++n === 2 ? UnassignResponse.fromPartial({ status: Status.ETCD_TRANSACTION_FAILED }) : unassign(req));
    const r = await run(['-l', 'app=billing', '--yes']);
    assert.equal(r.code, 1, r.what);
    assert.equal(r.stderr, 'gazctl: unassigning shards: ETCD_TRANSACTION_FAILED (batch 2 of 3, 100 shards; the 1 batch before it changed 100 shards)\n');
    assert.equal(unassignRequests().length, 2, 'no request after the failed one');
    const results = tableRows(r.stdout).slice(252).map((c) => c[3]);
    assert.deepEqual(
      [results.slice(0, 100), results.slice(100, 200), results.slice(200)].map((part) => [...new Set(part)]),
      [['unassigned'], ['failed (its request failed)'], ['not sent (an earlier request failed)']],
    );
    assert.match(r.stdout, /\n100 shards unassigned\n$/);
    assert.equal(shards.filter((s) => s.primary === -1).length, 100);
  });

  it('a refused listing, or a selector matching nothing, is exit 1 with one line and no Unassign', async () => {
    shards = [healthy('a')];
    listStatus = Status.ETCD_TRANSACTION_FAILED;
    const refused = await run(['-l', 'app=billing', '--yes']);
    assert.equal(refused.code, 1, refused.what);
    assert.equal(refused.stderr.split('\n').length, 2, refused.what);
    assert.match(refused.stderr, /^gazctl: listing shards: ETCD_TRANSACTION_FAILED\n$/);
    listStatus = Status.OK;
    const none = await run(['-l', 'app=nothing', '--yes']);
    assert.equal(none.code, 1, none.what);
    assert.equal(none.stderr, 'gazctl: no shards match selector "app=nothing"\n');
    assert.equal(unassignRequests().length, 0);
  });

  it('usage errors exit 2 before any call: no -l, --dry-run with --yes', async () => {
    const missing = await run(['--yes']);
    assert.equal(missing.code, 2, missing.what);
    assert.match(missing.stderr, /^gazctl: missing required flag -l\/--selector/);
    const both = await run(['-l', 'app=billing', '--dry-run', '--yes']);
    assert.equal(both.code, 2, both.what);
    assert.equal(both.stderr, 'gazctl: --dry-run and --yes contradict each other\n');
    assert.equal(stub.requests.length, 0);
  });
});
