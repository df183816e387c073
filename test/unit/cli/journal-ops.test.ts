// reset-head, suspend and store-health run in-process against a scripted broker: what they send
// (offsets, suspend modes, the delete probe) and what they print for each answer.

import assert from 'node:assert/strict';
import { status as GrpcStatus, type sendUnaryData, type ServerReadableStream, type ServerWritableStream } from '@grpc/grpc-js';
import { after, before, beforeEach, describe, it } from 'node:test';

import {
  AppendRequest_Suspend,
  AppendResponse,
  FragmentStoreHealthResponse,
  FragmentsResponse,
  JournalSpec_Suspend_Level,
  ListResponse,
  Status,
  type AppendRequest,
  type FragmentStoreHealthRequest,
  type FragmentsRequest,
  type ListRequest,
  type ListResponse_Journal,
} from '../../../src/lib/protocol/gen/broker/protocol.js';
import { startJournalStub, stubHeader, type StubServer } from '../../../src/testing/stubs.js';
import { checkDeletePrefix } from '../../../src/commands/journals/store-health.js';
import { indexEnd, isUnknownSuspendMode } from '../../../src/lib/client/journal-ops.js';
import { describeInProcess, runInProcess } from '../../helpers/inproc.js';

interface J {
  name: string;
  level: JournalSpec_Suspend_Level;
  /** End of the last indexed fragment (0: none). */
  end: bigint;
}

const journals: J[] = [
  { name: 'ops/full', level: JournalSpec_Suspend_Level.FULL, end: 0n },
  { name: 'ops/none', level: JournalSpec_Suspend_Level.NONE, end: 4096n },
  { name: 'ops/partial', level: JournalSpec_Suspend_Level.PARTIAL, end: 100n },
  { name: 'ops/raced', level: JournalSpec_Suspend_Level.NONE, end: 7n },
  { name: 'ops/empty', level: JournalSpec_Suspend_Level.NONE, end: 0n },
  // Refuses every append (selected only by name).
  { name: 'ops/broken', level: JournalSpec_Suspend_Level.NONE, end: 50n },
];

/** Whether the scripted broker knows SUSPEND_KEEP (v0.103.0 does not). */
let keepSupported = false;
/** First message of every append. */
let appends: AppendRequest[] = [];
let healthRequests: FragmentStoreHealthRequest[] = [];

function entry(j: J): ListResponse_Journal {
  return {
    spec: {
      name: j.name,
      replication: 3,
      labels: { labels: [{ name: 'app', value: 'ops', prefix: false }] },
      fragment: undefined,
      flags: 0,
      max_append_rate: 0n,
      suspend: j.level === JournalSpec_Suspend_Level.NONE ? undefined : { level: j.level, offset: j.end },
    },
    mod_revision: 10n,
    route: { members: [{ zone: 'local', suffix: 'stub' }], primary: 0, endpoints: [] },
    create_revision: 1n,
  };
}

let broker: StubServer;

before(async () => {
  broker = await startJournalStub({
    list: (call: ServerWritableStream<ListRequest, ListResponse>) => {
      const inc = call.request.selector?.include?.labels ?? [];
      const names = inc.filter((l) => l.name === 'name').map((l) => l.value);
      const picked = journals.filter((j) => (names.length === 0 && j.name !== 'ops/broken') || names.includes(j.name));
      call.write(ListResponse.fromPartial({ status: Status.OK, header: stubHeader({ revision: 100n }), journals: picked.map(entry) }));
      call.end();
    },
    listFragments: (call: ServerReadableStream<FragmentsRequest, FragmentsResponse> & { request: FragmentsRequest }, cb: sendUnaryData<FragmentsResponse>) => {
      const j = journals.find((x) => x.name === call.request.journal)!;
      const fragments = j.end === 0n ? [] : [{ spec: { journal: j.name, begin: 0n, end: j.end, sum: {}, compression_codec: 1, backing_store: 'file:///', mod_time: 1n, path_postfix: '' }, signed_url: '' }];
      cb(null, FragmentsResponse.fromPartial({ status: Status.OK, header: stubHeader(), fragments }));
    },
    append: (call: ServerReadableStream<AppendRequest, AppendResponse>, cb: sendUnaryData<AppendResponse>) => {
      let first: AppendRequest | undefined;
      call.on('data', (m: AppendRequest) => {
        if (first) return;
        first = m;
        appends.push(m);
        if (m.suspend === AppendRequest_Suspend.SUSPEND_KEEP && !keepSupported) {
          cb({ code: GrpcStatus.UNKNOWN, details: 'Suspend: invalid Suspend variant (SUSPEND_KEEP)' });
        }
      });
      call.on('end', () => {
        if (!first || (first.suspend === AppendRequest_Suspend.SUSPEND_KEEP && !keepSupported)) return;
        const j = journals.find((x) => x.name === first!.journal)!;
        let status = Status.OK;
        if (j.name === 'ops/raced' && first.offset !== 0n) status = Status.WRONG_APPEND_OFFSET;
        if (j.name === 'ops/broken') status = Status.NOT_ALLOWED;
        if (j.level === JournalSpec_Suspend_Level.PARTIAL && first.suspend === AppendRequest_Suspend.SUSPEND_IF_FLUSHED) status = Status.SUSPENDED;
        const at = first.offset || j.end;
        cb(null, AppendResponse.fromPartial({ status, header: stubHeader({ revision: 100n }), commit: status === Status.OK ? { journal: j.name, begin: at, end: at, sum: {} } : undefined }));
      });
    },
    fragmentStoreHealth: (call: { request: FragmentStoreHealthRequest }, cb: sendUnaryData<FragmentStoreHealthResponse>) => {
      healthRequests.push(call.request);
      const bad = call.request.fragment_store.includes('missing');
      cb(null, FragmentStoreHealthResponse.fromPartial({
        status: bad ? Status.FRAGMENT_STORE_UNHEALTHY : Status.OK,
        header: stubHeader(),
        store_health_error: bad ? 'open /x/missing: no such file or directory\nsecond line' : '',
      }));
    },
  } as never);
});
after(() => broker.stop());
beforeEach(() => {
  appends = [];
  healthRequests = [];
  keepSupported = false;
});

const run = async (args: string[]) => {
  const r = await runInProcess(args, { env: { BROKER_ADDRESS: broker.address } });
  return { ...r, what: describeInProcess(args, r) };
};

const NAMES = 'name in (ops/full, ops/none, ops/partial, ops/raced, ops/empty)';

interface PlanDoc {
  applied: boolean;
  journals: { journal: string; suspend: string; fragments: number; new_head: string | null; action: string; reason?: string; result?: string }[];
}

describe('journals reset-head', () => {
  it('--dry-run prints the plan and sends no append', async () => {
    const r = await run(['journals', 'reset-head', '-l', NAMES, '--dry-run']);
    assert.equal(r.code, 0, r.what);
    assert.deepEqual(appends, []);
    const lines = r.stdout.trimEnd().split('\n');
    assert.equal(lines.at(-1), 'dry run: nothing reset');
    const rows = lines.slice(3, -2).map((l) => l.split('│').map((c) => c.trim()).filter(Boolean));
    assert.deepEqual(rows.map((c) => c.slice(0, 4)), [
      ['ops/full', 'FULL', '0', 'skip: fully suspended: its fragment index is empty'],
      ['ops/none', 'NONE', '1', '4096'],
      ['ops/partial', 'PARTIAL', '1', '100'],
      ['ops/raced', 'NONE', '1', '7'],
      ['ops/empty', 'NONE', '0', 'skip: no fragments: nothing to reset'],
    ]);
  });

  it('without --yes and without a terminal: one line, exit 2, nothing sent', async () => {
    const r = await run(['journals', 'reset-head', '-l', NAMES]);
    assert.equal(r.code, 2, r.what);
    assert.match(r.stderr, /^gazctl: refusing to reset write heads without confirmation: .*--yes.*\n$/);
    assert.deepEqual(appends, []);
  });

  it('--yes: explicit offsets at the index end; SUSPEND_NO_RESUME for unsuspended journals (never resumes one suspended meanwhile); a partial suspension is kept or the journal skipped', async () => {
    const r = await run(['journals', 'reset-head', '-l', NAMES, '--yes', '-o', 'json']);
    assert.equal(r.code, 0, r.what);
    const sent = new Map(appends.map((a) => [a.journal, a]));
    assert.deepEqual([...sent.keys()].sort(), ['ops/none', 'ops/partial', 'ops/raced']);
    assert.equal(sent.get('ops/none')!.offset, 4096n);
    assert.equal(sent.get('ops/none')!.suspend, AppendRequest_Suspend.SUSPEND_NO_RESUME);
    assert.equal(sent.get('ops/partial')!.offset, 100n);
    assert.equal(sent.get('ops/partial')!.suspend, AppendRequest_Suspend.SUSPEND_KEEP);
    const doc = JSON.parse(r.stdout) as PlanDoc;
    assert.equal(doc.applied, true);
    const by = new Map(doc.journals.map((j) => [j.journal, j]));
    assert.equal(by.get('ops/none')!.result, 'reset');
    assert.equal(by.get('ops/none')!.new_head, '4096');
    assert.equal(by.get('ops/raced')!.result, 'raced');
    assert.equal(by.get('ops/partial')!.result, 'skipped');
    assert.equal(by.get('ops/full')!.action, 'skip');
    assert.equal(by.get('ops/full')!.result, undefined);
    // Nothing was sent that could resume the partially suspended journal.
    assert.ok(appends.every((a) => a.journal !== 'ops/partial' || a.suspend === AppendRequest_Suspend.SUSPEND_KEEP));
  });

  it('a broker that keeps suspensions resets the partially suspended journal', async () => {
    keepSupported = true;
    const r = await run(['journals', 'reset-head', '-l', 'name=ops/partial', '--yes']);
    assert.equal(r.code, 0, r.what);
    assert.match(r.stdout, /ops\/partial\s*│\s*write head at 100/);
  });

  it('no journals matched: one line, exit 1', async () => {
    const r = await run(['journals', 'reset-head', '-l', 'name=ops/nope', '--yes']);
    assert.equal(r.code, 1, r.what);
    assert.equal(r.stderr, 'gazctl: no journals match selector "name=ops/nope"\n');
  });

  it('a failed reset: the others still run, one line, exit 1', async () => {
    const r = await run(['journals', 'reset-head', '-l', 'name in (ops/broken, ops/none)', '--yes']);
    assert.equal(r.code, 1, r.what);
    assert.deepEqual(appends.map((a) => a.journal).sort(), ['ops/broken', 'ops/none']);
    assert.equal(r.stderr, 'gazctl: failed to reset 1 of 2 journals; first: ops/broken: appending to ops/broken: NOT_ALLOWED\n');
    assert.match(r.stdout, /ops\/none\s*│\s*write head at 4096/);
  });

  it('a missing or bad selector is a usage error', async () => {
    for (const args of [['journals', 'reset-head'], ['journals', 'reset-head', '-l', 'name in (x'], ['journals', 'suspend'], ['journals', 'suspend', '-l', '!!']]) {
      const r = await run(args);
      assert.equal(r.code, 2, r.what);
      assert.equal(r.stderr.split('\n').length, 2, r.what);
    }
    assert.deepEqual(appends, []);
  });
});

describe('journals suspend', () => {
  it('sends SUSPEND_IF_FLUSHED, or SUSPEND_NOW with --force, to every journal not fully suspended; SUSPENDED is success', async () => {
    let r = await run(['journals', 'suspend', '-l', NAMES]);
    assert.equal(r.code, 0, r.what);
    assert.deepEqual(appends.map((a) => a.journal).sort(), ['ops/empty', 'ops/none', 'ops/partial', 'ops/raced']);
    assert.ok(appends.every((a) => a.suspend === AppendRequest_Suspend.SUSPEND_IF_FLUSHED && a.offset === 0n));
    assert.match(r.stdout, /ops\/full\s*│\s*FULL\s*│\s*0\s*│\s*already fully suspended/);
    assert.match(r.stdout, /ops\/partial\s*│\s*PARTIAL\s*│\s*100\s*│\s*already suspended/);
    assert.match(r.stdout, /ops\/none\s*│\s*NONE\s*│\s*0\s*│\s*not suspended: not idle/);
    appends = [];
    r = await run(['journals', 'suspend', '-l', 'name=ops/none', '--force', '-o', 'json']);
    assert.equal(r.code, 0, r.what);
    assert.deepEqual(appends.map((a) => a.suspend), [AppendRequest_Suspend.SUSPEND_NOW]);
    assert.deepEqual(JSON.parse(r.stdout), { journals: [{ journal: 'ops/none', result: 'not suspended', suspend: 'NONE', resume_offset: '0' }] });
  });
});

describe('journals suspend failures', () => {
  it('a refused request: the others still run, one line, exit 1; no match: exit 1', async () => {
    let r = await run(['journals', 'suspend', '-l', 'name in (ops/broken, ops/none)']);
    assert.equal(r.code, 1, r.what);
    assert.deepEqual(appends.map((a) => a.journal).sort(), ['ops/broken', 'ops/none']);
    assert.equal(r.stderr, 'gazctl: failed to suspend journal ops/broken: appending to ops/broken: NOT_ALLOWED\n');
    r = await run(['journals', 'suspend', '-l', 'name=ops/nope']);
    assert.equal(r.code, 1, r.what);
    assert.equal(r.stderr, 'gazctl: no journals match selector "name=ops/nope"\n');
  });
});

describe('journals store-health', () => {
  it('healthy: the upstream line on stdout; the delete probe only when asked, even with an empty prefix', async () => {
    let r = await run(['journals', 'store-health', 'file:///data/']);
    assert.equal(r.code, 0, r.what);
    assert.equal(r.stdout, 'Fragment store file:///data/ is healthy\n');
    r = await run(['journals', 'store-health', 'file:///data/', '--check-delete-prefix=']);
    assert.equal(r.code, 0, r.what);
    r = await run(['journals', 'store-health', 's3://bucket/p/?region=x', '--check-delete-prefix', 'probe/here/']);
    assert.equal(r.code, 0, r.what);
    assert.deepEqual(
      healthRequests.map((q) => [q.fragment_store, q.check_delete, q.check_delete_prefix]),
      [['file:///data/', false, ''], ['file:///data/', true, ''], ['s3://bucket/p/?region=x', true, 'probe/here/']],
    );
  });

  it('unhealthy: one line with the reason, exit 1', async () => {
    const r = await run(['journals', 'store-health', 'file:///missing/']);
    assert.equal(r.code, 1, r.what);
    assert.equal(r.stdout, '');
    assert.equal(r.stderr, 'gazctl: fragment store file:///missing/ is unhealthy: open /x/missing: no such file or directory; second line\n');
  });

  it('bad URLs and prefixes are usage errors, and nothing is asked', async () => {
    for (const args of [['ftp://x/'], ['file:///a'], ['s3:///'], ['file:///', '--check-delete-prefix', 'a'], ['file:///', '--check-delete-prefix', '/abs/'], []]) {
      const r = await run(['journals', 'store-health', ...args]);
      assert.equal(r.code, 2, r.what);
      assert.equal(r.stderr.split('\n').length, 2, r.what);
    }
    assert.deepEqual(healthRequests, []);
  });
});

describe('journal-ops helpers', () => {
  it('checkDeletePrefix', () => {
    assert.equal(checkDeletePrefix(''), undefined);
    assert.equal(checkDeletePrefix('a/'), undefined);
    assert.equal(checkDeletePrefix('a/b/'), undefined);
    assert.match(checkDeletePrefix('a')!, /end in/);
    assert.match(checkDeletePrefix('/a/')!, /relative/);
    assert.match(checkDeletePrefix('a//')!, /empty/);
    assert.match(checkDeletePrefix('../a/')!, /\.\./);
    assert.match(checkDeletePrefix('a/./')!, /\.\./);
  });

  it('indexEnd and isUnknownSuspendMode', () => {
    assert.equal(indexEnd([]), 0n);
    const f = (begin: bigint, end: bigint) => ({ spec: { journal: 'j', begin, end, sum: undefined, compression_codec: 1, backing_store: '', mod_time: 0n, path_postfix: '' }, signed_url: '' });
    assert.equal(indexEnd([f(0n, 10n), f(10n, 30n), f(5n, 20n)]), 30n);
    assert.equal(isUnknownSuspendMode({ code: GrpcStatus.UNKNOWN, details: 'Suspend: invalid Suspend variant (4)', metadata: {} }), true);
    assert.equal(isUnknownSuspendMode({ code: GrpcStatus.UNAVAILABLE, details: 'invalid Suspend variant', metadata: {} }), false);
    assert.equal(isUnknownSuspendMode(new Error('something else')), false);
  });
});
